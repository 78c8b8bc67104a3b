"""Agreement of two rankings of the same systems: do two sets of qrels (or two measures, two
pools, a judge and people) order the systems the same way?

One owner for `cmrkit agree`, `pool plan` and the automatic judges' check. The inputs are each
system's score under a *reference* (the qrels trusted: complete, from people) and under an
*other* one (the cheaper qrels being checked); higher scores rank first.

- ``tau``: Kendall's tau-a, (concordant - discordant) / all pairs;
- ``tau_b``: Kendall's tau-b (ties in either ranking; scipy's ``kendalltau``);
- ``tau_ap``: Yilmaz, Aslam & Robertson's AP correlation (SIGIR 2008) of the other ranking
  against the reference, top-weighted; ties in the other ranking as Urbano & Marrero's
  tau_AP,a (ICTIR 2017: the expected tau_AP over the orders of the tied systems); undefined
  (None) when the reference itself ties systems;
- ``tau_ap_b``: Urbano & Marrero's symmetric tau_AP,b (ties on either side);
- ``rbo``: Webber, Moffat & Zobel's rank-biased overlap (TOIS 2010), extrapolated (their eq. 32,
  exact here: both rankings hold every system), with persistence ``rbo_p``; tied systems are
  ranked in the order given (``evaluation/rbo.py``'s :func:`rbo_extrapolated`);
- ``pearson``, ``spearman``: linear correlation of the scores, and of their average ranks;
- ``swap``, ``swapped``: the largest difference of reference scores between two systems that the
  other ranking orders the other way (0.0 and None when no pair swaps), and that pair, in the
  reference's order.

A statistic that is undefined (a constant ranking for the correlations) is None, never NaN.
:func:`agreement_intervals` resamples the queries (seeded) to give each statistic a percentile
bootstrap interval; :func:`qrels_agreement` scores runs under two qrels and does both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cmrkit.comparison import AGREEMENT
from cmrkit.errors import CmrkitError
from cmrkit.evaluation.bootstrap import percentile_interval, resample_counts
from cmrkit.evaluation.rbo import EXTRAPOLATED_P, rbo_extrapolated

RBO_P = EXTRAPOLATED_P  # RBO's persistence here (the extrapolated RBO's, evaluation/rbo.py)
STATISTICS = ("tau", "tau_b", "tau_ap", "tau_ap_b", "rbo", "pearson", "spearman", "swap")


@dataclass(frozen=True)
class RankingAgreement:
    """How far two rankings of the same systems agree (see the module's docstring)."""

    systems: tuple[str, ...]
    tau: float | None
    tau_b: float | None
    tau_ap: float | None
    tau_ap_b: float | None
    rbo: float
    rbo_p: float
    pearson: float | None
    spearman: float | None
    swap: float
    swapped: tuple[str, str] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "systems": list(self.systems),
            **{name: getattr(self, name) for name in STATISTICS},
            "rbo_p": self.rbo_p,
            "swapped": list(self.swapped) if self.swapped else None,
        }


def ranking_agreement(
    reference: Mapping[str, float], other: Mapping[str, float], *, p: float = RBO_P
) -> RankingAgreement:
    """Agreement of the ranking of systems by ``other`` scores with the ranking by
    ``reference`` scores (system name -> score; the same names in both, at least two).
    ``p`` is RBO's persistence. Ties are ranked in ``reference``'s order of the names."""
    systems = tuple(reference)
    if set(other) != set(systems):
        differ = sorted(set(other) ^ set(systems))
        raise CmrkitError(
            f"the two rankings hold different systems ({', '.join(differ[:5])}); score the same "
            "systems under both"
        )
    if len(systems) < 2:
        raise CmrkitError("a ranking agreement needs at least two systems")
    _check_p(p)
    ref = np.array([[reference[s] for s in systems]], dtype=np.float64)
    oth = np.array([[other[s] for s in systems]], dtype=np.float64)
    stats, pair = _statistics(ref, oth, p)
    values = {name: _plain(stats[name][0]) for name in STATISTICS}
    swap = float(stats["swap"][0])
    swapped = (systems[int(pair[0][0])], systems[int(pair[1][0])]) if swap else None
    return RankingAgreement(
        systems=systems,
        tau=values["tau"],
        tau_b=values["tau_b"],
        tau_ap=values["tau_ap"],
        tau_ap_b=values["tau_ap_b"],
        rbo=float(stats["rbo"][0]),
        rbo_p=p,
        pearson=values["pearson"],
        spearman=values["spearman"],
        swap=swap,
        swapped=swapped,
    )


