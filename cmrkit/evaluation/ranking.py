"""Scoring runs against qrels with trec_eval's numbers, per query, per group, and compared.

Ranking follows trec_eval: score descending (as doubles in trec_eval 10.0, as single-precision
floats in 9.0.8: ``version``), ties broken by docno descending; the rank column is ignored. A
qrels grade >= 1 is relevant, 0 non-relevant, < 0 pooled but unjudged (used by infAP, never
relevant). AP, infAP, RR, P, R, Success, nDCG@k and the counts are computed here with numpy,
following trec_eval's C code operation for operation (same doubles, sums added in trec_eval's
order), so the values are bit-identical; the other measures (Bpref, Rprec, nDCG) go to the
trec_eval port (``trec_eval.py``). RR@k and Judged@k, which trec_eval lacks, are computed on
the same ranking; xinfAP and infNDCG as TREC's sample_eval.pl computes them (``sampled.py``,
from the qrels' strata when given).

By default a query counts when it is in both the run and the qrels (trec_eval's default);
``all_queries`` is trec_eval ``-c``: a qrels query missing from the run is scored as an empty
ranking (0 for every measure but NumRel and NumQ).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures import SAMPLED_KINDS, TREC_EVAL_KIND, Measure, parse_measures
from cmrkit.evaluation.measures.own import (
    OWN_KINDS,
    POOLED,
    own_values,
    pooled_value,
    refuse_aggregate,
)
from cmrkit.evaluation.measures.trec import DEFAULT_VERSION, VERSIONS
from cmrkit.evaluation.order import MISSING as _MISSING
from cmrkit.evaluation.order import rank_all
from cmrkit.evaluation.trec_bulk import judged_grades
from cmrkit.trec import (
    Qrels,
    Run,
    RunColumns,
    Strata,
    read_qrels_with_strata,
    read_run_columns,
    run_columns,
)


@dataclass
class Result:
    """Per-query and aggregate values of one run; values keyed by measure name (``AP@10``)."""

    measures: list[Measure]
    per_query: dict[str, dict[str, float]]
    aggregate: dict[str, float]
    missing_from_run: list[str]
    missing_from_qrels: list[str]
    all_queries: bool = False
    depth: int | None = None
    version: str | None = None  # the trec_eval followed ("9" or "10"); None: not trec_eval's

    @property
    def queries(self) -> int:
        """Number of queries averaged."""
        return len(self.per_query)

    @property
    def scored(self) -> list[str]:
        """Queries with a ranking in the run (trec_eval -q prints these), sorted."""
        missing = set(self.missing_from_run)
        return [q for q in self.per_query if q not in missing]

    def values(self, measure: Measure | str, queries: Iterable[str]) -> list[float]:
        name = str(measure)
        return [self.per_query[q][name] for q in queries]


def aggregate(measure: Measure, values: Sequence[float]) -> float:
    """trec_eval's summary of per-query values: the sum for counts, else the mean (0 if none);
    a trec_eval measure without an ir_measures name (``set_F``) sums the values one by one, as
    trec_eval's ``all`` line does (`eval` prints those through trec_eval's engine)."""
    if measure.kind in OWN_KINDS:
        refuse_aggregate(measure)  # a pooled measure has no mean over some queries
    if measure.summed:
        return float(sum(values))
    if not values:
        return 0.0
    if measure.kind == TREC_EVAL_KIND.name:
        total = 0.0
        for v in values:
            total += v
        return total / len(values)
    return math.fsum(values) / len(values)


_NATIVE = frozenset(
    {"AP", "infAP", "RR", "R", "P", "Success", "Judged", "NumRel", "NumRet", "NumRelRet", "NumQ"}
)
_INFAP_EPSILON = 0.00001  # trec_eval's INFAP_EPSILON


def _native(measure: Measure) -> bool:
    """Computed here with trec_eval's arithmetic or sample_eval's estimators; the others go to
    trec_eval's code."""
    return (
        measure.kind in _NATIVE
        or measure.kind in OWN_KINDS
        or measure.kind in SAMPLED_KINDS
        or (measure.kind == "nDCG" and measure.cutoff is not None)
    )


