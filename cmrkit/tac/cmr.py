"""The published CMR (SIGIR 2018) collection files: queries and qrels, read and written.

Queries: ``query_id <tab> type <tab> doc:sent_start:sent_end:m_start:m_end <tab> mention``
(lines may end with trailing spaces). Qrels: ``query_id <tab> type <tab> doc:sent_start:sent_end
<tab> rel`` with the entity type where TREC has its ``iter`` column and rel written as a float
(``1.0``, ``0.0``, ``-1.0`` = pooled but unknown). Query ids read ``<collection>:<kb or nil
id>:<mention id>``. Offsets are raw character offsets into the source document (the TAC
convention: markup and escapes counted). cmrkit writes a sentence as ``DOC:first:last`` with
the last character included, as ``build-collection`` names sentence units, and a mention as
``m_start:m_end`` with the end exclusive, as the published example turns the TAC span
``1589-1601`` into ``1589:1602``. The functions below take Python-slice spans and apply these
conventions in one place.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import IO

from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_lines
from cmrkit.trec import Qrels, read_qrels


@dataclass(frozen=True)
class CmrQuery:
    """One line of a CMR queries file."""

    qid: str
    type: str
    mention_id: str
    doc_id: str
    sent_start: int
    sent_end: int
    start: int
    end: int
    text: str
    line: int = 0

    @property
    def unit(self) -> str:
        """The docno of the query's own sentence."""
        return f"{self.doc_id}:{self.sent_start}:{self.sent_end}"


def cmr_docno(doc_id: str, start: int, end: int) -> str:
    """Sentence unit id ``DOC:start:last`` of the raw span ``[start, end)``."""
    return f"{doc_id}:{start}:{end - 1}"


def cmr_mention_id(doc_id: str, sent: tuple[int, int], span: tuple[int, int]) -> str:
    """Mention id ``DOC:sent_start:sent_last:m_start:m_end`` of raw spans ``[start, end)``."""
    return f"{cmr_docno(doc_id, *sent)}:{span[0]}:{span[1]}"


def cmr_qid(collection: str, entity: str, mention_id: str) -> str:
    """Query id in the published style ``<collection>:<kb or nil id>:<mention id>``."""
    return f"{collection}:{entity}:{mention_id}"


def parse_mention_id(text: str) -> tuple[str, int, int, int, int]:
    """``DOC:ss:se:ms:me`` -> the five fields as written; ValueError when not that shape."""
    parts = text.rsplit(":", 4)
    if len(parts) != 5 or not parts[0]:
        raise ValueError(f"{text!r} is not 'doc:sent_start:sent_end:m_start:m_end'")
    try:
        ss, se, ms, me = (int(p) for p in parts[1:])
    except ValueError:
        raise ValueError(f"{text!r} has non-integer offsets") from None
    if not (0 <= ss <= ms < me <= se + 1):
        raise ValueError(f"{text!r}: the mention span must lie inside the sentence span")
    return parts[0], ss, se, ms, me


def read_cmr_queries(path: str | os.PathLike) -> dict[str, CmrQuery]:
    """The queries of a CMR queries file, by query id, in file order."""
    queries: dict[str, CmrQuery] = {}
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 4:
            raise CmrkitError(
                f"expected 4 tab-separated columns 'query id, type, "
                f"doc:sent_start:sent_end:m_start:m_end, mention', found {len(cols)}",
                path=path,
                where=f"line {n}",
            )
        qid, etype, mention_id = (c.strip() for c in cols[:3])
        try:
            doc, ss, se, ms, me = parse_mention_id(mention_id)
        except ValueError as e:
            raise CmrkitError(f"column 3: {e}", path=path, where=f"line {n}") from None
        if qid in queries:
            raise CmrkitError(f"query id {qid} appears twice", path=path, where=f"line {n}")
        text = "\t".join(cols[3:]).strip()
        queries[qid] = CmrQuery(qid, etype, mention_id, doc, ss, se, ms, me, text, n)
    if not queries:
        raise CmrkitError("no queries in the file", path=path)
    return queries


def read_cmr_qrels(path: str | os.PathLike) -> tuple[Qrels, dict[str, str]]:
    """Judgments (float rels read as ints) and each query's entity type (column 2)."""
    qrels = read_qrels(path)
    types: dict[str, str] = {}
    for n, line in iter_lines(path):
        fields = line.split()
        if not fields:
            continue
        qid, etype = fields[0], fields[1]
        if types.setdefault(qid, etype) != etype:
            raise CmrkitError(
                f"query {qid} has type {types[qid]} on an earlier line and {etype} here",
                path=path,
                where=f"line {n}",
            )
    return qrels, types


def is_cmr_queries_file(path: str | os.PathLike) -> bool:
    """True when the first non-empty line has the CMR queries shape."""
    for _, line in iter_lines(path):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 4:
            return False
        try:
            parse_mention_id(cols[2].strip())
        except ValueError:
            return False
        return True
    return False


def query_types(path: str | os.PathLike) -> dict[str, str]:
    """qid -> entity type from a CMR queries file or CMR qrels file."""
    if is_cmr_queries_file(path):
        return {q.qid: q.type for q in read_cmr_queries(path).values()}
    return read_cmr_qrels(path)[1]


def format_rel(rel: int) -> str:
    return f"{float(rel):.1f}"


def write_cmr_queries(out: IO[str], queries: Iterable[CmrQuery]) -> None:
    """Write queries in the published layout (mention text on one line, no trailing space)."""
    for q in queries:
        text = " ".join(q.text.split())
        out.write(f"{q.qid}\t{q.type}\t{q.mention_id}\t{text}\n")


def write_cmr_qrels(
    out: IO[str], qrels: Mapping[str, Mapping[str, int]], types: Mapping[str, str]
) -> None:
    """Write qrels in the published layout: entity type in column 2, float rels."""
    for qid, docs in qrels.items():
        for docno, rel in docs.items():
            out.write(f"{qid}\t{types[qid]}\t{docno}\t{format_rel(rel)}\n")
