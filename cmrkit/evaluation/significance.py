"""Is a system better than another, and by how much: paired tests (t, Wilcoxon, sign,
permutation, bootstrap), multiple-comparison corrections (Holm, Bonferroni, Benjamini-Hochberg,
Benjamini-Yekutieli), effect sizes (the mean difference with a bootstrap interval, Cohen's d_z),
Tukey's HSD over every pair, and :func:`compare`, which scores runs and applies them.

scipy is imported inside the functions that call it: `cmrkit eval` loads this module (its
reports name :class:`Comparison`) without loading scipy.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cmrkit.comparison import COMPARE
from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures import Measure, parse_measures
from cmrkit.evaluation.ranking import Result, aggregate, evaluate
from cmrkit.trec import Qrels, Run, Strata

TESTS = ("t", "wilcoxon", "permutation", "sign", "bootstrap")
CORRECTIONS = ("holm", "bonferroni", "bh", "by", "none")
TEST_NAMES = {
    "t": "paired t-test",
    "wilcoxon": "Wilcoxon signed-rank test",
    "permutation": "paired permutation test",
    "sign": "sign test",
    "bootstrap": "paired bootstrap test",
}
CORRECTION_NAMES = {
    "holm": "Holm",
    "bonferroni": "Bonferroni",
    "bh": "Benjamini-Hochberg",
    "by": "Benjamini-Yekutieli",
    "none": "no",
}


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Student's paired t-test, scipy.stats.ttest_rel's double (its
    operations, the t distribution's tail from scipy.special.stdtr: loading scipy.stats costs
    about a second, half of `compare`'s time); 1.0 when a equals b everywhere, NaN where the
    test is undefined (:func:`undefined_test` says why)."""
    _same_length(a, b)
    if _identical(a, b):
        return 1.0
    if undefined_test("t", a, b):
        return math.nan
    import numpy as np
    from scipy import special

    # ttest_rel is ttest_1samp(a - b): the mean over sqrt(var / n), var as scipy's _var
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = d.shape[0]
    var = np.mean((d - np.mean(d, keepdims=True)) ** 2)
    size = np.asarray(n, dtype=np.float64)
    var *= size / (size - 1)
    t = (np.mean(d) - 0.0) / np.sqrt(var / n)
    return float(2 * special.stdtr(np.asarray(n - 1, dtype=np.float64), -np.abs(t)))


def unpaired_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Student's unpaired t-test with pooled variance
    (scipy.stats.ttest_ind): two runs scored on different queries; NaN where it is undefined
    (:func:`unpaired_undefined` says why)."""
    if unpaired_undefined(a, b):
        return math.nan
    from scipy import stats

    return float(stats.ttest_ind(a, b).pvalue)


def unpaired_undefined(a: Sequence[float], b: Sequence[float]) -> str | None:
    """Why the unpaired t-test cannot compare a with b (None when it can)."""
    if len(a) < 2 or len(b) < 2:
        return "the unpaired t-test needs two queries or more on each side"
    if _constant(a) and _constant(b):
        return "neither side's values vary over the queries: the unpaired t-test is undefined"
    return None


def wilcoxon_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Wilcoxon's signed-rank test as scipy.stats.wilcoxon computes it by
    default (zero differences dropped; exact up to 50 queries without ties, else the normal
    approximation); 1.0 when a equals b everywhere."""
    _same_length(a, b)
    if _identical(a, b):
        return 1.0
    if undefined_test("wilcoxon", a, b):
        return math.nan
    from scipy import stats

    return float(stats.wilcoxon(a, b).pvalue)