def agreement_intervals(
    reference: np.ndarray,
    other: np.ndarray,
    *,
    samples: int = AGREEMENT.bootstrap,
    ci: float = AGREEMENT.ci,
    seed: int = AGREEMENT.seed,
    p: float = RBO_P,
) -> dict[str, tuple[float, float] | None]:
    """Percentile bootstrap intervals of every statistic: the queries (columns of the systems x
    queries score matrices ``reference`` and ``other``, the same queries in the same order) are
    resampled with replacement ``samples`` times (seeded), each system's mean is taken over the
    resample under both, and the statistics computed; a statistic undefined in every resample
    has no interval (None)."""
    ref = np.asarray(reference, dtype=np.float64)
    oth = np.asarray(other, dtype=np.float64)
    if ref.ndim != 2 or ref.shape != oth.shape:
        raise CmrkitError("give both score matrices as systems x queries, of the same shape")
    if ref.shape[0] < 2 or ref.shape[1] < 1:
        raise CmrkitError("bootstrap intervals need at least two systems and one query")
    if samples < 1:
        raise CmrkitError(f"bootstrap samples {samples} must be at least 1")
    if not 0 < ci < 1:
        raise CmrkitError(f"confidence level {ci} must lie between 0 and 1")
    _check_p(p)
    queries = ref.shape[1]
    stats: dict[str, list[np.ndarray]] = {name: [] for name in STATISTICS}
    for counts in resample_counts(queries, samples, seed):
        got, _ = _statistics(counts @ ref.T / queries, counts @ oth.T / queries, p)
        for name in STATISTICS:
            stats[name].append(got[name])
    return {name: percentile_interval(np.concatenate(stats[name]), ci) for name in STATISTICS}


def _check_p(p: float) -> None:
    if not 0 < p < 1:
        raise CmrkitError(f"RBO persistence {p} must lie strictly between 0 and 1")


def _plain(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def _statistics(ref: np.ndarray, oth: np.ndarray, p: float):
    """Every statistic for each row of ``ref`` and ``oth`` (rows x systems), NaN where
    undefined; and, per row, the swapped pair (indices i, j)."""
    rows, n = ref.shape
    upper = np.triu(np.ones((n, n), dtype=bool), 1)
    # sign of score(i) - score(j): +1 when i ranks above j
    sr = np.sign(ref[:, :, None] - ref[:, None, :])
    so = np.sign(oth[:, :, None] - oth[:, None, :])
    agree = (sr * so)[:, upper]
    concordant = np.count_nonzero(agree > 0, axis=1)
    discordant = np.count_nonzero(agree < 0, axis=1)
    untied_r = np.count_nonzero(sr[:, upper], axis=1)
    untied_o = np.count_nonzero(so[:, upper], axis=1)
    pairs = n * (n - 1) // 2
    net = (concordant - discordant).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau_b = net / np.sqrt((untied_r * untied_o).astype(np.float64))
    stats = {
        "tau": np.where((untied_r == 0) | (untied_o == 0), np.nan, net / pairs),
        "tau_b": np.where((untied_r == 0) | (untied_o == 0), np.nan, tau_b),
        "tau_ap": _tau_ap_a(ref, oth, sr, so),
        "tau_ap_b": (_tau_ap_b_side(sr, so) + _tau_ap_b_side(so, sr)) / 2,
        "rbo": rbo_extrapolated(ref, oth, p),
        "pearson": _pearson(ref, oth),
        "spearman": _pearson(_average_ranks(ref, sr), _average_ranks(oth, so)),
    }
    gap = np.where(agree < 0, np.abs(ref[:, :, None] - ref[:, None, :])[:, upper], 0.0)
    best = np.argmax(gap, axis=1)
    stats["swap"] = gap[np.arange(rows), best]
    i, j = np.nonzero(upper)
    # the pair in the reference's order: the higher reference score first
    first = np.where(
        ref[np.arange(rows), i[best]] >= ref[np.arange(rows), j[best]], i[best], j[best]
    )
    second = np.where(first == i[best], j[best], i[best])
    return stats, (first, second)


def _tau_ap_a(ref, oth, sr, so) -> np.ndarray:
    """Urbano & Marrero's tau_AP,a of ``oth`` against ``ref`` per row (NaN when ``ref`` ties)."""
    rows, n = ref.shape
    above_o = so < 0  # [b, i, j]: j strictly above i in the other ranking
    above_r = sr < 0
    start = 1 + above_o.sum(axis=2)  # p_i: the best rank of i's tie group
    size = (so == 0).sum(axis=2)  # t_i: i's tie group, itself included
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, 2 * n + 1))])
    concordant_above = (above_o & above_r).sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        # term I: each position of i's tie group equally likely, 1/(position - 1) each
        s_above = (harmonic[start + size - 2] - harmonic[np.maximum(start - 2, 0)]) / size
        term1 = np.where(start > 1, concordant_above * s_above, 0.0)
        # term II: the tied systems' expected concordant pairs among themselves
        within = (size - 1) - (start - 1) * (harmonic[start + size - 2] - harmonic[start - 1])
        term2 = within / (2 * size)
    total = (term1 + term2).sum(axis=1)
    tau = 2.0 / (n - 1) * total - 1.0
    ties_in_ref = (sr == 0).sum(axis=(1, 2)) > n
    return np.where(ties_in_ref, np.nan, tau)


