"""Runs scored against many qrels quickly: each run is ranked once, each qrels prepared once,
and a scoring only looks at the judged documents (what simulating pools at many budgets needs).

The values are :func:`cmrkit.evaluation.evaluate`'s, summed in the same order: AP and nDCG
(no cutoff) on trec_eval's ranking, xinfAP and infNDCG on sample_eval's; the mean is over the
queries given, a query without judgments or missing from the run scoring 0 (trec_eval ``-c``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import cmrkit.evaluation.sampled as sampled
from cmrkit.trec import Qrels, Run, RunColumns, Strata, ranked


class Judgments:
    """Qrels (and the strata of sample_eval's qrels) prepared for scoring many runs."""

    def __init__(self, qrels: Qrels, strata: Strata | None = None) -> None:
        self.qrels = qrels
        self.strata = strata
        self.relevant = {
            q: [(d, g) for d, g in docs.items() if g >= 1] for q, docs in qrels.items()
        }
        self._ideal: dict[str, float] = {}
        self._stats: dict[str, sampled.SampleStats] = {}

    def ideal_dcg(self, qid: str) -> float:
        if qid not in self._ideal:
            ideal = 0.0
            for i, g in enumerate(sorted((g for _, g in self.relevant[qid]), reverse=True)):
                ideal += g / math.log2(i + 2)
            self._ideal[qid] = ideal
        return self._ideal[qid]

    def strata_of(self, qid: str) -> dict[str, str] | None:
        return self.strata.get(qid, {}) if self.strata is not None else None

    def stats(self, qid: str) -> sampled.SampleStats:
        if qid not in self._stats:
            self._stats[qid] = sampled.sample_stats(self.qrels[qid], self.strata_of(qid))
        return self._stats[qid]


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

    def per_query(self, measure: str, qid: str, judgments: Judgments) -> float:
        """One query's value of ``measure`` (AP, nDCG, xinfAP, infNDCG)."""
        if measure in ("AP", "nDCG"):
            relevant = judgments.relevant.get(qid)
            if not relevant:
                return 0.0
            ranks = self.trec.get(qid, {})
            hits = sorted((ranks[d], g) for d, g in relevant if d in ranks)
            if measure == "AP":
                total = 0.0
                for n, (rank, _) in enumerate(hits, 1):
                    total += n / rank
                return total / len(relevant)
            dcg = 0.0
            for rank, g in hits:
                dcg += g / math.log2(rank + 1)
            return dcg / judgments.ideal_dcg(qid)
        judged = judgments.qrels.get(qid, {})
        ranks = self.sample.get(qid, {})
        pooled = sorted((ranks[d], d) for d in judged if d in ranks)
        ap, ndcg = sampled.estimate_pooled(
            pooled, judged, judgments.strata_of(qid), judgments.stats(qid)
        )
        return ap if measure == "xinfAP" else ndcg

    def mean(self, measure: str, judgments: Judgments, queries: Sequence[str]) -> float:
        """Mean of ``measure`` over ``queries`` (trec_eval ``-c``)."""
        values = []
        for qid in queries:
            if qid not in self.trec or not judgments.qrels.get(qid):
                values.append(0.0)
            else:
                values.append(self.per_query(measure, qid, judgments))
        return math.fsum(values) / len(values) if values else 0.0