def sign_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the sign test: the queries a improves out of those where a and b
    differ, against a fair coin (scipy.stats.binomtest); 1.0 when a equals b everywhere."""
    _same_length(a, b)
    if _identical(a, b):
        return 1.0
    if undefined_test("sign", a, b):
        return math.nan
    from scipy import stats

    wins = sum(x > y for x, y in zip(a, b, strict=True))
    losses = sum(x < y for x, y in zip(a, b, strict=True))
    return float(stats.binomtest(wins, wins + losses, 0.5).pvalue)


def permutation_test(
    a: Sequence[float],
    b: Sequence[float],
    *,
    permutations: int = COMPARE.permutations,
    seed: int = COMPARE.seed,
) -> float:
    """Two-sided p-value of the paired randomization test on the mean difference.

    Each permutation flips the sign of every per-query difference at random (seeded). When
    ``2**n <= permutations`` every sign pattern is enumerated and the p-value is exact. The
    p-value follows scipy.stats.permutation_test (``permutation_type="samples"``).
    """
    import numpy as np

    if len(a) != len(b):
        raise ValueError("paired samples differ in length")
    n = len(a)
    if n == 0:
        return math.nan
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    observed = d.mean()
    exact = n < 63 and 2**n <= permutations
    chunks = []
    if exact:
        patterns = np.arange(2**n, dtype=np.int64)
        bits = (patterns[:, None] >> np.arange(n, dtype=np.int64)) & 1
        chunks.append(((1 - 2 * bits) * d).mean(axis=1))
    else:
        rng = np.random.default_rng(seed)
        left = permutations
        while left:
            size = min(left, max(1, 2_000_000 // n))
            signs = rng.integers(0, 2, size=(size, n)) * 2 - 1
            chunks.append((signs * d).mean(axis=1))
            left -= size
    null = np.concatenate(chunks)
    # scipy's tolerance: null statistics within a relative 1e-14 of the observed one count
    gamma = abs(1e-14 * observed)
    adjustment = 0 if exact else 1
    less = (np.count_nonzero(null <= observed + gamma) + adjustment) / (len(null) + adjustment)
    greater = (np.count_nonzero(null >= observed - gamma) + adjustment) / (len(null) + adjustment)
    return float(min(1.0, 2 * min(less, greater)))


def bootstrap_test(
    a: Sequence[float],
    b: Sequence[float],
    *,
    samples: int = COMPARE.bootstrap,
    seed: int = COMPARE.seed,
) -> float:
    """Two-sided p-value of the paired bootstrap test of the mean difference (Efron &
    Tibshirani's shift method): the queries are resampled (:mod:`cmrkit.evaluation.bootstrap`,
    seeded) and p is the share of resampled mean differences at least as far from the observed
    one as the observed one is from 0 (within a relative 1e-12), (count + 1) / (samples + 1)."""
    import numpy as np

    _same_length(a, b)
    if _identical(a, b):
        return 1.0
    if undefined_test("bootstrap", a, b):
        return math.nan
    pair = np.asarray([a, b], dtype=np.float64)
    means = resampled_means(pair, samples, seed)
    return _bootstrap_p(means[:, 0] - means[:, 1], pair, 1.0 / pair.shape[1])


def _bootstrap_p(diffs, pair, scale: float) -> float:
    """The shift method's p from the resampled differences ``diffs`` of the two rows of
    ``pair``, each mean taken as the resampled ones are (the sum times ``scale``); NaN where
    the pair's differences do not vary (:func:`undefined_test`): resamples that never move
    are not "never as far as observed"."""
    import numpy as np

    if undefined_test("bootstrap", pair[0].tolist(), pair[1].tolist()):
        return math.nan
    observed = float(pair[0].sum() * scale - pair[1].sum() * scale)
    # as scipy's permutation_test: a resample within rounding of the observed distance counts
    far = np.count_nonzero(np.abs(diffs - observed) >= abs(observed) * (1 - 1e-12))
    return float((far + 1) / (len(diffs) + 1))


def resampled_means(values, samples: int, seed: int, scale=None):
    """The mean of each row of ``values`` (rows x queries) over ``samples`` resamples of the
    queries (samples x rows); ``scale`` (one per row) replaces 1/queries, 1.0 for sums."""
    import numpy as np

    from cmrkit.evaluation.bootstrap import resample_counts

    values = np.asarray(values, dtype=np.float64)
    queries = values.shape[1]
    factor = np.full(values.shape[0], 1.0 / queries) if scale is None else np.asarray(scale)
    out = np.empty((samples, values.shape[0]), dtype=np.float64)
    done = 0
    for counts in resample_counts(queries, samples, seed):
        out[done : done + len(counts)] = (counts @ values.T) * factor
        done += len(counts)
    return out


def undefined_test(test: str, a: Sequence[float], b: Sequence[float]) -> str | None:
    """Why ``test`` cannot compare a with b (None when it can): no query, or for the t-test
    and the bootstrap test fewer than two queries or the same difference on every query (no
    variance).

    The bootstrap test estimates the spread of the mean difference from the queries' own
    differences (Efron & Tibshirani's shift method; Sakai's paired bootstrap test, SIGIR 2006,
    divides by their standard deviation as the t statistic does): one query, or differences
    that never vary, give resampled differences that never vary, which says nothing about
    chance. scipy.stats.bootstrap refuses a single observation and calls such a distribution
    degenerate; so the test is undefined there, as the t-test is (never p = 1 / (B + 1))."""
    if not len(a):
        return "no query to pair"
    if _identical(a, b):
        return None
    if test in ("t", "bootstrap"):
        name = "t-test" if test == "t" else "bootstrap test"
        if len(a) < 2:
            return f"the {name} needs two queries or more"
        diffs = [x - y for x, y in zip(a, b, strict=True)]
        if _constant(diffs):
            others = "bootstrap" if test == "t" else "t"
            return (
                f"every query differs by {sum(diffs) / len(diffs):+.4g}: without variance the "
                f"{name} is undefined, as the {others} test is (the sign, Wilcoxon or "
                "permutation test is not)"
            )
    return None


def paired_p(
    test: str,
    a: Sequence[float],
    b: Sequence[float],
    *,
    permutations: int = COMPARE.permutations,
    samples: int = COMPARE.bootstrap,
    seed: int = COMPARE.seed,
) -> float:
    """The two-sided p-value of ``test`` (one of TESTS) comparing a with b, query by query."""
    if test == "t":
        return paired_t_test(a, b)
    if test == "wilcoxon":
        return wilcoxon_test(a, b)
    if test == "sign":
        return sign_test(a, b)
    if test == "permutation":
        return permutation_test(a, b, permutations=permutations, seed=seed)
    if test == "bootstrap":
        return bootstrap_test(a, b, samples=samples, seed=seed)
    raise CmrkitError(f"unknown test {test!r}; use one of {', '.join(TESTS)}")


def cohens_dz(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cohen's d_z of paired samples: the mean difference over the standard deviation of the
    differences (n - 1); None with fewer than two queries or no variance (up to rounding)."""
    import numpy as np

    _same_length(a, b)
    if len(a) < 2:
        return None
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if _constant(d.tolist()):
        return None
    return float(d.mean()) / float(d.std(ddof=1))


