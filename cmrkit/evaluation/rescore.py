"""Runs scored against many qrels quickly: each run is ranked once, each qrels prepared once,
and a scoring only looks at the judged documents (what simulating pools at many budgets needs).

A data layout of the measures' kernels (``measures/``): the relevant documents a run ranks, per
query (:class:`Hits`), which the AP and nDCG kernels read as they read every other layout, on
trec_eval's ranking; xinfAP and infNDCG are sample_eval's estimates on its ranking
(``measures/sampled.py``). The values are :func:`cmrkit.evaluation.evaluate`'s, to the last bit;
the mean is over the queries given, a query without judgments or missing from the run scoring
0 (trec_eval ``-c``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cmrkit.evaluation.measures.sampled as sampled
from cmrkit.evaluation.measures.dcg import ndcg_at
from cmrkit.evaluation.measures.ranked import ap
from cmrkit.trec import Qrels, Run, RunColumns, Strata, ranked

KERNELS = {"AP": ap, "nDCG": ndcg_at}  # the measures scored on trec_eval's ranking


class Judgments:
    """Qrels (and the strata of sample_eval's qrels) prepared for scoring many runs."""

    def __init__(self, qrels: Qrels, strata: Strata | None = None) -> None:
        self.qrels = qrels
        self.strata = strata
        self.relevant = {
            q: [(d, g) for d, g in docs.items() if g >= 1] for q, docs in qrels.items()
        }
        self._stats: dict[str, sampled.SampleStats] = {}
        self._grades: dict[str, list[int]] = {}

    def grades(self, qid: str) -> list[int]:
        """The grades of the query's relevant judgments, highest first (the ideal ranking's)."""
        if qid not in self._grades:
            self._grades[qid] = sorted((g for _, g in self.relevant[qid]), reverse=True)
        return self._grades[qid]

    def ideal_dcg(self, qid: str) -> float:
        """Deprecated (the ideal DCG is ``measures.dcg.ideal_dcg``'s): the query's."""
        import warnings

        import numpy as np

        from cmrkit.evaluation.measures.dcg import ideal_dcg

        warnings.warn(
            "Judgments.ideal_dcg is cmrkit.evaluation.measures.dcg.ideal_dcg now; the method "
            "goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        gains = np.asarray(sorted((g for _, g in self.relevant[qid]), reverse=True), np.int64)
        return float(ideal_dcg(gains, np.asarray([len(gains)]), [None])[0][0])

    def strata_of(self, qid: str) -> dict[str, str] | None:
        return self.strata.get(qid, {}) if self.strata is not None else None

    def stats(self, qid: str) -> sampled.SampleStats:
        if qid not in self._stats:
            self._stats[qid] = sampled.sample_stats(self.qrels[qid], self.strata_of(qid))
        return self._stats[qid]


class _RelevantHits:
    """A query's relevant documents a run ranks, in rank order (``measures/base.py``)."""

    def __init__(self, rank, grade, counts) -> None:
        from cmrkit.evaluation.measures.base import within

        self.rank, self.grade, self.counts = rank, grade, counts
        self.ordinal = within(counts) + 1


class Hits:
    """The layout rescoring feeds the AP and nDCG kernels: for each of some queries, the ranks
    (in trec_eval's order, from 0) and grades of the relevant documents a run ranks, how many
    relevant judgments it has and their grades. Its classes of documents are ``rel`` and
    ``gain`` (grades are whole numbers: both are the grades of 1 and above); the relevance level
    is 1."""

    level = 1

    def __init__(self, rows: list[list[tuple[int, int]]], relevant: list[list[int]]) -> None:
        """``rows``: each query's (rank from 1, grade) of its relevant documents ranked, in
        rank order; ``relevant``: the grades of its relevant judgments, highest first."""
        import itertools

        import numpy as np

        self.np = np
        self.nq = len(rows)
        counts = np.fromiter(map(len, rows), dtype=np.int64, count=self.nq)
        pairs = np.fromiter(
            itertools.chain.from_iterable(itertools.chain.from_iterable(rows)), dtype=np.int64,
            count=2 * int(counts.sum()),
        )  # fmt: skip
        self._hits = _RelevantHits(pairs[0::2] - 1, pairs[1::2], counts)
        self.R = np.fromiter(map(len, relevant), dtype=np.int64, count=self.nq)
        self.found = self.nrr = counts
        self._relevant = relevant

    def hits(self, cls: str) -> _RelevantHits:
        if cls not in ("rel", "gain"):
            raise ValueError(f"rescoring knows the relevant documents only, not {cls!r}")
        return self._hits

    def total(self, hits: _RelevantHits, terms, cutoffs) -> list:
        from cmrkit.evaluation.measures.base import sequential_sums

        if any(k is not None for k in cutoffs):
            raise ValueError("rescoring scores whole rankings")
        return sequential_sums(terms, hits.counts, [hits.counts for _ in cutoffs])

    def ideal_gains(self):
        import itertools

        ideal = itertools.chain.from_iterable(self._relevant)  # each highest first
        return self.np.fromiter(ideal, dtype=self.np.int64, count=int(self.R.sum())), self.R


class RankedRun:
    """A run's rank of every retrieved document, per query, in trec_eval's order and in
    sample_eval's (cut at 1,000)."""

    def __init__(self, run: Run | RunColumns) -> None:
        docs_of = run.to_run() if isinstance(run, RunColumns) else run
        self.trec: dict[str, dict[str, int]] = {}
        self.sample: dict[str, dict[str, int]] = {}
        for qid, docs in docs_of.items():
            self.trec[qid] = {d: k for k, (d, _) in enumerate(ranked(docs), 1)}
            ranking = sampled.sample_ranking(list(docs.items()))
            self.sample[qid] = {d: k for k, d in enumerate(ranking, 1)}

    def values(self, measure: str, judgments: Judgments, queries: Sequence[str]) -> list[float]:
        """Each query's value of ``measure`` (AP, nDCG, xinfAP, infNDCG); 0 for a query
        without judgments or missing from the run."""
        if measure not in KERNELS:
            return [self._estimate(measure, q, judgments) for q in queries]
        rows, relevant = [], []
        for qid in queries:
            ranks = self.trec.get(qid) if judgments.qrels.get(qid) else None
            judged = judgments.relevant.get(qid) if ranks is not None else None
            if not judged:
                rows.append([])
                relevant.append([])
                continue
            rows.append(sorted((ranks[d], g) for d, g in judged if d in ranks))
            relevant.append(judgments.grades(qid))
        layout = Hits(rows, relevant)
        with layout.np.errstate(all="ignore"):
            (got,) = KERNELS[measure](layout, [None])
        return got.tolist()

    def _estimate(self, measure: str, qid: str, judgments: Judgments) -> float:
        if qid not in self.trec or not judgments.qrels.get(qid):
            return 0.0
        judged = judgments.qrels[qid]
        ranks = self.sample[qid]
        pooled = sorted((ranks[d], d) for d in judged if d in ranks)
        ap, ndcg = sampled.estimate_pooled(
            pooled, judged, judgments.strata_of(qid), judgments.stats(qid)
        )
        return ap if measure == "xinfAP" else ndcg

    def per_query(self, measure: str, qid: str, judgments: Judgments) -> float:
        """One query's value of ``measure`` (AP, nDCG, xinfAP, infNDCG)."""
        return self.values(measure, judgments, [qid])[0]

    def mean(self, measure: str, judgments: Judgments, queries: Sequence[str]) -> float:
        """Mean of ``measure`` over ``queries`` (trec_eval ``-c``)."""
        values = self.values(measure, judgments, queries)
        return math.fsum(values) / len(values) if values else 0.0
