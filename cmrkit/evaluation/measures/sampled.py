"""xinfAP and infNDCG from stratified samples of judgments, as TREC's ``sample_eval.pl`` computes
them (Yilmaz, Kanoulas and Aslam, "A Simple and Efficient Sampling Method for Estimating AP and
NDCG", SIGIR 2008).

The qrels list every pooled document of a query with its stratum (sample_eval's five-column
qrels ``qid 0 docno stratum rel``); a stratum's sampling rate is implied by how many of its
documents are judged (rel >= 0) out of how many it lists (rel < 0: pooled, not sampled).
Without strata every qrels document is in one stratum.

For one query, with strata ``s``, ``n_s`` documents listed, ``j_s`` judged and ``r_s`` judged
relevant in stratum ``s``:

- estimated number of relevant documents ``R = sum_s r_s * n_s / j_s`` (strata with ``j_s > 0``);
- walking the ranking (score descending, ties by docno descending, at most 1,000 documents), at
  a relevant document at rank ``k`` with ``d`` pooled documents above it, of which ``d_s`` in
  stratum ``s`` (``j'_s`` judged and ``r'_s`` relevant among them), the estimated precision is
  ``prec(k) = 1/k + (d/k) * sum_s (d_s/d) * (r'_s + 1e-5) / (j'_s + 3e-5)``;
- ``xinfAP = sum_s (r_s n_s / j_s) / R * (sum of prec(k) over the relevant retrieved in s) / r_s``;
- ``infNDCG = d_all * sum_s (d_s/d_all) * (sum of rel/log2(k+1) over relevant retrieved in s)
  / j'_s / ideal``, where ``d_all`` is the number of pooled documents retrieved and ``ideal`` is
  the DCG of ``round(R_g)`` documents of each grade ``g`` (``R_g`` estimated like R), the grades
  in descending order as text, positions past 1,000 not counted.

With every pooled document judged (one stratum, or all rates 1) xinfAP is AP and infNDCG is
nDCG, up to the 1e-5 smoothing of the precision above each relevant document.

Matching the script (checked against it in the tests) means keeping its particulars: scores are
compared as double-precision numbers (trec_eval compares single-precision floats), rankings are
cut at 1,000 documents, strata and grades are ordered as text, and a stratum with no judged
document still adds ``d_s / 3`` to the precision above (its smoothed precision is 1e-5 / 3e-5).
Query ids of the run and the qrels are matched exactly (the script strips leading zeros from
the run's query ids only).

The two measures are defined here beside their kernels (:func:`xinfap`, :func:`infndcg`), which
the ranking engine hands its queries (``layout.sampled()``); rescoring
(``evaluation/rescore.py``) calls :func:`estimate_pooled` with each run's ranks.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cmrkit.evaluation.measures.base import SAMPLED, Kind, define
from cmrkit.trec import RunColumns

MAX_RESULTS = 1000  # sample_eval.pl's $maxResultSize
SINGLE_STRATUM = "1"
_LOG2 = math.log(2)


@dataclass(frozen=True)
class SampleStats:
    """What the qrels say about one query: its strata and the judged counts in each."""

    strata: list[str]  # sorted as text, as the script iterates them
    listed: dict[str, int]
    judged: dict[str, int]
    relevant: dict[str, int]
    num_rel: float  # estimated number of relevant documents
    ideal_dcg: float


def sample_stats(judged: Mapping[str, int], strata: Mapping[str, str] | None) -> SampleStats:
    """Per-stratum counts, the estimated number of relevant documents and the ideal DCG."""
    listed: dict[str, int] = {}
    sampled: dict[str, int] = {}
    relevant: dict[str, int] = {}
    per_grade: dict[str, dict[int, int]] = {}
    for docno, rel in judged.items():
        s = strata[docno] if strata is not None else SINGLE_STRATUM
        listed[s] = listed.get(s, 0) + 1
        if rel >= 0:
            sampled[s] = sampled.get(s, 0) + 1
        if rel > 0:
            relevant[s] = relevant.get(s, 0) + 1
            grades = per_grade.setdefault(s, {})
            grades[rel] = grades.get(rel, 0) + 1
    order = sorted(listed)
    num_rel = 0.0
    for s in order:
        if sampled.get(s, 0):
            num_rel += relevant.get(s, 0) * listed[s] / sampled[s]
    by_grade: dict[str, float] = {}
    for s in order:
        for grade in sorted(per_grade.get(s, {}), key=str):
            key = str(grade)
            by_grade[key] = by_grade.get(key, 0) + per_grade[s][grade] * listed[s] / sampled[s]
    ideal = 0.0
    start = 0
    for key in sorted(by_grade, reverse=True):
        count = int(by_grade[key] + 0.5)
        gain = int(key)
        r = start + 1
        while r <= start + count:
            ideal += gain / (math.log(r + 1) / _LOG2)
            if r >= MAX_RESULTS:
                break
            r += 1
        start += count
    return SampleStats(order, listed, sampled, relevant, num_rel, ideal)


def sample_ranking(docs: Sequence[tuple[str, float]]) -> list[str]:
    """The script's order: score descending (as doubles), ties by docno descending; top 1,000."""
    order = sorted(docs, key=lambda d: (d[1], d[0]), reverse=True)
    return [d for d, _ in order[:MAX_RESULTS]]