def _constant(diffs: Sequence[float]) -> bool:
    """The same difference on every query, up to rounding (0.35 - 0.1 is not 0.25 in binary)."""
    return max(diffs) - min(diffs) <= 1e-12 * max(1.0, *map(abs, diffs))


def _same_length(a: Sequence[float], b: Sequence[float]) -> None:
    if len(a) != len(b):
        raise ValueError("paired samples differ in length")


def _identical(a: Sequence[float], b: Sequence[float]) -> bool:
    return len(a) > 0 and all(x == y for x, y in zip(a, b, strict=True))


def correct_pvalues(pvalues: Sequence[float], method: str) -> list[float]:
    """Corrected p-values: Holm's and Bonferroni's family-wise corrections, Benjamini &
    Hochberg's (``bh``) and Benjamini & Yekutieli's (``by``) false-discovery-rate adjustments
    as statsmodels' ``multipletests`` computes them, or none; NaN stays NaN and is not counted."""
    if method not in CORRECTIONS:
        raise CmrkitError(f"unknown correction {method!r}; use one of {', '.join(CORRECTIONS)}")
    valid = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    out = list(pvalues)
    m = len(valid)
    if method == "bonferroni":
        for i in valid:
            out[i] = min(1.0, pvalues[i] * m)
    elif method == "holm":
        running = 0.0
        for rank, i in enumerate(sorted(valid, key=lambda j: pvalues[j])):
            running = max(running, min(1.0, (m - rank) * pvalues[i]))
            out[i] = running
    elif method in ("bh", "by"):
        factor = sum(1.0 / k for k in range(1, m + 1)) if method == "by" else 1.0
        running = 1.0
        for rank, i in reversed(list(enumerate(sorted(valid, key=lambda j: pvalues[j]), 1))):
            running = min(running, pvalues[i] * m * factor / rank)
            out[i] = min(1.0, running)
    return out