def _check_strata(qrels: Qrels, strata: Strata) -> None:
    for qid, docs in qrels.items():
        known = strata.get(qid, {})
        for docno in docs:
            if docno not in known:
                raise CmrkitError(
                    f"query {qid} document {docno} is judged but has no stratum; every qrels "
                    "document needs one for xinfAP and infNDCG"
                )


def _prefix_sums(values, counts, picks):
    """For each query q (``counts[q]`` consecutive ``values``), the sum of its first
    ``pick[q]`` values for each pick, added one by one left to right as trec_eval's loops do
    (so the doubles are bit-identical; numpy's sum would add pairwise)."""
    import numpy as np

    nq = len(counts)
    width = int(counts.max()) if nq else 0
    offsets = np.zeros(nq + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    if nq * (width + 1) <= 4 * len(values) + (1 << 20):
        table = np.zeros((nq, width + 1))
        rows = np.repeat(np.arange(nq), counts)
        table[rows, np.arange(len(values)) - offsets[:-1][rows] + 1] = values
        np.cumsum(table, axis=1, out=table)  # accumulate: strictly sequential per row
        return [table[np.arange(nq), pick] for pick in picks]
    out = [np.zeros(nq) for _ in picks]
    for q in range(nq):
        sums = np.concatenate(([0.0], np.cumsum(values[offsets[q] : offsets[q + 1]])))
        for o, pick in zip(out, picks, strict=True):
            o[q] = sums[pick[q]]
    return out


def _native_values(
    ms: list[Measure], lens, starts, rel, num_rel: list[int], judged: tuple
) -> dict[str, list[float]]:
    """Per-query values of the native measures, trec_eval's formulas and order of operations
    (m_map.c, m_map_cut.c, m_infap.c, m_P.c, m_recall.c, m_recip_rank.c, m_success.c,
    m_ndcg_cut.c) on the ranked grades ``rel`` (``_MISSING`` when not in the qrels) and the
    queries' ``judged`` grades (``trec_bulk.judged_grades``)."""
    import numpy as np

    nq = len(lens)
    total = len(rel)
    gid = np.repeat(np.arange(nq), lens)
    pos = np.arange(total) - np.repeat(starts[:-1], lens)
    nrel = np.asarray(num_rel, dtype=np.float64)
    relevant = rel >= 1
    cum = np.zeros(total + 1, dtype=np.int64)

    def first_k(flags, k: int | None):
        np.cumsum(flags, out=cum[1:])
        head = lens if k is None else np.minimum(lens, k)
        return cum[starts[:-1] + head] - cum[starts[:-1]]

    hits = np.flatnonzero(relevant)
    found = first_k(relevant, None)
    hit_rank = np.arange(len(hits)) - np.repeat(np.concatenate(([0], np.cumsum(found)[:-1])), found)
    hit_rank += 1  # rel_so_far at each relevant document
    hit_pos = pos[hits].astype(np.float64)
    counts = {k: first_k(relevant, k) for k in {m.cutoff for m in ms}}
    out: dict[str, list[float]] = {}
    safe = np.where(nrel > 0, nrel, 1.0)

    ap_cuts = [m for m in ms if m.kind == "AP"]
    if ap_cuts:
        terms = hit_rank / (hit_pos + 1.0)
        sums = _prefix_sums(terms, found, [counts[m.cutoff] for m in ap_cuts])
        for m, s in zip(ap_cuts, sums, strict=True):
            out[m.name] = np.where(nrel > 0, s / safe, 0.0).tolist()
    if any(m.kind == "infAP" for m in ms):
        hit_q = gid[hits]
        np.cumsum(rel == 0, out=cum[1:])
        nonrel = cum[hits] - cum[starts[:-1]][hit_q]
        np.cumsum((rel < 0) & (rel != _MISSING), out=cum[1:])
        unjudged = cum[hits] - cum[starts[:-1]][hit_q]
        fj = np.where(hit_pos == 0, 1.0, hit_pos)
        before = hit_rank - 1
        x = (before + nonrel + unjudged) / fj
        y = (before + _INFAP_EPSILON) / ((before + nonrel) + 2 * _INFAP_EPSILON)
        terms = 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * x * y
        terms[hit_pos == 0] = 1.0
        (s,) = _prefix_sums(terms, found, [found])
        out["infAP"] = np.where(nrel > 0, s / safe, s).tolist()
    first = np.full(nq, -1.0)
    first[found > 0] = hit_pos[np.concatenate(([0], np.cumsum(found)[:-1]))[found > 0]]
    ctx = _Ranked(lens, rel, pos, nrel, safe, found, first, counts, first_k, judged)
    for m in ms:
        compute = _COMPUTE.get(m.kind)
        if compute is not None:
            out[m.name] = compute(ctx, m.cutoff).tolist()
    return out


@dataclass
class _Ranked:
    """What the per-kind computations share: every query's ranked grades and counts."""

    lens: object  # documents per query
    rel: object  # grades in rank order, all queries
    pos: object  # rank (0-based) of each row
    nrel: object  # relevant documents per query (float)
    safe: object  # nrel, 1 where 0 (a divisor)
    found: object  # relevant retrieved per query
    first: object  # rank of the first relevant document, -1 if none
    counts: dict  # cutoff -> relevant in the top k per query
    first_k: Callable  # (flags, k) -> flags set in the top k per query
    judged: tuple  # every query's judged grades (trec_bulk.judged_grades)


def _rr(c: _Ranked, k):
    import numpy as np

    ok = (c.first >= 0) & ((c.first < k) if k is not None else True)
    return np.where(ok, 1.0 / (np.maximum(c.first, 0.0) + 1.0), 0.0)


def _p(c: _Ranked, k):
    return c.counts[k] / float(k)


def _r(c: _Ranked, k):
    import numpy as np

    return np.where(c.nrel > 0, c.counts[k] / c.safe, 0.0)


def _success(c: _Ranked, k):
    import numpy as np

    return (c.counts[k] > 0).astype(np.float64)


def _judged(c: _Ranked, k):
    import numpy as np

    head = np.minimum(c.lens, k)
    judged = c.first_k(c.rel != _MISSING, k)
    return np.where(head > 0, judged / np.maximum(head, 1), 0.0)


def _ndcg_cut(c: _Ranked, k):
    import numpy as np

    deepest = min(k, int(c.lens.max(initial=0)))  # a cutoff past every ranking costs nothing
    log2 = np.asarray([math.log2(i + 2) for i in range(deepest)])  # rank i + 1
    gain = (c.rel > 0) & (c.pos < k)
    at = np.flatnonzero(gain)
    terms = c.rel[at].astype(np.float64) / log2[c.pos[at]]
    positive = c.first_k(gain, None)
    (dcg,) = _prefix_sums(terms, positive, [positive])
    ideal = _ideal_dcgs(c.judged, k)
    return np.where(ideal > 0, dcg / np.where(ideal > 0, ideal, 1.0), dcg)


def _num_q(c: _Ranked, k):
    import numpy as np

    return np.ones(len(c.lens))


# the per-kind computations of the native measures (AP and infAP are batched above)
_COMPUTE: dict[str, Callable] = {
    "RR": _rr,
    "P": _p,
    "R": _r,
    "Success": _success,
    "Judged": _judged,
    "nDCG": _ndcg_cut,
    "NumRel": lambda c, k: c.nrel,
    "NumRet": lambda c, k: c.lens.astype(float),
    "NumRelRet": lambda c, k: c.found.astype(float),
    "NumQ": _num_q,
}


def _num_relevant(judged: tuple) -> list[int]:
    """Judgments with grade >= 1, per query (``judged``: ``trec_bulk.judged_grades``)."""
    import numpy as np

    grades, starts, sizes = judged
    cum = np.zeros(len(grades) + 1, dtype=np.int64)
    np.cumsum(grades >= 1, out=cum[1:])
    return (cum[starts + sizes] - cum[starts]).tolist()


def _ideal_dcgs(judged: tuple, k: int):
    """:func:`_ideal_dcg` of every query (``judged``: ``trec_bulk.judged_grades``), with numpy: the
    same terms added in the same order (a zero-padded row per query, summed left to right)."""
    import numpy as np

    from cmrkit.evaluation.trec_bulk import log2_discounts

    grades, starts, sizes = judged
    nq = len(sizes)
    qid = np.repeat(np.arange(nq), sizes)
    positive = grades > 0
    g, q = grades[positive], qid[positive]
    order = np.lexsort((-g, q))  # per query, the gains from the highest down
    g, q = g[order], q[order]
    counts = np.bincount(q, minlength=nq)
    rank = np.arange(len(g)) - np.repeat(np.cumsum(counts) - counts, counts)
    keep = rank < k
    width = int(min(k, counts.max(initial=0)))
    if nq * width > 4 * len(g) + (1 << 20):
        bounds = zip(starts.tolist(), (starts + sizes).tolist(), strict=True)
        return np.asarray([_ideal_dcg(grades[a:b].tolist(), k) for a, b in bounds])
    terms = np.zeros((nq, width))
    terms[q[keep], rank[keep]] = g[keep] / log2_discounts(width)[rank[keep]]
    return np.cumsum(terms, axis=1)[:, -1] if width else np.zeros(nq)


def _ideal_dcg(grades: Iterable[int], k: int) -> float:
    ideal = 0.0
    for i, gain in enumerate(sorted((g for g in grades if g > 0), reverse=True)[:k]):
        ideal += gain / math.log2(i + 2)
    return ideal


def _trec_eval_values(others: list[Measure], ranked, judged: tuple, qrels, version: str):
    """The measures this module leaves to trec_eval's code (Bpref, Rprec, nDCG, set_F, ...):
    computed by trec_bulk.py on the same rankings, a value per query."""
    import numpy as np

    from cmrkit.evaluation.measures import trec as defs
    from cmrkit.evaluation.trec_bulk import NONPOOL, UNJUDGED, check_grades, evaluate_rows
    from cmrkit.evaluation.trec_eval import Options

    check_grades(qrels)
    rel = ranked.grades
    flat = np.where(rel == _MISSING, NONPOOL, np.where(rel < 0, UNJUDGED, rel))
    columns = [
        defs.Column(defs.BY_NAME[m.family or m.trec_name], m.params, [m.name]) for m in others
    ]
    got = evaluate_rows(flat, ranked.lens, judged, columns, Options(version=version))
    return {m.name: v for m, v in zip(others, got, strict=True)}


def evaluate(
    run: Run | RunColumns,
    qrels: Qrels,
    measures: Sequence[Measure | str] | None = None,
    *,
    all_queries: bool = False,
    depth: int | None = None,
    strata: Strata | None = None,
    version: str = DEFAULT_VERSION,
    name: str | None = None,
) -> Result:
    """Score a run: per-query values and their trec_eval aggregate for each measure.

    ``run`` is {qid: {docno: score}} or :class:`~cmrkit.trec.RunColumns`. ``depth`` keeps
    only the top ``depth`` documents of each ranking (trec_eval ``-M``). ``strata`` gives the
    stratum of every qrels document for xinfAP and infNDCG (default: one stratum).
    ``version`` is the trec_eval whose ranking is followed: "10" (10.0, scores as doubles) or
    "9" (9.0.8, scores as C floats); the measures computed here agree in both otherwise.
    ``name``: the run's, for its errors (one of several runs scored together).
    """
    if version not in VERSIONS:
        raise CmrkitError(f"trec_eval version {version!r}: choose 9 (9.0.8) or 10 (10.0)")
    ms = parse_measures(measures, version)
    if depth is not None and depth < 1:
        raise CmrkitError(f"depth {depth} must be a positive number of documents")
    cols = run if isinstance(run, RunColumns) else run_columns(run)
    in_run = set(cols.qids)
    common = sorted(in_run & set(qrels))
    missing_from_run = sorted(set(qrels) - in_run)
    missing_from_qrels = sorted(in_run - set(qrels))
    if not common:
        run_name = "the run" if name is None else f"run {name}"
        raise CmrkitError(
            f"no query in common between {run_name} and the qrels (run queries such as "
            f"{missing_from_qrels[0]!r}, qrels queries such as {missing_from_run[0]!r}); "
            "check that the files belong together"
        )
    scored = sorted(common + missing_from_run) if all_queries else common
    blocks = [i for i, q in enumerate(cols.qids) if q in qrels]
    ranked = rank_all(cols, blocks, qrels, depth, version)
    lens, starts, rel = ranked.lens, ranked.starts, ranked.grades
    qids = [cols.qids[i] for i in blocks]
    judged = judged_grades(qrels, qids)
    num_rel = _num_relevant(judged)
    native = [m for m in ms if _native(m) and m.kind not in SAMPLED_KINDS]
    values = _native_values(native, lens, starts, rel, num_rel, judged) if native else {}
    if any(m.kind in SAMPLED_KINDS for m in ms):
        import cmrkit.evaluation.sampled as sampled

        if strata is not None:
            _check_strata({q: qrels[q] for q in qids}, strata)
        estimates = sampled.per_query(cols, blocks, qrels, strata, depth)
        values["xinfAP"] = [e[0] for e in estimates]
        values["infNDCG"] = [e[1] for e in estimates]
    own = [m for m in ms if m.kind in OWN_KINDS]  # cmrkit's own measures (measures/own.py)
    own_rows = own_values(own, ranked, judged, qids, scored, qrels) if own else {}
    values.update({key: [rows[q] for q in qids] for key, rows in own_rows.items()})
    per_query: dict[str, dict[str, float]] = {qid: {} for qid in scored}
    where = {q: k for k, q in enumerate(qids)}
    others = [m for m in ms if not _native(m)]
    values.update(_trec_eval_values(others, ranked, judged, qrels, version) if others else {})
    for qid in scored:
        row = per_query[qid]
        k = where.get(qid)
        for m in ms:
            if k is not None:
                row[m.name] = values[m.name][k]
            elif not _native(m):
                row[m.name] = 0.0
            elif m.kind == "NumRel":
                row[m.name] = float(sum(g >= 1 for g in qrels[qid].values()))
            else:
                row[m.name] = 1.0 if m.kind == "NumQ" else 0.0
    for measure_name, by_query in own_rows.items():  # queries missing from the run too
        for qid in scored:
            per_query[qid][measure_name] = by_query[qid]
    agg = {
        m.name: pooled_value(m, per_query)
        if m.kind in POOLED
        else aggregate(m, [per_query[q][m.name] for q in scored])
        for m in ms
    }
    return Result(
        ms, per_query, agg, missing_from_run, missing_from_qrels, all_queries, depth, version
    )


def evaluate_files(
    run_path: str | os.PathLike,
    qrels_path: str | os.PathLike,
    measures: Sequence[Measure | str] | None = None,
    *,
    all_queries: bool = False,
    depth: int | None = None,
    dedupe: bool = False,
    version: str = DEFAULT_VERSION,
) -> Result:
    """:func:`evaluate` on a run file and a qrels file (four columns, or sample_eval's five
    with the stratum of each document)."""
    ms = parse_measures(measures, version)
    qrels, strata = read_qrels_with_strata(qrels_path, columns=True)
    run = read_run_columns(run_path, dedupe=dedupe)
    return evaluate(
        run, qrels, ms, all_queries=all_queries, depth=depth, strata=strata, version=version
    )
