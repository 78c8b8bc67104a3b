"""The ranking engine: runs scored against qrels with trec_eval's numbers, per query, for
groups, comparisons and cmrkit's own measures; and its data layout (:class:`Flat`).

Ranking follows trec_eval: score descending (as doubles in trec_eval 10.0, as single-precision
floats in 9.0.8: ``version``), ties broken by docno descending; the rank column is ignored. A
qrels grade >= 1 is relevant, 0 non-relevant, < 0 pooled but unjudged (used by infAP, never
relevant). Every measure is computed by its kernel (``measures/``, registered beside its
definition): the kernels of the ranking's relevant documents (AP, infAP, RR, P, R, Success,
nDCG@k, the counts, Judged@k, MentionRecall@k) and cmrkit's AUC on :class:`Flat`, every ranking
one after another in flat arrays (cheaper than trec_eval's matrices for the default set); the
others (Bpref, Rprec, nDCG, trec_eval's measures without an ir_measures name) on a matrix of the
same rankings (``trec_bulk.py``); xinfAP and infNDCG as TREC's sample_eval.pl computes them
(``measures/sampled.py``, from the qrels' strata when given). The values are trec_eval's to the
last bit on either layout.

By default a query counts when it is in both the run and the qrels (trec_eval's default);
``all_queries`` is trec_eval ``-c``: a qrels query missing from the run is scored as an empty
ranking (0 for every measure but NumRel and NumQ, AUC's unretrieved units ranked last).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures import TREC_EVAL_KIND, Measure, parse_measures
from cmrkit.evaluation.measures.base import NUM_Q, NUM_REL, ROWS, SAMPLED, sequential_sums, within
from cmrkit.evaluation.measures.own import pooled_value, refuse_aggregate
from cmrkit.evaluation.measures.trec import DEFAULT_VERSION, VERSIONS
from cmrkit.evaluation.order import MISSING, rank_all
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
    if measure.pooled:
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


def _check_strata(qrels: Qrels, strata: Strata) -> None:
    for qid, docs in qrels.items():
        known = strata.get(qid, {})
        for docno in docs:
            if docno not in known:
                raise CmrkitError(
                    f"query {qid} document {docno} is judged but has no stratum; every qrels "
                    "document needs one for xinfAP and infNDCG"
                )


class _FlatHits:
    """The documents of one class in every query's ranking, in rank order (see
    ``measures/base.py``)."""

    def __init__(self, layout: Flat, cls: str) -> None:
        import numpy as np

        self.layout, self.cls = layout, cls
        self.index = np.flatnonzero(layout.mask(cls))
        self.counts = layout.count(cls, None)
        self.query = np.repeat(np.arange(layout.nq), self.counts)
        self.rank = self.index - layout.starts[:-1][self.query]
        self.ordinal = within(self.counts) + 1
        self.grade = layout.grades[self.index]

    def before(self, cls: str):
        cum = self.layout.cumulative(cls)
        return cum[self.index] - cum[self.layout.starts[:-1][self.query]]


class Flat:
    """The ranking engine's layout (``base.RANKED`` and ``SCORED``): every scored query's
    ranking in trec_eval's order, one after another (``grades``, MISSING where the qrels lack
    the document; query k owns ``starts[k]:starts[k + 1]``), the queries with a ranking first
    (``ranking``: ``order.Ranking``), then, with ``-c``, the qrels queries the run lacks as
    empty rankings; ``judged``: each query's judgments' grades (``trec_bulk.judged_grades``).
    The relevance level is 1."""

    level = 1

    def __init__(self, ranking, qids: list[str], missing: list[str], judged: tuple,
                 sample=None) -> None:  # fmt: skip
        import numpy as np

        self.np = np
        self.ranking = ranking
        self.ranked = len(qids)
        self.qids = qids + missing
        self.nq = len(self.qids)
        end = ranking.starts[-1:]
        self.n = np.concatenate((ranking.lens, np.zeros(len(missing), np.int64)))
        self.starts = np.concatenate((ranking.starts, np.repeat(end, len(missing))))
        self.grades = ranking.grades
        self.judged = judged
        grades, first, sizes = judged
        cum = np.zeros(len(grades) + 1, dtype=np.int64)
        np.cumsum(grades >= 1, out=cum[1:])
        self.R = cum[first + sizes] - cum[first]
        self._sample = sample
        self._cache: dict = {}
        self._cum, self._cum_of = None, None

    def _cached(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def mask(self, cls: str):
        g = self.grades
        masks = {
            "rel": lambda: g >= 1, "judged_rel": lambda: g >= 1, "nonrel": lambda: g == 0,
            "unjudged": lambda: (g < 0) & (g != MISSING), "nonpool": lambda: g == MISSING,
            "judged": lambda: g != MISSING, "unj": lambda: g < 0, "gain": lambda: g > 0,
        }  # fmt: skip
        return self._cached(("mask", cls), masks[cls])

    def cumulative(self, cls: str):
        """How many documents of ``cls`` come before each row (and in all, last): one buffer,
        refilled for another class (a fresh array per class would cost its pages each time)."""
        np = self.np
        if self._cum_of != cls:
            if self._cum is None:
                self._cum = np.zeros(len(self.grades) + 1, dtype=np.int64)
            np.cumsum(self.mask(cls), out=self._cum[1:])
            self._cum_of = cls
        return self._cum

    def count(self, cls: str, k: int | None):
        def make():
            cum = self.cumulative(cls)
            head = self.n if k is None else self.np.minimum(self.n, k)
            first = self.starts[:-1]
            return cum[first + head] - cum[first]

        return self._cached(("count", cls, k), make)

    @property
    def found(self):
        return self.count("rel", None)

    nrr = found

    def hits(self, cls: str) -> _FlatHits:
        return self._cached(("hits", cls), lambda: _FlatHits(self, cls))

    def first(self, cls: str):
        h = self.hits(cls)
        first = self.np.full(self.nq, -1, dtype=self.np.int64)
        some = h.counts > 0
        first[some] = h.rank[(self.np.cumsum(h.counts) - h.counts)[some]]
        return first

    def total(self, hits: _FlatHits, terms, cutoffs) -> list:
        picks = [hits.counts if k is None else self.count(hits.cls, k) for k in cutoffs]
        return sequential_sums(terms, hits.counts, picks)

    def ideal_gains(self):
        """Each query's positive judged grades, highest first (the ideal ranking's gains)."""
        np = self.np
        grades, _, sizes = self.judged
        positive = grades > 0
        g, q = grades[positive], np.repeat(np.arange(self.nq), sizes)[positive]
        order = np.lexsort((-g, q))
        return g[order], np.bincount(q, minlength=self.nq)

    def scores(self, a: int, b: int):
        """The run's scores of rows ``a:b`` (in rank order), as doubles."""
        r = self.ranking
        return self.np.asarray(r.scores, dtype=self.np.float64)[r.order[a:b]]

    def sampled(self) -> list[tuple[float, float]]:
        """(xinfAP, infNDCG) of each query with a ranking (``measures/sampled.py``)."""
        return self._cached("sampled", self._sample)


