"""The published CMR (SIGIR 2018) collection files: queries and qrels, read and written.

Queries: ``query_id <tab> type <tab> doc:sent_start:sent_end:m_start:m_end <tab> mention``
(lines may end with trailing spaces). Qrels: ``query_id <tab> type <tab> doc:sent_start:sent_end
<tab> rel`` with the entity type where TREC has its ``iter`` column and rel written as a float
(``1.0``, ``0.0``, ``-1.0`` = pooled but unknown). Query ids read ``<collection>:<kb or nil
id>:<mention id>``. Offsets are raw character offsets into the source document (the TAC
convention: markup and escapes counted), and every one is inclusive, the mention's end too:
"Jim Cracchiolo" (14 characters) at 1589 is ``1589:1602``, as in the published file, so a TAC
span ``1589-1602`` keeps its numbers. The functions below take Python-slice spans
(``[start, end)``) and apply this convention in one place.

cmrkit 0.1 wrote the mention end exclusive (``1589:1603``). A queries file in that layout is
recognised by its mention lengths (end - start equals the mention's length on most lines,
end - start + 1 on none) and refused with a note saying how to convert it, never read as if
it were inclusive.
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
    """One line of a CMR queries file; ``start``/``end`` as written (``end`` inclusive)."""

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

    @property
    def row(self) -> tuple[str, str, str, str]:
        """(query id, type, mention id, mention) as :func:`write_cmr_queries` takes them."""
        return self.qid, self.type, self.mention_id, self.text

    @property
    def span(self) -> tuple[int, int]:
        """The mention's raw span as a Python slice ``[start, end)``."""
        return self.start, self.end + 1


def cmr_docno(doc_id: str, start: int, end: int) -> str:
    """Sentence unit id ``DOC:start:last`` of the raw span ``[start, end)``."""
    return f"{doc_id}:{start}:{end - 1}"


def cmr_mention_id(doc_id: str, sent: tuple[int, int], span: tuple[int, int]) -> str:
    """Mention id ``DOC:sent_start:sent_last:m_start:m_last`` of raw spans ``[start, end)``."""
    return f"{cmr_docno(doc_id, *sent)}:{span[0]}:{span[1] - 1}"


def cmr_qid(collection: str, entity: str, mention_id: str) -> str:
    """Query id in the published style ``<collection>:<kb or nil id>:<mention id>``."""
    return f"{collection}:{entity}:{mention_id}"


def _fields(text: str) -> tuple[str, int, int, int, int]:
    parts = text.rsplit(":", 4)
    if len(parts) != 5 or not parts[0]:
        raise ValueError(f"{text!r} is not 'doc:sent_start:sent_end:m_start:m_end'")
    try:
        ss, se, ms, me = (int(p) for p in parts[1:])
    except ValueError:
        raise ValueError(f"{text!r} has non-integer offsets") from None
    return parts[0], ss, se, ms, me


def parse_mention_id(text: str) -> tuple[str, int, int, int, int]:
    """``DOC:ss:se:ms:me`` -> the five fields as written (all inclusive); ValueError when not
    that shape or when the mention does not lie inside the sentence."""
    doc, ss, se, ms, me = _fields(text)
    if not (0 <= ss <= ms <= me <= se):
        raise ValueError(f"{text!r}: the mention span must lie inside the sentence span")
    return doc, ss, se, ms, me


def end_convention(lines: Iterable[tuple[int, int, str]]) -> tuple[int, int]:
    """Of (m_start, m_end, mention text) lines: how many read as inclusive ends (end - start +
    1 is the mention's length) and how many as exclusive ends (end - start is)."""
    inclusive = exclusive = 0
    for start, end, text in lines:
        inclusive += end - start + 1 == len(text)
        exclusive += end - start == len(text)
    return inclusive, exclusive


def read_cmr_queries(path: str | os.PathLike, *, check_ends: bool = True) -> dict[str, CmrQuery]:
    """The queries of a CMR queries file, by query id, in file order.

    A file whose mention ends read as exclusive (written by cmrkit 0.1) is refused, and every
    mention must lie inside its sentence, unless ``check_ends`` is false (for callers that
    need only the query ids and types).
    """
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
            doc, ss, se, ms, me = _fields(mention_id)
        except ValueError as e:
            raise CmrkitError(f"column 3: {e}", path=path, where=f"line {n}") from None
        if qid in queries:
            raise CmrkitError(f"query id {qid} appears twice", path=path, where=f"line {n}")
        text = "\t".join(cols[3:]).strip()
        queries[qid] = CmrQuery(qid, etype, mention_id, doc, ss, se, ms, me, text, n)
    if not queries:
        raise CmrkitError("no queries in the file", path=path)
    if not check_ends:
        return queries
    _check_inclusive(queries.values(), path)
    for q in queries.values():
        try:
            parse_mention_id(q.mention_id)
        except ValueError as e:
            raise CmrkitError(f"column 3: {e}", path=path, where=f"line {q.line}") from None
    return queries


def _check_inclusive(queries: Iterable[CmrQuery], path: str | os.PathLike) -> None:
    qs = list(queries)
    inclusive, exclusive = end_convention((q.start, q.end, q.text) for q in qs)
    if exclusive > inclusive:
        first = next(q for q in qs if q.end - q.start == len(q.text))
        raise CmrkitError(
            f"mention ends are written exclusive (cmrkit 0.1's layout): on {exclusive} of "
            f"{len(qs)} lines end - start is the mention's length (line {first.line}: "
            f"{first.mention_id} for {first.text!r}), on {inclusive} end - start + 1 as in the "
            "published CMR files; rebuild the collection with this cmrkit, or subtract 1 from "
            "the last offset of column 3 on every line",
            path=path,
        )


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
            _fields(cols[2].strip())
        except ValueError:
            return False
        return True
    return False


def query_types(path: str | os.PathLike) -> dict[str, str]:
    """qid -> entity type from a CMR queries file or CMR qrels file."""
    if is_cmr_queries_file(path):
        return {q.qid: q.type for q in read_cmr_queries(path, check_ends=False).values()}
    return read_cmr_qrels(path)[1]


def format_rel(rel: int) -> str:
    return f"{float(rel):.1f}"


def write_cmr_queries(out: IO[str], queries: Iterable[tuple[str, str, str, str]]) -> None:
    """Write (query id, type, mention id, mention) lines in the published layout (mention text
    on one line, no trailing space); mention ids come from :func:`cmr_mention_id`."""
    for qid, etype, mention_id, text in queries:
        out.write(f"{qid}\t{etype}\t{mention_id}\t{' '.join(text.split())}\n")


def write_cmr_qrels(
    out: IO[str], qrels: Mapping[str, Mapping[str, int]], types: Mapping[str, str]
) -> None:
    """Write qrels in the published layout: entity type in column 2, float rels."""
    for qid, docs in qrels.items():
        for docno, rel in docs.items():
            out.write(f"{qid}\t{types[qid]}\t{docno}\t{format_rel(rel)}\n")
