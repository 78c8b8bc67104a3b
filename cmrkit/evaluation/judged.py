"""Is a run judged at all by the qrels it is scored against?

A run of another collection (a copy, another tool's run, the wrong qrels file) shares query ids
with the qrels but none of its documents: every measure is 0 and nothing says why. This is the
one test of that, on what the scoring read already (no file is read again): cheap where it
matters, since a run of the qrels' collection is told by the first document it retrieved that
the qrels judge for its query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cmrkit.trec import RunColumns, run_columns


@dataclass(frozen=True)
class Unjudged:
    """A run none of whose ``documents`` retrieved for the ``queries`` it shares with the
    qrels is judged anywhere in them."""

    documents: int
    queries: int


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


FIRST = 100  # shared queries looked at for a document judged for its own query, first


def _docnos(cols: RunColumns, a: int | None = None, b: int | None = None) -> list[str]:
    """The docnos of rows a..b (None: all) as str, from the file's bytes when the compiled
    reader read it, so that the run's docnos are never all made for a few rows."""
    if cols.spans is not None:
        if a is None:
            return cols.spans.texts(as_str=True)
        raw, begins, ends = cols.spans.raw, cols.spans.begins, cols.spans.ends
        return [
            raw[x:y].decode() for x, y in zip(begins[a:b].tolist(), ends[a:b].tolist(), strict=True)
        ]
    return [_text(d) for d in (cols.docnos if a is None else cols.docnos[a:b])]


def _judged(docs: object) -> set[str]:
    """A query's judged docnos as str (a qrels dict, or the docnos of prefs or qrels_jg)."""
    keys = docs.keys() if isinstance(docs, Mapping) else docs
    return {_text(d) for d in keys}  # type: ignore[union-attr]


def unjudged(
    run: RunColumns | Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int] | Sequence[str]],
) -> Unjudged | None:
    """None when some document the run retrieved for a query of ``qrels`` is judged there (for
    any query); None too when they share no query (the scoring says so); else what was
    retrieved, unjudged. ``qrels`` maps each query to its judged documents (a {docno: grade}
    dict, or any collection of docnos), str or bytes alike. The first shared queries are
    looked at for a document judged for its own query (a run of the qrels' collection stops
    there); only then is every judged document gathered."""
    cols = run if isinstance(run, RunColumns) else run_columns(run)
    bounds = cols.starts.tolist()
    shared = [
        (qid, bounds[i], bounds[i + 1])
        for i, qid in enumerate(cols.qids)
        if qid in qrels and bounds[i + 1] > bounds[i]
    ]
    if not shared:
        return None
    for qid, a, b in shared[:FIRST]:
        judged = _judged(qrels[qid])
        if any(d in judged for d in _docnos(cols, a, b)):
            return None
    anywhere: set[str] = set()
    for docs in qrels.values():
        anywhere.update(_judged(docs))
    docnos = _docnos(cols)
    if any(d in anywhere for _, a, b in shared for d in docnos[a:b]):
        return None
    return Unjudged(sum(b - a for _, a, b in shared), len(shared))
