"""TREC runs, qrels and topics: the one place these formats are read and written.

Runs: ``qid Q0 docno rank score tag`` (whitespace separated). Like trec_eval, readers keep the
score and ignore the rank column; ranking is by score descending, ties broken by docno
descending (see :func:`ranked`).

Qrels: ``qid iter docno rel``; ``iter`` may hold anything (the published CMR qrels put the entity
type there); ``rel`` may be written as an integer or a float (``1.0``, ``-1.0``). rel < 0 marks a
pooled but unjudged document, 0 non-relevant, > 0 relevant (graded allowed).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import IO

from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_lines

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]


@dataclass(frozen=True)
class RunRow:
    qid: str
    docno: str
    rank: int
    score: float
    tag: str


def parse_relevance(text: str, path: object, line: int) -> int:
    """A relevance value written as an int or a float (``1``, ``1.0``, ``-1.0``) -> int."""
    try:
        value = float(text)
    except ValueError:
        raise CmrkitError(
            f"relevance {text!r} is not a number; the 4th column must be an integer like 1, 0 or -1",
            path=path, where=f"line {line}",
        ) from None
    if not math.isfinite(value) or value != int(value):
        raise CmrkitError(
            f"relevance {text!r} is not a whole number; use integer grades (e.g. 0, 1, 2, -1)",
            path=path, where=f"line {line}",
        )
    return int(value)


def read_qrels(path: str | os.PathLike) -> Qrels:
    """Read a qrels file; identical duplicate lines warn, conflicting ones are an error."""
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
                path=path, where=f"line {n}",
            )
        qid, _, docno, rel_text = fields
        rel = parse_relevance(rel_text, path, n)
        docs = qrels.setdefault(qid, {})
        if docno in docs:
            if docs[docno] != rel:
                raise CmrkitError(
                    f"query {qid} document {docno} judged {docs[docno]} on line "
                    f"{seen_line[(qid, docno)]} and {rel} here; keep one judgment",
                    path=path, where=f"line {n}",
                )
            duplicates += 1
            continue
        docs[docno] = rel
        seen_line[(qid, docno)] = n
    if not qrels:
        raise CmrkitError("no judgments in the qrels file", path=path)
    if duplicates:
        warnings.warn(f"{path}: {duplicates} identical duplicate judgment line(s) ignored",
                      stacklevel=2)
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
                path=path, where=f"line {n}",
            )
        qid, _, docno, rank_text, score_text, tag = fields
        try:
            score = float(score_text)
        except ValueError:
            raise CmrkitError(f"score {score_text!r} is not a number", path=path,
                              where=f"line {n}") from None
        if not math.isfinite(score):
            raise CmrkitError(f"score {score_text!r} is not finite", path=path,
                              where=f"line {n}")
        try:
            rank = int(rank_text)
        except ValueError:
            raise CmrkitError(f"rank {rank_text!r} is not an integer", path=path,
                              where=f"line {n}") from None
        yield n, RunRow(qid, docno, rank, score, tag)


def read_run(path: str | os.PathLike, *, dedupe: bool = False) -> Run:
    """Read a run as {qid: {docno: score}}.

    A repeated (qid, docno) is an error naming both lines, unless ``dedupe``, which keeps the
    best score.
    """
    run: Run = {}
    first_line: dict[tuple[str, str], int] = {}
    for n, row in read_run_rows(path):
        docs = run.setdefault(row.qid, {})
        if row.docno in docs:
            if not dedupe:
                raise CmrkitError(
                    f"query {row.qid} retrieves {row.docno} twice (first on line "
                    f"{first_line[(row.qid, row.docno)]}); pass --dedupe to keep the best score",
                    path=path, where=f"line {n}",
                )
            docs[row.docno] = max(docs[row.docno], row.score)
            continue
        docs[row.docno] = row.score
        first_line[(row.qid, row.docno)] = n
    if not run:
        raise CmrkitError("the run file is empty", path=path)
    return run


def ranked(docs: Mapping[str, float]) -> list[tuple[str, float]]:
    """trec_eval's order: score descending, ties broken by docno descending."""
    return sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)


def format_score(score: float) -> str:
    return f"{score:.6f}"


def write_run(out: IO[str], run: Mapping[str, Iterable[tuple[str, float]]], tag: str) -> None:
    """Write ranked lists (already in order) as TREC run lines, ranks from 1."""
    if any(c.isspace() for c in tag) or not tag:
        raise CmrkitError(f"run tag {tag!r} must be one non-empty word without spaces")
    for qid, docs in run.items():
        for rank, (docno, score) in enumerate(docs, 1):
            out.write(f"{qid} Q0 {docno} {rank} {format_score(score)} {tag}\n")


def write_qrels(out: IO[str], qrels: Mapping[str, Mapping[str, int]], iter_field: str = "0") -> None:
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