@dataclass
class PairComparison:
    """Two systems on one measure under Tukey's HSD: ``delta`` is first's mean minus second's,
    ``ci`` its simultaneous confidence interval."""

    first: str
    second: str
    delta: float
    p: float
    ci: tuple[float, float] | None
    significant: bool
    note: str | None = None


def tukey_hsd(
    values: Mapping[str, Sequence[float]],
    *,
    ci: float = COMPARE.ci,
    alpha: float = COMPARE.alpha,
    criteria: dict | None = None,
) -> list[PairComparison]:
    """Tukey's honestly significant difference test over every pair of systems, as ranx runs
    it: scipy.stats.tukey_hsd's numbers (each system's per-query values one group; the p-values
    already adjusted for all pairs), computed as scipy computes them but for each pair once:
    scipy integrates the studentized range for every cell of the k x k matrix (the diagonal and
    both triangles), this the k(k-1)/2 pairs in one vectorised call. ``criteria`` keeps the
    critical value of the intervals (scipy's studentized_range.ppf, a root search) by (level,
    groups, degrees of freedom), to share across measures. Pairs in the order given, first
    before second."""
    import numpy as np

    names = list(values)
    if len(names) < 2:
        raise CmrkitError("Tukey's HSD needs two systems or more")
    arrays = [np.asarray(values[n], dtype=np.float64) for n in names]
    if min(len(x) for x in arrays) < 2:
        raise CmrkitError("Tukey's HSD needs two queries or more")
    pairs = list(itertools.combinations(range(len(names)), 2))
    if all(np.ptp(x) == 0 for x in arrays):
        note = "no system's score varies over the queries: Tukey's HSD is undefined"
        return [
            PairComparison(
                names[i], names[j], float(arrays[i].mean() - arrays[j].mean()), math.nan,
                None, False, note,
            )
            for i, j in pairs
        ]  # fmt: skip
    import warnings

    from scipy.stats import studentized_range

    # scipy.stats.tukey_hsd (equal variances), operation for operation
    k = len(arrays)
    means = np.asarray([np.mean(a) for a in arrays])
    sizes = np.asarray([a.size for a in arrays])
    total = np.sum(sizes)
    variances = np.asarray([np.var(a, ddof=1) for a in arrays])
    mse = np.sum(variances * (sizes - 1)) / (total - k)
    if np.unique(sizes).size == 1:
        normalize = 2 / sizes[0]
    else:
        normalize = 1 / sizes + 1 / sizes[None].T
    stand_err = np.broadcast_to(np.sqrt(normalize * mse / 2), (k, k))
    differences = means[None].T - means
    first, second = (np.asarray(x) for x in zip(*pairs, strict=True))
    t_stat = np.abs(differences[first, second]) / stand_err[first, second]
    df = total - k
    key = (ci, k, int(df))
    with warnings.catch_warnings():  # far apart, the studentized range's tail integral warns
        warnings.simplefilter("ignore", category=RuntimeWarning)
        warnings.simplefilter("ignore", category=UserWarning)  # scipy's IntegrationWarning
        pvalues = studentized_range.sf(t_stat, k, df)
        critical = None if criteria is None else criteria.get(key)
        if critical is None:
            critical = studentized_range.ppf(ci, k, df)
            if criteria is not None:
                criteria[key] = critical
    radius = critical * stand_err[first, second]
    out = []
    for n, (i, j) in enumerate(pairs):
        delta, p = differences[i, j], float(pvalues[n])
        low, high = delta - radius[n], delta + radius[n]
        interval = (float(low), float(high))
        out.append(PairComparison(names[i], names[j], float(delta), p, interval, p < alpha))
    return out