def estimate(
    ranking: Sequence[str],
    judged: Mapping[str, int],
    strata: Mapping[str, str] | None,
    stats: SampleStats | None = None,
) -> tuple[float, float]:
    """(xinfAP, infNDCG) of one query's ranking (already in the script's order)."""
    pooled = ((rank, d) for rank, d in enumerate(ranking, 1) if d in judged)
    return estimate_pooled(pooled, judged, strata, stats)


def estimate_pooled(
    pooled: Iterable[tuple[int, str]],
    judged: Mapping[str, int],
    strata: Mapping[str, str] | None,
    stats: SampleStats | None = None,
) -> tuple[float, float]:
    """(xinfAP, infNDCG) from the (rank, docno) of the pooled documents a ranking retrieved,
    by rank (documents outside the qrels only count in the ranks)."""
    st = stats if stats is not None else sample_stats(judged, strata)
    order = st.strata
    seen = dict.fromkeys(order, 0)
    seen_judged = dict.fromkeys(order, 0)
    seen_relevant = dict.fromkeys(order, 0)
    precision_sum = dict.fromkeys(order, 0.0)
    gain = dict.fromkeys(order, 0.0)
    seen_pooled = 0
    for rank, docno in pooled:
        rel = judged[docno]
        s = strata[docno] if strata is not None else SINGLE_STRATUM
        if rel > 0:
            above = 0.0
            if seen_pooled:
                for c in order:
                    share = seen[c] / seen_pooled
                    if share != 0:
                        above += share * (seen_relevant[c] + 0.00001) / (seen_judged[c] + 0.00003)
            precision_sum[s] += 1 / rank + (seen_pooled / rank) * above
            seen_relevant[s] += 1
            gain[s] += rel / (math.log(rank + 1) / _LOG2)
        seen_pooled += 1
        seen[s] += 1
        if rel >= 0:
            seen_judged[s] += 1
    ap = 0.0
    for c in order:
        if st.judged.get(c, 0) and st.num_rel != 0:
            share = st.relevant.get(c, 0) * st.listed[c] / st.judged[c] / st.num_rel
            if st.relevant.get(c, 0):
                ap += share * (precision_sum[c] / st.relevant[c])
    dcg = 0.0
    if seen_pooled:
        for c in order:
            if seen_judged[c]:
                dcg += seen[c] / seen_pooled * gain[c] / seen_judged[c]
    ndcg = seen_pooled * dcg / st.ideal_dcg if st.ideal_dcg != 0 else 0.0
    return ap, ndcg


def per_query(
    cols: RunColumns,
    blocks: Sequence[int],
    qrels: Mapping[str, Mapping[str, int]],
    strata: Mapping[str, Mapping[str, str]] | None,
    depth: int | None = None,
) -> list[tuple[float, float]]:
    """(xinfAP, infNDCG) of each query block ``cols.qids[i]`` for ``i`` in ``blocks``; the
    ranking is cut at ``depth`` documents when given (and always at 1,000)."""
    bounds = cols.starts.tolist()
    scores = cols.scores
    out = []
    for i in blocks:
        qid = cols.qids[i]
        a, b = bounds[i], bounds[i + 1]
        names = cols.docnos[a:b]
        if names and isinstance(names[0], bytes):
            names = [d.decode() for d in names]
        ranking = sample_ranking(list(zip(names, scores[a:b].tolist(), strict=True)))
        if depth is not None:
            ranking = ranking[:depth]
        judged = qrels[qid]
        out.append(estimate(ranking, judged, strata.get(qid, {}) if strata is not None else None))
    return out


def xinfap(layout, cutoffs) -> list:
    """The kernel of xinfAP: each query's estimate (``layout.sampled()``: :func:`per_query` of
    the ranking engine's queries)."""
    import numpy as np

    return [np.asarray([e[0] for e in layout.sampled()], dtype=np.float64)]


def infndcg(layout, cutoffs) -> list:
    """The kernel of infNDCG (see :func:`xinfap`)."""
    import numpy as np

    return [np.asarray([e[1] for e in layout.sampled()], dtype=np.float64)]


define(
    Kind("xinfAP", "extended inferred AP from stratified samples (sample_eval.pl's infAP; "
         "Yilmaz et al. 2008)", kernel=xinfap, layout=SAMPLED),
    Kind("infNDCG", "inferred nDCG from stratified samples (sample_eval.pl's infNDCG)",
         kernel=infndcg, layout=SAMPLED),
)  # fmt: skip
