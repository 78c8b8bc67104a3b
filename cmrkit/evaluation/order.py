"""trec_eval's ranking order for every query of a run at once.

Score descending (as doubles for trec_eval 10.0, as C floats for 9.0.8), ties by docno
descending; shared by the ir_measures path (``ranking.py``) and the trec_eval port
(``trec_eval.py``). A run read by the compiled reader is ranked and joined with qrels read by it
in compiled code (``cmrkit/_trecread.c``), in the files' bytes; anything else with numpy and
dicts. Both give the same order and grades.
"""

from __future__ import annotations

from dataclasses import dataclass

from cmrkit.trec import Docnos, Qrels, QrelsColumns, RunColumns, extension

MISSING = -(1 << 63)  # relevance of a retrieved document the qrels lack (below every grade)


@dataclass(frozen=True)
class Ranking:
    """The rankings of some of a run's queries in trec_eval's order: query ``k`` owns
    ``order[starts[k]:starts[k + 1]]`` (``lens[k]`` rows of ``docnos`` and ``scores``, best
    first, cut at the depth) and their grades ``grades[starts[k]:starts[k + 1]]`` (MISSING
    where the qrels lack the document). numpy int64 arrays but ``docnos``."""

    lens: object
    starts: object
    order: object
    grades: object
    docnos: object
    scores: object


def rank_all(
    cols: RunColumns,
    blocks: list[int],
    qrels: Qrels,
    depth: int | None,
    version: str = "10",
    *,
    byte_docnos: bool = False,
):
    """The :class:`Ranking` of the queries ``blocks`` (indexes into ``cols.qids``, in their
    order) with their grades in ``qrels``. ``byte_docnos``: the qrels' docnos are bytes already
    (as the run's, read in bulk)."""
    import itertools

    import numpy as np

    bounds = cols.starts.tolist()
    spans = cols.spans  # the compiled reader's: rank and join in its bytes
    rows = None
    if len(blocks) == len(cols.qids):
        docnos, scores = cols.docnos, cols.scores
        lens = np.diff(cols.starts)
    else:
        lens = np.asarray([bounds[i + 1] - bounds[i] for i in blocks], dtype=np.int64)
        rows = np.concatenate(
            [np.arange(bounds[i], bounds[i + 1]) for i in blocks] + [np.zeros(0, np.int64)]
        )
        scores = cols.scores[rows]
        if spans is not None:
            docnos = Docnos(spans, rows)
        else:
            docnos = list(
                itertools.chain.from_iterable(
                    cols.docnos[bounds[i] : bounds[i + 1]] for i in blocks
                )
            )
    nq = len(blocks)
    starts = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(lens, out=starts[1:])
    # trec_eval 9.0.8 keeps scores as C floats, 10.0 as doubles
    with np.errstate(over="ignore"):
        single = scores.astype(np.float32 if version == "9" else np.float64)
    beyond = int(np.count_nonzero(np.isinf(single) & np.isfinite(scores)))
    if beyond:
        import logging

        logging.getLogger("cmrkit").warning(
            f"{beyond} score(s) lie beyond float32's range (about ±3.4e38), in which trec_eval "
            "9.0.8 keeps scores: they rank as ±infinity, as there"
        )
    if spans is not None:
        module = extension()
        keys = np.ascontiguousarray(single, dtype=np.float64)
        order = np.frombuffer(
            module.rank(keys, starts, rows, spans.raw, spans.begins, spans.ends), np.int64
        )
    else:
        order = _numpy_order(single, lens, nq, docnos)
    if spans is not None and isinstance(qrels, QrelsColumns):
        # the qrels join in the files' bytes (docnos are never made)
        which = np.asarray([qrels.index.get(cols.qids[i], -1) for i in blocks], np.int64)
        q = qrels.spans
        grade = np.frombuffer(
            module.grades(spans.raw, spans.begins, spans.ends, rows, starts, q.raw, q.begins,
                          q.ends, qrels.grades, qrels.starts, which, MISSING),
            np.int64,
        )  # fmt: skip
    else:
        as_bytes = bool(docnos) and isinstance(docnos[0], bytes)
        grades = []
        for k, i in enumerate(blocks):
            judged = qrels[cols.qids[i]]
            if as_bytes and not byte_docnos:
                judged = dict(zip(map(str.encode, judged), judged.values(), strict=True))
            a, b = int(starts[k]), int(starts[k + 1])
            grades.append(map(judged.get, docnos[a:b], itertools.repeat(MISSING)))
        grade = np.fromiter(
            itertools.chain.from_iterable(grades), dtype=np.int64, count=len(docnos)
        )
    if depth is not None and int(lens.max(initial=0)) > depth:
        keep = (np.arange(len(order)) - np.repeat(starts[:-1], lens)) < depth
        order = order[keep]
        lens = np.minimum(lens, depth)
        np.cumsum(lens, out=starts[1:])
    return Ranking(lens, starts, order, grade[order], docnos, scores)


def _numpy_order(single, lens, nq: int, docnos):
    """trec_eval's order of every query's rows with numpy: score descending, ties by docno
    descending."""
    import numpy as np

    gid = np.repeat(np.arange(nq), lens)
    descending = (single[1:] <= single[:-1]) | (gid[1:] != gid[:-1])
    order = np.arange(len(single)) if descending.all() else np.lexsort((-single, gid))
    ordered = single[order]
    tied = np.flatnonzero((ordered[1:] == ordered[:-1]) & (gid[1:] == gid[:-1]))
    if len(tied):
        # ties: docno descending (strcmp order; str and ASCII bytes sort alike)
        breaks = np.flatnonzero(np.diff(tied) != 1)
        firsts = tied[np.concatenate(([0], breaks + 1))].tolist()
        lasts = (tied[np.concatenate((breaks, [len(tied) - 1]))] + 2).tolist()
        for a, b in zip(firsts, lasts, strict=True):
            order[a:b] = sorted(order[a:b].tolist(), key=docnos.__getitem__, reverse=True)
    return order
