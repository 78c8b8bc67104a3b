"""TREC runs, qrels and topics: the one place these formats are read and written.

Runs: ``qid Q0 docno rank score tag`` (whitespace separated). Like trec_eval, readers keep the
score and ignore the rank column; ranking is by score descending, ties broken by docno
descending (see :func:`ranked`).

Qrels: ``qid iter docno rel``; ``iter`` may hold anything (the published CMR qrels put the entity
type there); ``rel`` may be written as an integer or a float (``1.0``, ``-1.0``). rel < 0 marks a
pooled but unjudged document, 0 non-relevant, > 0 relevant (graded allowed).
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import math
import os
import re
import warnings
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import IO

from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_lines, split_zip_member

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]


@dataclass(frozen=True)
class RunRow:
    qid: str
    docno: str
    rank: int
    score: float
    tag: str


_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.0*)?")


def parse_relevance(text: str, path: object, line: int) -> int:
    """A relevance value written as an int or a whole float (``1``, ``1.0``, ``-1.0``) -> int.

    trec_eval reads the relevance with C ``atol``, which silently truncates ``0.5`` to 0 and
    ``1e2`` to 1; such values are refused here instead of being scored differently than meant.
    """
    if _WHOLE_NUMBER.fullmatch(text):
        return int(float(text))
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value):
        raise CmrkitError(
            f"relevance {text!r} is not a number; "
            "the 4th column must be an integer like 1, 0 or -1",
            path=path,
            where=f"line {line}",
        )
    raise CmrkitError(
        f"relevance {text!r} is not written as a whole number (trec_eval would truncate it); "
        "use integer grades (e.g. 0, 1, 2, -1)",
        path=path,
        where=f"line {line}",
    )


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    # Parsing creates millions of short-lived containers and no cycles; the cyclic collector
    # would otherwise rescan them over and over (it doubles the time on a 1M-line run).
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


# Every byte but the ASCII whitespace str.split() splits on: deleting these leaves the separators.
_NOT_SPACE = bytes(c for c in range(256) if c not in b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f")


def _raw_bytes(path: str | os.PathLike) -> bytes | None:
    """The bytes of a plain or gzipped file; None for a zip member or anything unreadable
    (the line-by-line reader then reports the problem)."""
    file, member = split_zip_member(path)
    if member is not None or file.suffix == ".zip":
        return None
    try:
        data = file.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error):
        return None
    return data


def _regular_columns(raw: bytes, width: int) -> list[bytes] | None:
    """The fields, when every line holds exactly ``width`` fields split by single spaces.

    Returns None for anything less regular (tabs, CR, repeated or edge spaces, blank lines,
    non-ASCII, a short or long line): the caller then parses line by line, which reports the
    exact line of a problem. (Splitting bytes is about twice as fast as splitting str.)
    """
    if not raw or not raw.isascii():
        return None
    if b"  " in raw or b"\n " in raw or b" \n" in raw or raw[:1] == b" ":
        return None
    if raw[-1:] != b"\n":
        raw += b"\n"
    lines = raw.count(b"\n")
    if raw.translate(None, _NOT_SPACE) != (b" " * (width - 1) + b"\n") * lines:
        return None
    tokens = raw.split()
    if len(tokens) != width * lines:
        return None
    return tokens


def _groups(qids: list[bytes]) -> list[tuple[str, int, int]] | None:
    """(qid, start, end) slices when each qid's lines are contiguous, else None."""
    order = list(dict.fromkeys(qids))
    out = []
    start = 0
    for i, qid in enumerate(order):
        end = qids.index(order[i + 1], start) if i + 1 < len(order) else len(qids)
        if qids[start:end].count(qid) != end - start:
            return None
        out.append((qid.decode("ascii"), start, end))
        start = end
    return out


def _read_qrels_fast(raw: bytes) -> Qrels | None:
    """The common case (integer grades, one judgment per (qid, docno)) in bulk; else None."""
    tokens = _regular_columns(raw, 4)
    if tokens is None:
        return None
    rel_texts = tokens[3::4]
    if b"_" in b"".join(rel_texts):
        return None
    try:
        rels = list(map(int, rel_texts))
    except ValueError:
        return None
    groups = _groups(tokens[0::4])
    if groups is None:
        return None
    docnos = list(map(bytes.decode, tokens[2::4]))
    qrels: Qrels = {}
    for qid, a, b in groups:
        docs = dict(zip(docnos[a:b], rels[a:b], strict=True))
        if len(docs) != b - a:
            return None
        qrels[qid] = docs
    return qrels


