"""How far a reproduced run agrees with the original, as repro_eval measures it (Breuer et al.,
"How to Measure the Reproducibility of System-oriented IR Experiments", SIGIR 2020).

Document order: Kendall's tau Union (KTU) and rank-biased overlap (RBO) of each query's two
rankings; effectiveness: the per-query root mean square error (RMSE) of a measure and the
two-sided t-test of its per-query values (paired when both runs are scored on the same qrels,
unpaired for a replication on other qrels); overall effects, given both baselines: the effect
ratio (ER) and the delta relative improvement (DeltaRI).

Every number follows repro_eval 0.5's code operation for operation, so the doubles are its
doubles: runs ranked in trec_eval's order (score descending as doubles, ties by docno
descending) and cut at ``depth`` (1,000) documents; measures as pytrec_eval (trec_eval 9.0.8's
code) computes them on the cut runs, every qrels query counted (0 where a run lacks one, as
ir_measures fills it); queries and their values in sorted order, means as numpy takes them.
Where repro_eval fails or prints nan, cmrkit says why instead (see :class:`RunPair` and
:func:`reproduce`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures import Measure, parse_measures
from cmrkit.evaluation.rbo import (
    NORMALISED_DEPTH,
    NORMALISED_P,
    RankingPairs,
    rbo_normalised_pairs,
    rows_of,
    starts_of,
)
from cmrkit.trec import Qrels, Run

RUN_LENGTH = NORMALISED_DEPTH  # repro_eval's cut of every ranking (RUN_LENGTH), RBO's depth
RBO_P = NORMALISED_P  # repro_eval's RBO persistence (RBO_P): the normalised RBO's
DEFAULT_MEASURES = ("AP", "nDCG", "P@10", "nDCG@10", "RR")
# the measures repro_eval scores (trec_eval's P, recall, ndcg, ndcg_cut, map_cut, set_map,
# set_P, set_relative_P, set_recall, set_F, Rprec, infAP, bpref, recip_rank, map,
# iprec_at_recall as ir_measures converts them), in cmrkit's names
CUTOFFS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
REPRO_EVAL_MEASURES = (
    "AP", "Rprec", "Bpref", "RR",
    *(f"IPrec@{r / 10:.1f}" for r in range(11)),
    *(f"P@{k}" for k in CUTOFFS), *(f"R@{k}" for k in CUTOFFS),
    "infAP", "nDCG", *(f"nDCG@{k}" for k in CUTOFFS), *(f"AP@{k}" for k in CUTOFFS),
    "SetP", "set_relative_P", "SetR", "SetAP", "SetF",
)  # fmt: skip


@dataclass
class RunPair:
    """An original run and its reproduction (or replication).

    ``ktu`` and ``rbo`` are the means over the queries both runs rank (None for a replication,
    whose queries differ); ``ktu_per_query`` holds None where a query has fewer than two
    documents in the shorter ranking (KTU is undefined: repro_eval's mean is then nan).
    ``rmse`` (None for a replication) and ``p`` (the paired or unpaired t-test; None where it
    is undefined, with a note) per measure; ``original`` and ``reproduced`` the mean of each
    measure over the queries scored (repro_eval's ARP)."""

    original: dict[str, float]
    reproduced: dict[str, float]
    p: dict[str, float | None]
    rmse: dict[str, float] | None = None
    ktu: float | None = None
    rbo: float | None = None
    ktu_per_query: dict[str, float | None] = field(default_factory=dict)
    rbo_per_query: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass
class Reproduction:
    """What :func:`reproduce` measures: ``run`` (the original run and its reproduction),
    ``baseline`` (the baselines', when given), and with both, ``er`` and ``dri`` per measure
    (None where undefined, with a note). ``paired``: both scored on the same qrels
    (reproducibility); else a replication on other qrels. ``queries``: the qrels queries the
    original runs are scored on (and ``queries_reproduced`` the reproductions)."""

    measures: list[Measure]
    paired: bool
    depth: int
    rbo_p: float
    version: str
    run: RunPair
    baseline: RunPair | None = None
    er: dict[str, float | None] | None = None
    dri: dict[str, float | None] | None = None
    queries: int = 0
    queries_reproduced: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def all_notes(self) -> list[str]:
        pairs = [("run", self.run), ("baseline", self.baseline)]
        return [*self.notes, *(f"{name}: {n}" for name, pair in pairs if pair for n in pair.notes)]

    def to_json(self) -> dict:
        """Every number, per query included; undefined ones null."""

        def pair(p: RunPair | None) -> dict | None:
            if p is None:
                return None
            return {
                "ktu": p.ktu,
                "rbo": p.rbo,
                "measures": {
                    m.name: {
                        "original": p.original[m.name],
                        "reproduced": p.reproduced[m.name],
                        "rmse": None if p.rmse is None else p.rmse[m.name],
                        "p": p.p[m.name],
                    }
                    for m in self.measures
                },
                "ktu_per_query": p.ktu_per_query,
                "rbo_per_query": p.rbo_per_query,
            }

        return {
            "kind": "reproducibility" if self.paired else "replicability",
            "test": "paired t-test" if self.paired else "unpaired t-test",
            "depth": self.depth,
            "rbo_p": self.rbo_p,
            "trec_eval": self.version,
            "queries": self.queries,
            "queries_reproduced": self.queries_reproduced,
            "run": pair(self.run),
            "baseline": pair(self.baseline),
            "er": self.er,
            "delta_ri": self.dri,
            "notes": self.all_notes,
        }


def ranking(docs: Mapping[str, float], depth: int = RUN_LENGTH) -> list[str]:
    """A query's documents in trec_eval's order (score descending as doubles, ties by docno
    descending, as repro_eval's break_ties leaves a run sorted by score), cut at ``depth``."""
    ordered = sorted(docs.items(), key=lambda item: (item[1], item[0]), reverse=True)
    return [docno for docno, _ in ordered[:depth]]


def ktu(original: Sequence[str], reproduced: Sequence[str]) -> float | None:
    """Kendall's tau Union of two rankings as repro_eval computes it: each document replaced by
    its position in the sorted union of both rankings, and Kendall's tau (scipy's tau-b) of
    the two sequences of positions, rank by rank, rounded to 14 decimals. Rankings of unequal
    lengths (which repro_eval refuses: scipy raises) are compared to the shorter one's length;
    None when that is below 2 (repro_eval: nan)."""
    return _ktus(RankingPairs.of([original], [reproduced]))[0]


def _ktus(pairs: RankingPairs) -> list[float | None]:
    """:func:`ktu` of every pair of rankings at once. A document's position in its query's
    sorted union is a monotone function of its number in the sorted union of all queries, so
    tau is computed on those numbers: (pairs - 2 x discordant pairs) / sqrt(pairs) / sqrt(pairs)
    as scipy.stats.kendalltau computes it (no ties: each ranking holds a document once)."""
    import numpy as np

    n = np.minimum(pairs.alens, pairs.blens)
    rows, within = rows_of(n)
    x = pairs.a[starts_of(pairs.alens)[:-1][rows] + within]
    y = pairs.b[starts_of(pairs.blens)[:-1][rows] + within]
    y = y[np.lexsort((x, rows))]  # each query's pairs ordered by x (queries stay grouped)
    rank = np.empty_like(y)
    rank[np.lexsort((y, rows))] = within + 1  # the rank of y within its query, from 1
    dis = _discordant(rank, n)
    tot = n * (n - 1) // 2
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = (tot - 2 * dis) / np.sqrt(tot) / np.sqrt(tot)
    return [
        None if k < 2 else float(round(np.minimum(1.0, max(-1.0, t)), 14))
        for k, t in zip(n.tolist(), tau, strict=True)
    ]


def _discordant(rank, lens):
    """Inversions of each query's ranks (1..n, its queries' blocks one after another in
    ``rank``): pairs i < j with rank_i > rank_j, counted for every query at once as a
    bottom-up merge sort would: at each level, each element of a right half against the
    greater elements of its left half."""
    import numpy as np

    q, total = len(lens), int(lens.sum())
    rows, pos = rows_of(lens)
    top = int(lens.max(initial=0))
    out = np.zeros(q, dtype=np.int64)
    order = np.arange(total)  # sorted by (query, block, rank): blocks of one element
    width = 1
    while width < top:
        group = rows * (top + 1) + pos // (2 * width)
        order = order[np.argsort((group * (top + 1) + rank)[order], kind="stable")]
        left = ((pos[order] // width) % 2 == 0).astype(np.int64)
        g = group[order]
        first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
        sizes = np.diff(np.r_[first, total])
        seen = np.cumsum(left) - left  # left elements before each, in the sorted order
        smaller = seen - np.repeat(seen[first], sizes)  # ... in its group: smaller than it
        right = left == 0
        greater = np.repeat(np.add.reduceat(left, first), sizes)[right] - smaller[right]
        out += np.bincount(rows[order][right], weights=greater, minlength=q).astype(np.int64)
        width *= 2
    return out


def rmse(original: Sequence[float], reproduced: Sequence[float]) -> float:
    """Root mean square error of two sequences of per-query values (repro_eval's sum order)."""
    import numpy as np

    diff = np.asarray(original, dtype=np.float64) - np.asarray(reproduced, dtype=np.float64)
    return math.sqrt(sum(np.square(diff)) / len(diff))


def _mean(values: Sequence[float]) -> float:
    import numpy as np

    return float(np.asarray(values, dtype=np.float64).mean())


def effect_ratio(
    original: Sequence[float],
    original_baseline: Sequence[float],
    reproduced: Sequence[float],
    reproduced_baseline: Sequence[float],
) -> float | None:
    """ER: the reproduction's mean per-query improvement over its baseline divided by the
    original's; None when the original improves by exactly 0 (repro_eval: inf or nan)."""
    import numpy as np

    orig = _mean(np.subtract(original, original_baseline))
    rep = _mean(np.subtract(reproduced, reproduced_baseline))
    return None if orig == 0 else rep / orig


def delta_ri(
    original: Sequence[float],
    original_baseline: Sequence[float],
    reproduced: Sequence[float],
    reproduced_baseline: Sequence[float],
) -> float | None:
    """DeltaRI: the original's relative improvement of the mean over its baseline's minus the
    reproduction's; None when a baseline's mean is 0 (repro_eval: inf or nan)."""
    ob, rb = _mean(original_baseline), _mean(reproduced_baseline)
    if ob == 0 or rb == 0:
        return None
    return (_mean(original) - ob) / ob - (_mean(reproduced) - rb) / rb


def _scores(run: Run, qrels: Qrels, measures: list[Measure], depth: int, version: str):
    """Per measure, the values of every qrels query in sorted order (0 where the run lacks the
    query), the run cut at ``depth`` in trec_eval's order first; and the cut rankings."""
    from cmrkit.evaluation.ranking import evaluate

    rankings = {q: ranking(docs, depth) for q, docs in run.items()}
    cut = {q: {d: run[q][d] for d in docs} for q, docs in rankings.items() if docs}
    result = evaluate(cut, qrels, measures, all_queries=True, version=version)
    queries = sorted(result.per_query)
    return {m.name: result.values(m, queries) for m in measures}, rankings, queries


def _document_order(pair: RunPair, original, reproduced, rbo_p: float, depth: int) -> None:
    shared = sorted(original.keys() & reproduced.keys())
    alone = len(original.keys() ^ reproduced.keys())
    if alone:
        pair.notes.append(
            f"{alone} queries ranked by one run only are left out of KTU and RBO "
            f"(they average over the {len(shared)} both rank)"
        )
    numbered = RankingPairs.of([original[q] for q in shared], [reproduced[q] for q in shared])
    pair.ktu_per_query = dict(zip(shared, _ktus(numbered), strict=True))
    rbos = rbo_normalised_pairs(numbered, rbo_p, depth)
    pair.rbo_per_query = dict(zip(shared, rbos, strict=True))
    defined = [v for v in pair.ktu_per_query.values() if v is not None]
    if len(defined) < len(shared):
        pair.notes.append(
            f"KTU is undefined for {len(shared) - len(defined)} queries with fewer than 2 "
            f"documents (in the shorter ranking): averaged over the {len(defined)} others"
        )
    pair.ktu = _mean(defined) if defined else None
    pair.rbo = _mean(list(pair.rbo_per_query.values())) if shared else None
    unequal = sum(len(original[q]) != len(reproduced[q]) for q in shared)
    if unequal:
        pair.notes.append(
            f"{unequal} queries rank more documents in one run than in the other: KTU compares "
            "their first documents, as many as the shorter ranking holds"
        )


def _pair(original, reproduced, measures: list[Measure], paired: bool) -> RunPair:
    from cmrkit.evaluation.significance import (
        paired_t_test,
        undefined_test,
        unpaired_t_test,
        unpaired_undefined,
    )

    o_values, r_values = original[0], reproduced[0]
    pair = RunPair(
        {m.name: _mean(o_values[m.name]) for m in measures},
        {m.name: _mean(r_values[m.name]) for m in measures},
        {},
    )
    if paired:
        pair.rmse = {m.name: rmse(o_values[m.name], r_values[m.name]) for m in measures}
    for m in measures:
        a, b = o_values[m.name], r_values[m.name]
        note = undefined_test("t", a, b) if paired else unpaired_undefined(a, b)
        if note:
            pair.notes.append(f"{m.name}: {note}")
            pair.p[m.name] = None
        else:
            pair.p[m.name] = paired_t_test(a, b) if paired else unpaired_t_test(a, b)
    return pair


def reproduce(
    original: Run,
    reproduced: Run,
    qrels: Qrels,
    measures: Sequence[Measure | str] | None = None,
    *,
    baseline_original: Run | None = None,
    baseline_reproduced: Run | None = None,
    qrels_reproduced: Qrels | None = None,
    depth: int = RUN_LENGTH,
    rbo_p: float = RBO_P,
    version: str = "9",
) -> Reproduction:
    """repro_eval's measures of ``reproduced`` against ``original`` (and of the baselines'
    pair, with ER and DeltaRI, when both baselines are given).

    With ``qrels_reproduced`` the reproductions are a replication scored on other qrels: the
    t-test is unpaired and RMSE, KTU and RBO (which pair queries) are not computed.
    ``version`` "9": trec_eval 9.0.8's measures, as pytrec_eval (repro_eval's) computes them;
    "10" for 10.0's. Runs are {qid: {docno: score}}."""
    if (baseline_original is None) != (baseline_reproduced is None):
        raise CmrkitError(
            "--baseline-original and --baseline-repro go together: give both baselines "
            "(for ER and DeltaRI) or neither"
        )
    if depth < 1:
        raise CmrkitError(f"--depth {depth} must be 1 or more (repro_eval cuts at 1000)")
    if not 0 < rbo_p < 1:
        raise CmrkitError(f"--rbo-p {rbo_p} must lie between 0 and 1 (repro_eval: 0.95)")
    ms = parse_measures(list(measures) if measures else list(DEFAULT_MEASURES), version)
    paired = qrels_reproduced is None
    rep_qrels = qrels if paired else qrels_reproduced
    if not qrels or not rep_qrels:
        raise CmrkitError("the qrels judge no query")
    o = _scores(original, qrels, ms, depth, version)
    r = _scores(reproduced, rep_qrels, ms, depth, version)
    out = Reproduction(ms, paired, depth, rbo_p, version, _pair(o, r, ms, paired))
    out.queries, out.queries_reproduced = len(o[2]), len(r[2])
    if paired:
        _document_order(out.run, o[1], r[1], rbo_p, depth)
    if baseline_original is None or baseline_reproduced is None:
        return out
    ob = _scores(baseline_original, qrels, ms, depth, version)
    rb = _scores(baseline_reproduced, rep_qrels, ms, depth, version)
    out.baseline = _pair(ob, rb, ms, paired)
    if paired:
        _document_order(out.baseline, ob[1], rb[1], rbo_p, depth)
    out.er, out.dri = {}, {}
    for m in ms:
        k = m.name
        out.er[k] = effect_ratio(o[0][k], ob[0][k], r[0][k], rb[0][k])
        if out.er[k] is None:
            out.notes.append(f"ER of {k} is undefined: the original run improves on its baseline "
                             "by exactly 0")  # fmt: skip
        out.dri[k] = delta_ri(o[0][k], ob[0][k], r[0][k], rb[0][k])
        if out.dri[k] is None:
            out.notes.append(f"DeltaRI of {k} is undefined: a baseline's mean is 0")
    return out


_MOVED = {  # old name -> (its module now, its name there): kept for one release
    "rbo": ("cmrkit.evaluation.rbo", "rbo_normalised"),
    "rbo_weights": ("cmrkit.evaluation.rbo", "normalised_weights"),
}


def __getattr__(name: str):
    from cmrkit.evaluation.moved import moved

    return moved(__name__, name, _MOVED)