def _tau_ap_b_side(sx, sy) -> np.ndarray:
    """One direction of Urbano & Marrero's tau_AP,b: positions from ``y``, concordance with
    ``x`` (a tie in ``x`` is not concordant)."""
    above_y = sy < 0
    above_x = sx < 0
    start = 1 + above_y.sum(axis=2)
    concordant_above = (above_y & above_x).sum(axis=2)
    not_top = start > 1
    with np.errstate(invalid="ignore", divide="ignore"):
        part = np.where(not_top, concordant_above / (start - 1), 0.0)
        return 2.0 / not_top.sum(axis=1) * part.sum(axis=1) - 1.0


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    dx = x - x.mean(axis=1, keepdims=True)
    dy = y - y.mean(axis=1, keepdims=True)
    sxx = (dx * dx).sum(axis=1)
    syy = (dy * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (dx * dy).sum(axis=1) / np.sqrt(sxx * syy)
    r = np.clip(r, -1.0, 1.0)
    # a constant ranking (every value equal) has no correlation
    constant = (np.ptp(x, axis=1) == 0) | (np.ptp(y, axis=1) == 0)
    return np.where(constant, np.nan, r)


def _average_ranks(scores: np.ndarray, signs: np.ndarray) -> np.ndarray:
    """Ranks 1..n from the lowest score, ties given their average rank (scipy's rankdata)."""
    below = (signs > 0).sum(axis=2)  # systems this one beats
    tied = (signs == 0).sum(axis=2)  # itself included
    return below + (tied + 1) / 2.0


@dataclass
class QrelsAgreement:
    """Runs scored under two sets of qrels, and how far the two rankings of the runs agree, per
    measure: ``reference`` and ``other`` hold each run's mean (measure -> run -> mean) over the
    ``queries`` both qrels judge; ``agreement`` the statistics, ``intervals`` their bootstrap
    intervals over those queries."""

    runs: list[str]
    measures: list[Any]
    queries: list[str]
    reference: dict[str, dict[str, float]]
    other: dict[str, dict[str, float]]
    agreement: dict[str, RankingAgreement]
    intervals: dict[str, dict[str, tuple[float, float] | None]]
    samples: int
    ci: float
    seed: int
    only_reference: int = 0
    only_other: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "measures": [m.name for m in self.measures],
            "queries": len(self.queries),
            "queries_only_in_reference": self.only_reference,
            "queries_only_in_other": self.only_other,
            "bootstrap": self.samples,
            "ci": self.ci,
            "seed": self.seed,
            "per_measure": {
                m.name: {
                    "reference": self.reference[m.name],
                    "other": self.other[m.name],
                    **self.agreement[m.name].to_json(),
                    "intervals": {
                        k: list(v) if v else None for k, v in self.intervals[m.name].items()
                    },
                }
                for m in self.measures
            },
        }


def qrels_agreement(
    runs: Mapping[str, Any],
    reference: Any,
    other: Any,
    measures: Sequence[Any] | None = None,
    *,
    samples: int = AGREEMENT.bootstrap,
    ci: float = AGREEMENT.ci,
    seed: int = AGREEMENT.seed,
    p: float = RBO_P,
    depth: int | None = None,
    version: str = "10",
    minimum: int = 3,
) -> QrelsAgreement:
    """Score every run under the ``reference`` qrels and the ``other`` qrels (every query both
    judge counts, 0 where a run lacks it), and measure how far the two rankings of the runs
    agree per measure (:func:`ranking_agreement`), with bootstrap intervals over the queries.
    At least ``minimum`` runs (a rank correlation of two is +1 or -1)."""
    from cmrkit.evaluation.measures import parse_measures
    from cmrkit.evaluation.ranking import evaluate

    if len(runs) < minimum:
        raise CmrkitError(
            f"{len(runs)} run(s) given: a rank correlation needs at least {minimum} runs"
        )
    common = [q for q in reference if q in other]
    if not common:
        raise CmrkitError(
            "the two qrels share no query: are they of the same collection and split?"
        )
    keep = set(common)
    ms = parse_measures(measures, version)
    names = list(runs)
    scored = {}
    for side, qrels in (("reference", reference), ("other", other)):
        subset = {q: qrels[q] for q in common}
        scored[side] = {
            name: evaluate(
                runs[name], subset, ms, all_queries=True, depth=depth, version=version, name=name
            )  # fmt: skip
            for name in names
        }
    result = QrelsAgreement(
        names, ms, common, {}, {}, {}, {}, samples, ci, seed,
        only_reference=sum(1 for q in reference if q not in keep),
        only_other=sum(1 for q in other if q not in keep),
    )  # fmt: skip
    for m in ms:
        matrices = {
            side: np.array([scored[side][n].values(m, common) for n in names], dtype=np.float64)
            for side in scored
        }
        ref_means = {
            n: float(v) for n, v in zip(names, matrices["reference"].mean(axis=1), strict=True)
        }
        oth_means = {
            n: float(v) for n, v in zip(names, matrices["other"].mean(axis=1), strict=True)
        }
        result.reference[m.name], result.other[m.name] = ref_means, oth_means
        result.agreement[m.name] = ranking_agreement(ref_means, oth_means, p=p)
        result.intervals[m.name] = (
            agreement_intervals(
                matrices["reference"], matrices["other"], samples=samples, ci=ci, seed=seed, p=p
            )
            if samples
            else {name: None for name in STATISTICS}
        )
    return result