def _kernel_values(ms: list[Measure], layout: Flat) -> dict[str, list[float]]:
    """The values of the measures computed on the flat layout, a value per row of it; the
    measures of one kernel computed at once (their cutoffs together). A query missing from the
    run counts as trec_eval ``-c`` counts it for a trec_eval family (0, but its relevant
    judgments for NumRel and 1 for NumQ), as its empty ranking scores for cmrkit's own
    measures (AUC: its judged units below every retrieved one)."""
    np = layout.np
    batches: dict = {}
    for m in ms:
        comp = m.computation
        batches.setdefault(comp.kernel if comp.cutoffs else m, []).append(m)
    out: dict[str, list[float]] = {}
    with np.errstate(all="ignore"):
        for group in batches.values():
            comps = [m.computation for m in group]
            if not comps[0].cutoffs:
                (got,) = comps[0].family.compute(layout, comps[0].params)
                out[group[0].name] = got.tolist()
                continue
            cutoffs = list(dict.fromkeys(c.cutoff for c in comps))
            got = comps[0].kernel(layout, cutoffs)
            for m, c in zip(group, comps, strict=True):
                values = got[cutoffs.index(c.cutoff)]
                out[m.name] = values.tolist() if hasattr(values, "tolist") else list(values)
    for m in ms:  # the queries missing from the run (-c)
        comp = m.computation
        if comp.layout == SAMPLED:  # its queries with a ranking only
            out[m.name] = out[m.name] + [0.0] * (layout.nq - layout.ranked)
        elif comp.family is not None and comp.family.summary not in (NUM_REL, NUM_Q):
            out[m.name][layout.ranked :] = [0.0] * (layout.nq - layout.ranked)  # as trec_eval -c
    return out


def _rows_values(ms: list[Measure], layout: Flat, version: str) -> dict[str, list]:
    """The measures whose kernels read trec_eval's matrices (Bpref, Rprec, nDCG, set_F, ...),
    computed by trec_bulk.py on the same rankings, a value per row of the flat layout (0 for
    a query missing from the run)."""
    import numpy as np

    from cmrkit.evaluation.measures import trec as defs
    from cmrkit.evaluation.trec_bulk import NONPOOL, UNJUDGED, evaluate_rows
    from cmrkit.evaluation.trec_eval import Options

    rel = layout.ranking.grades
    flat = np.where(rel == MISSING, NONPOOL, np.where(rel < 0, UNJUDGED, rel))
    columns = [defs.Column(m.computation.family, _column_params(m), [m.name]) for m in ms]
    grades, starts, sizes = layout.judged
    r = layout.ranked
    judged = (grades[: int(starts[r]) if r < layout.nq else len(grades)], starts[:r], sizes[:r])
    got = evaluate_rows(flat, layout.ranking.lens, judged, columns, Options(version=version))
    missing = [0.0] * (layout.nq - r)
    return {m.name: list(v) + missing for m, v in zip(ms, got, strict=True)}


def _column_params(m: Measure):
    if m.spec is not None:
        return m.params
    return None if m.cutoff is None else [m.cutoff]


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
    qids = [cols.qids[i] for i in blocks]
    missing = missing_from_run if all_queries else []
    layouts = {m.name: m.computation.layout for m in ms}
    if strata is not None and SAMPLED in layouts.values():
        _check_strata({q: qrels[q] for q in qids}, strata)

    def sample():
        from cmrkit.evaluation.measures.sampled import per_query

        return per_query(cols, blocks, qrels, strata, depth)

    layout = Flat(ranked, qids, missing, judged_grades(qrels, qids + missing), sample)
    rows = [m for m in ms if layouts[m.name] == ROWS]
    values = _kernel_values([m for m in ms if layouts[m.name] != ROWS], layout)
    if rows or any(m.spec is not None for m in ms):
        from cmrkit.evaluation.trec_bulk import check_grades

        check_grades(qrels)  # trec_eval's per-grade counters, as trec_eval bounds them
    values.update(_rows_values(rows, layout, version) if rows else {})
    where = {q: k for k, q in enumerate(layout.qids)}
    per_query = {qid: {m.name: values[m.name][where[qid]] for m in ms} for qid in scored}
    agg = {
        m.name: pooled_value(m, per_query)
        if m.pooled
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