@dataclass
class MeasureComparison:
    """One system against the baseline on one measure, over the compared queries: ``mean``
    and ``baseline_mean`` are averaged over the same queries the test pairs, so ``delta`` is
    their difference. ``delta_ci`` is its bootstrap interval, ``d_z`` Cohen's paired effect
    size; ``note`` says why ``p`` is undefined (NaN) when it is."""

    mean: float
    baseline_mean: float
    delta: float
    queries: int
    improved: int
    hurt: int
    p: float
    p_adjusted: float = math.nan
    significant: bool = False
    note: str | None = None
    delta_ci: tuple[float, float] | None = None
    d_z: float | None = None


@dataclass
class Comparison:
    """Systems x measures against a baseline, with significance tests and effect sizes.

    ``queries`` are the queries every system is averaged and tested on: those in the qrels
    and in the runs (every run scores the same ones; with ``all_queries``, every qrels query,
    0 where a run lacks it). ``results`` hold each run's full evaluation; ``intervals`` each
    system's bootstrap interval of its mean (system -> measure -> (low, high)); ``pairs``
    Tukey's HSD over every pair (measure -> pairs) when ``all_pairs``.
    """

    baseline: str
    measures: list[Measure]
    results: dict[str, Result]
    test: str
    correction: str
    alpha: float
    queries: list[str] = field(default_factory=list)
    all_queries: bool = False
    stats: dict[str, dict[str, MeasureComparison]] = field(default_factory=dict)
    ci: float = COMPARE.ci
    bootstrap: int = COMPARE.bootstrap
    seed: int = COMPARE.seed
    intervals: dict[str, dict[str, tuple[float, float] | None]] = field(default_factory=dict)
    all_pairs: bool = False
    pairs: dict[str, list[PairComparison]] = field(default_factory=dict)

    @property
    def systems(self) -> list[str]:
        return list(self.results)

    def mean(self, system: str, measure: Measure) -> float:
        """The system's aggregate of ``measure`` over the compared queries."""
        return aggregate(measure, self.results[system].values(measure, self.queries))

    def describe(self) -> str:
        """Which queries the means and tests use, and how many: one line."""
        n = len(self.queries)
        if self.all_queries:
            return f"means and tests over all {n} qrels queries (0 where a run lacks one)"
        return f"means and tests over the {n} queries in the qrels and in every run"

    @property
    def notes(self) -> list[str]:
        """One line per system and measure whose test is undefined, saying why."""
        out = []
        for name, cells in self.stats.items():
            for measure, cell in cells.items():
                if cell.note:
                    out.append(f"{name} vs {self.baseline} on {measure}: {cell.note}")
        for measure, pairs in self.pairs.items():
            for pair in pairs:
                if pair.note:
                    out.append(f"{measure}: {pair.note}")
                    break
        return out


def _same_queries(results: Mapping[str, Result], base: str, judged: int) -> list[str]:
    """The queries every run scores; runs that score different ones are refused, naming the
    queries that differ and what to add to the command (``judged``: the qrels' queries)."""
    reference = results[base].per_query
    for name, r in results.items():
        if name == base or r.per_query.keys() == reference.keys():
            continue
        lacks = [q for q in reference if q not in r.per_query]
        extra = [q for q in r.per_query if q not in reference]
        parts = []
        if lacks:
            parts.append(f"lacks {len(lacks)} of {base}'s queries ({_some(lacks)})")
        if extra:
            parts.append(f"has {len(extra)} that {base} lacks ({_some(extra)})")
        raise CmrkitError(
            f"the runs score different queries: {name} {' and '.join(parts)}; add -c to the "
            f"command (--all-queries) to score a query a run lacks as 0 and average every run "
            f"over all {judged:,} qrels queries, or compare runs of the same queries"
        )
    return list(reference)


