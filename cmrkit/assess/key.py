"""Blind pair ids and the answer key that maps them back to query/candidate pairs.

Assessors see only opaque pair ids (``x`` + 10 hex digits, a salted hash of the pair, so the
same pair keeps its id across the exports of one pool with one seed, and ids say nothing about
the query, the candidate or where it came from). ``pool export`` writes the key beside the
tasks, never inside what assessors get: a TSV with the header
``pair_id  query_id  doc_id  hit_id  position  gold`` (``gold`` is the known answer of a
quality-control pair, 1 or 0, else empty; ids a spreadsheet would evaluate are written with a
leading apostrophe, see :mod:`cmrkit.escaping`). ``judgments aggregate --key`` reads it back.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass

from cmrkit.errors import CmrkitError
from cmrkit.escaping import csv_cell, csv_value
from cmrkit.fileio import iter_lines

KEY_COLUMNS = ("pair_id", "query_id", "doc_id", "hit_id", "position", "gold")


@dataclass(frozen=True)
class KeyEntry:
    """What one blind pair id stands for."""

    pair_id: str
    qid: str
    docno: str
    hit_id: str
    position: int
    gold: int | None


def pair_id(salt: str, qid: str, docno: str) -> str:
    """The blind id of a pair: ``x`` + the first 10 hex digits of a salted sha256."""
    digest = hashlib.sha256(f"{salt}\t{qid}\t{docno}".encode()).hexdigest()
    return "x" + digest[:10]


def default_key_path(output: str | os.PathLike) -> str:
    """``pools/sample.html`` -> ``pools/sample.key.tsv``; a folder ``pools/mturk`` ->
    ``pools/mturk.key.tsv`` (beside it, so it is never handed out with it)."""
    out = os.fspath(output).rstrip("/\\")
    stem, ext = os.path.splitext(out)
    return f"{stem if ext else out}.key.tsv"


def write_key(entries: Iterable[KeyEntry], path: str | os.PathLike) -> None:
    """Write the key as TSV, one pair per line in task order."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\t".join(KEY_COLUMNS) + "\n")
        for e in entries:
            gold = "" if e.gold is None else str(e.gold)
            qid, docno = csv_cell(e.qid), csv_cell(e.docno)  # a spreadsheet may open it
            f.write(f"{e.pair_id}\t{qid}\t{docno}\t{e.hit_id}\t{e.position}\t{gold}\n")


def read_key(path: str | os.PathLike) -> dict[str, KeyEntry]:
    """The entries of a key file by pair id."""
    entries: dict[str, KeyEntry] = {}
    for n, line in iter_lines(path):
        if n == 1:
            if tuple(line.split("\t")) != KEY_COLUMNS:
                raise CmrkitError(
                    "not a key file from `cmrkit pool export` (its header must be "
                    f"{' '.join(KEY_COLUMNS)}, tab-separated)",
                    path=path,
                    where="line 1",
                )
            continue
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(KEY_COLUMNS) or fields[5] not in ("", "0", "1"):
            raise CmrkitError(
                f"expected {len(KEY_COLUMNS)} tab-separated fields ({', '.join(KEY_COLUMNS)}) "
                "with gold 0, 1 or empty",
                path=path,
                where=f"line {n}",
            )
        pid, qid, docno, hit, pos, gold = fields
        qid, docno = csv_value(qid), csv_value(docno)
        try:
            position = int(pos)
        except ValueError:
            raise CmrkitError(
                f"position {pos!r} is not a number", path=path, where=f"line {n}"
            ) from None
        entry = KeyEntry(pid, qid, docno, hit, position, int(gold) if gold else None)
        known = entries.get(pid)
        if known is not None and (known.qid, known.docno) != (qid, docno):
            raise CmrkitError(
                f"pair id {pid} stands for two pairs ({known.qid} {known.docno} and {qid} {docno})",
                path=path,
                where=f"line {n}",
            )
        entries[pid] = entry
    if not entries:
        raise CmrkitError("the key file holds no pairs", path=path)
    return entries


def merge_keys(paths: Iterable[str | os.PathLike]) -> dict[str, KeyEntry]:
    """The entries of several key files (e.g. one per assessment round); a pair id that stands
    for different pairs in two files is refused."""
    merged: dict[str, KeyEntry] = {}
    for p in paths:
        for pid, entry in read_key(p).items():
            known = merged.get(pid)
            if known is not None and (known.qid, known.docno) != (entry.qid, entry.docno):
                raise CmrkitError(
                    f"pair id {pid} stands for {entry.qid} {entry.docno} here but for "
                    f"{known.qid} {known.docno} in another --key file",
                    path=p,
                )
            merged.setdefault(pid, entry)
    return merged