def read_qrels(path: str | os.PathLike) -> Qrels:
    """Read a qrels file; identical duplicate lines warn, conflicting ones are an error."""
    raw = _raw_bytes(path)
    with _no_gc():
        fast = _read_qrels_fast(raw) if raw is not None else None
    if fast is not None:
        return fast
    qrels: Qrels = {}
    seen_line: dict[tuple[str, str], int] = {}
    duplicates = 0
    for n, line in iter_lines(path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 4:
            raise CmrkitError(
                f"expected 4 fields 'qid iter docno rel', found {len(fields)}",
                path=path,
                where=f"line {n}",
            )
        qid, _, docno, rel_text = fields
        rel = parse_relevance(rel_text, path, n)
        docs = qrels.setdefault(qid, {})
        if docno in docs:
            if docs[docno] != rel:
                raise CmrkitError(
                    f"query {qid} document {docno} judged {docs[docno]} on line "
                    f"{seen_line[(qid, docno)]} and {rel} here; keep one judgment",
                    path=path,
                    where=f"line {n}",
                )
            duplicates += 1
            continue
        docs[docno] = rel
        seen_line[(qid, docno)] = n
    if not qrels:
        raise CmrkitError("no judgments in the qrels file", path=path)
    if duplicates:
        warnings.warn(
            f"{path}: {duplicates} identical duplicate judgment line(s) ignored", stacklevel=2
        )
    return qrels


def read_run_rows(path: str | os.PathLike) -> Iterable[tuple[int, RunRow]]:
    """(line number, row) for every line of a run file, validated."""
    for n, line in iter_lines(path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 6:
            raise CmrkitError(
                f"expected 6 fields 'qid Q0 docno rank score tag', found {len(fields)}",
                path=path,
                where=f"line {n}",
            )
        qid, _, docno, rank_text, score_text, tag = fields
        try:
            if "_" in score_text:
                raise ValueError(score_text)
            score = float(score_text)
        except ValueError:
            raise CmrkitError(
                f"score {score_text!r} is not a number", path=path, where=f"line {n}"
            ) from None
        if not math.isfinite(score):
            raise CmrkitError(f"score {score_text!r} is not finite", path=path, where=f"line {n}")
        try:
            rank = int(rank_text)
        except ValueError:
            raise CmrkitError(
                f"rank {rank_text!r} is not an integer", path=path, where=f"line {n}"
            ) from None
        yield n, RunRow(qid, docno, rank, score, tag)


def _read_run_fast(raw: bytes) -> Run | None:
    """The common case (single-space columns, numeric ranks, no duplicates) in bulk; else None."""
    tokens = _regular_columns(raw, 6)
    if tokens is None:
        return None
    if not all(map(bytes.isdigit, tokens[3::6])):
        return None
    score_texts = tokens[4::6]
    # float() accepts "1_0" (trec_eval's atof reads 1): such a score goes the strict way
    if b"_" in raw and b"_" in b"".join(score_texts):
        return None
    try:
        scores = list(map(float, score_texts))
    except ValueError:
        return None
    if not all(map(math.isfinite, scores)):
        return None
    groups = _groups(tokens[0::6])
    if groups is None:
        return None
    docnos = list(map(bytes.decode, tokens[2::6]))
    run: Run = {}
    for qid, a, b in groups:
        docs = dict(zip(docnos[a:b], scores[a:b], strict=True))
        if len(docs) != b - a:
            return None
        run[qid] = docs
    return run


def read_run(path: str | os.PathLike, *, dedupe: bool = False) -> Run:
    """Read a run as {qid: {docno: score}}.

    A repeated (qid, docno) is an error naming both lines, unless ``dedupe``, which keeps the
    best score.
    """
    raw = _raw_bytes(path)
    with _no_gc():
        fast = _read_run_fast(raw) if raw is not None else None
    if fast is not None:
        return fast
    run: Run = {}
    first_line: dict[tuple[str, str], int] = {}
    for n, row in read_run_rows(path):
        docs = run.setdefault(row.qid, {})
        if row.docno in docs:
            if not dedupe:
                raise CmrkitError(
                    f"query {row.qid} retrieves {row.docno} twice (first on line "
                    f"{first_line[(row.qid, row.docno)]}); pass --dedupe to keep the best score",
                    path=path,
                    where=f"line {n}",
                )
            docs[row.docno] = max(docs[row.docno], row.score)
            continue
        docs[row.docno] = row.score
        first_line[(row.qid, row.docno)] = n
    if not run:
        raise CmrkitError("the run file is empty", path=path)
    return run


def ranked(docs: Mapping[str, float]) -> list[tuple[str, float]]:
    """trec_eval's order: score descending, ties broken by docno descending.

    trec_eval keeps scores as single-precision floats, so scores equal in float32 (e.g.
    1.00000001 and 1.00000002) tie and fall back to the docno order; so do they here.
    """
    items = list(docs.items())
    single = array("f", [score for _, score in items]).tolist()
    order = sorted(range(len(items)), key=lambda i: (single[i], items[i][0]), reverse=True)
    return [items[i] for i in order]


def format_score(score: float) -> str:
    return f"{score:.6f}"


def write_run(out: IO[str], run: Mapping[str, Iterable[tuple[str, float]]], tag: str) -> None:
    """Write ranked lists (already in order) as TREC run lines, ranks from 1."""
    if any(c.isspace() for c in tag) or not tag:
        raise CmrkitError(f"run tag {tag!r} must be one non-empty word without spaces")
    for qid, docs in run.items():
        for rank, (docno, score) in enumerate(docs, 1):
            out.write(f"{qid} Q0 {docno} {rank} {format_score(score)} {tag}\n")


def write_qrels(
    out: IO[str], qrels: Mapping[str, Mapping[str, int]], iter_field: str = "0"
) -> None:
    """Write qrels lines ``qid iter docno rel`` in the given order."""
    for qid, docs in qrels.items():
        for docno, rel in docs.items():
            out.write(f"{qid} {iter_field} {docno} {rel}\n")


def read_topics_tsv(path: str | os.PathLike) -> dict[str, str]:
    """Pyserini topics: ``qid<TAB>query text`` per line."""
    topics: dict[str, str] = {}
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        if "\t" not in line:
            raise CmrkitError("expected 'qid<TAB>text'", path=path, where=f"line {n}")
        qid, text = line.split("\t", 1)
        if qid in topics:
            raise CmrkitError(f"query id {qid} appears twice", path=path, where=f"line {n}")
        topics[qid] = text
    return topics


def write_topics_tsv(out: IO[str], topics: Iterable[tuple[str, str]]) -> None:
    for qid, text in topics:
        clean = " ".join(text.split())
        out.write(f"{qid}\t{clean}\n")