def _some(qids: Sequence[str]) -> str:
    shown = ", ".join(qids[:5])
    return shown + (", ..." if len(qids) > 5 else "")


def compare(
    runs: Mapping[str, Run],
    qrels: Qrels,
    measures: Sequence[Measure | str] | None = None,
    *,
    baseline: str | None = None,
    test: str = "t",
    correction: str = "holm",
    alpha: float = COMPARE.alpha,
    all_queries: bool = False,
    depth: int | None = None,
    strata: Strata | None = None,
    permutations: int = COMPARE.permutations,
    seed: int = COMPARE.seed,
    version: str = "10",
    ci: float = COMPARE.ci,
    bootstrap: int = COMPARE.bootstrap,
    all_pairs: bool = False,
) -> Comparison:
    """Evaluate every run and test each against the baseline (the first run by default).

    Every system is averaged, and paired with the baseline, on the same queries: those in the
    qrels and in the runs, which must score the same ones (with ``all_queries``, every qrels
    query). p-values are corrected over the systems compared to the baseline, separately for
    each measure. ``bootstrap`` resamples of the queries (seeded by ``seed``; 0: none) give
    each mean and each difference its ``ci`` percentile interval (and the bootstrap test its
    null distribution); ``all_pairs`` adds Tukey's HSD over every pair of systems.
    """
    _check_options(runs, test, correction, alpha, ci, bootstrap, permutations)
    names = list(runs)
    base = baseline if baseline is not None else names[0]
    if base not in runs:
        raise CmrkitError(f"baseline {base!r} is not one of the runs ({', '.join(names)})")
    ms = parse_measures(measures, version)
    results = {
        name: evaluate(
            runs[name],
            qrels,
            ms,
            all_queries=all_queries,
            depth=depth,
            strata=strata,
            version=version,
            name=name,
        )
        for name in names
    }
    paired = _same_queries(results, base, len(qrels))
    if not paired:
        raise CmrkitError(
            "no query is scored in the runs; compare runs of the qrels' topics, or add -c to "
            "the command (--all-queries) to score missing queries as 0"
        )
    comp = Comparison(base, ms, results, test, correction, alpha, paired, all_queries)
    comp.ci, comp.bootstrap, comp.seed, comp.all_pairs = ci, bootstrap, seed, all_pairs
    values = {(n, m.name): results[n].values(m, paired) for n in names for m in ms}
    resampled = _resample(comp, values, bootstrap, seed)
    others = [n for n in names if n != base]
    criteria: dict = {}  # Tukey's critical value, the same for every measure
    for m in ms:
        for name in others:
            comp.stats.setdefault(name, {})[m.name] = _against(
                comp, m, values[name, m.name], values[base, m.name], permutations, seed
            )
        if resampled is not None:
            _intervals(comp, m, values, resampled)
        _correct(comp, m, others)
        if all_pairs:
            comp.pairs[m.name] = tukey_hsd(
                {n: values[n, m.name] for n in names}, ci=ci, alpha=alpha, criteria=criteria
            )
    return comp


def _check_options(runs, test, correction, alpha, ci, bootstrap, permutations) -> None:
    if len(runs) < 2:
        raise CmrkitError("compare needs at least two runs")
    if test not in TESTS:
        raise CmrkitError(f"unknown test {test!r}; use one of {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise CmrkitError(f"unknown correction {correction!r}; use one of {', '.join(CORRECTIONS)}")
    if not 0 < alpha < 1:
        raise CmrkitError(f"alpha {alpha} must lie between 0 and 1")
    if not 0 < ci < 1:
        raise CmrkitError(f"--ci {ci} must lie between 0 and 1 (0.95 for 95% intervals)")
    if bootstrap < 0:
        raise CmrkitError(f"--bootstrap {bootstrap} must be 0 (no intervals) or more")
    if test == "bootstrap" and bootstrap < 1:
        raise CmrkitError("--test bootstrap needs --bootstrap samples (1 or more; 10,000 is usual)")
    if permutations < 1:
        raise CmrkitError(f"--permutations {permutations} must be 1 or more")


def _resample(comp: Comparison, values, samples: int, seed: int):
    """Every system's mean of every measure over the same ``samples`` resamples of the compared
    queries: {(system, measure): resampled means}; None without resamples."""
    if not samples:
        return None
    keys = list(values)
    summed = {m.name: m.summed for m in comp.measures}
    scale = [1.0 if summed[m] else 1.0 / len(comp.queries) for _, m in keys]
    means = resampled_means([values[k] for k in keys], samples, seed, scale)
    return {k: means[:, i] for i, k in enumerate(keys)}


def _against(comp: Comparison, m: Measure, xs, ys, permutations: int, seed: int):
    """One system against the baseline on one measure (the bootstrap test's p comes with the
    intervals, from the shared resamples)."""
    note = undefined_test(comp.test, xs, ys)
    if comp.test == "bootstrap" or note:
        p = 1.0 if not note and _identical(xs, ys) else math.nan
    else:
        p = paired_p(comp.test, xs, ys, permutations=permutations, seed=seed)
    mean, baseline_mean = aggregate(m, xs), aggregate(m, ys)
    return MeasureComparison(
        mean=mean,
        baseline_mean=baseline_mean,
        delta=mean - baseline_mean,
        queries=len(xs),
        improved=sum(x > y for x, y in zip(xs, ys, strict=True)),
        hurt=sum(x < y for x, y in zip(xs, ys, strict=True)),
        p=p,
        note=note,
        d_z=cohens_dz(xs, ys),
    )


def _intervals(comp: Comparison, m: Measure, values, resampled) -> None:
    """Each system's interval of its mean, each difference's, and the bootstrap test's p."""
    import numpy as np

    from cmrkit.evaluation.bootstrap import percentile_interval

    base = resampled[comp.baseline, m.name]
    for name in comp.systems:
        comp.intervals.setdefault(name, {})[m.name] = percentile_interval(
            resampled[name, m.name], comp.ci
        )
    for name, cells in comp.stats.items():
        cell = cells[m.name]
        diffs = resampled[name, m.name] - base
        cell.delta_ci = percentile_interval(diffs, comp.ci)
        if comp.test == "bootstrap" and math.isnan(cell.p) and not cell.note:
            pair = np.asarray(
                [values[name, m.name], values[comp.baseline, m.name]], dtype=np.float64
            )
            scale = 1.0 if m.summed else 1.0 / len(comp.queries)
            cell.p = _bootstrap_p(diffs, pair, scale)


def _correct(comp: Comparison, m: Measure, others: Sequence[str]) -> None:
    cells = [comp.stats[n][m.name] for n in others]
    for cell, adjusted in zip(
        cells, correct_pvalues([c.p for c in cells], comp.correction), strict=True
    ):
        cell.p_adjusted = adjusted
        cell.significant = not math.isnan(adjusted) and adjusted < comp.alpha


def run_names(paths: Sequence[str | os.PathLike]) -> list[str]:
    """Short unique names for run files: the file name without .gz/.trec/.txt/.run suffixes."""

    def short(p: str | os.PathLike) -> str:
        name = os.path.basename(os.fspath(p))
        for suffix in (".gz", ".trec", ".txt", ".run", ".tsv"):
            if name.endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
        return name

    names = [short(p) for p in paths]
    if len(set(names)) < len(names):
        names = [os.fspath(p) for p in paths]
    if len(set(names)) < len(names):
        raise CmrkitError("the same run file is given twice; name each run once")
    return names
