"""Systems against a baseline: paired tests (t, permutation), multiple-comparison corrections."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures import Measure, parse_measures
from cmrkit.evaluation.ranking import Result, aggregate, evaluate
from cmrkit.trec import Qrels, Run, Strata

TESTS = ("t", "permutation")
CORRECTIONS = ("holm", "bonferroni", "none")


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Student's paired t-test (scipy); 1.0 when a equals b everywhere."""
    if len(a) != len(b):
        raise ValueError("paired samples differ in length")
    if len(a) < 2:
        return math.nan
    if all(x == y for x, y in zip(a, b, strict=True)):
        return 1.0
    from scipy import stats

    return float(stats.ttest_rel(a, b).pvalue)


def permutation_test(
    a: Sequence[float], b: Sequence[float], *, permutations: int = 10000, seed: int = 0
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


def correct_pvalues(pvalues: Sequence[float], method: str) -> list[float]:
    """Family-wise corrected p-values (holm, bonferroni or none); NaN stays NaN, not counted."""
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
    return out


@dataclass
class MeasureComparison:
    """One system against the baseline on one measure, over the compared queries: ``mean``
    and ``baseline_mean`` are averaged over the same queries the test pairs, so ``delta`` is
    their difference."""

    mean: float
    baseline_mean: float
    delta: float
    queries: int
    improved: int
    hurt: int
    p: float
    p_adjusted: float = math.nan
    significant: bool = False


@dataclass
class Comparison:
    """Systems x measures against a baseline, with significance tests.

    ``queries`` are the queries every system is averaged and tested on: those in the qrels
    and in every run (with ``all_queries``, every qrels query, 0 where a run lacks it).
    ``results`` hold each run's full evaluation; ``left_out`` the queries a run was scored on
    that are not compared (because another run lacks them).
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

    @property
    def systems(self) -> list[str]:
        return list(self.results)

    def mean(self, system: str, measure: Measure) -> float:
        """The system's aggregate of ``measure`` over the compared queries."""
        return aggregate(measure, self.results[system].values(measure, self.queries))

    @property
    def left_out(self) -> dict[str, list[str]]:
        compared = set(self.queries)
        return {
            name: [q for q in r.per_query if q not in compared] for name, r in self.results.items()
        }

    def describe(self) -> str:
        """Which queries the means and tests use, and how many: one line."""
        n = len(self.queries)
        if self.all_queries:
            return f"means and tests over all {n} qrels queries (0 where a run lacks one)"
        text = f"means and tests over the {n} queries in the qrels and in every run"
        out = [f"{name} {len(qs)}" for name, qs in self.left_out.items() if qs]
        if out:
            text += "; scored but left out: " + ", ".join(out)
        return text


def compare(
    runs: Mapping[str, Run],
    qrels: Qrels,
    measures: Sequence[Measure | str] | None = None,
    *,
    baseline: str | None = None,
    test: str = "t",
    correction: str = "holm",
    alpha: float = 0.05,
    all_queries: bool = False,
    depth: int | None = None,
    strata: Strata | None = None,
    permutations: int = 10000,
    seed: int = 0,
    version: str = "10",
) -> Comparison:
    """Evaluate every run and test each against the baseline (the first run by default).

    Every system is averaged, and paired with the baseline, on the same queries: those in the
    qrels and in every run (with ``all_queries``, every qrels query). p-values are corrected
    over the systems compared to the baseline, separately for each measure.
    """
    if len(runs) < 2:
        raise CmrkitError("compare needs at least two runs")
    if test not in TESTS:
        raise CmrkitError(f"unknown test {test!r}; use one of {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise CmrkitError(f"unknown correction {correction!r}; use one of {', '.join(CORRECTIONS)}")
    if not 0 < alpha < 1:
        raise CmrkitError(f"alpha {alpha} must lie between 0 and 1")
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
        )
        for name in names
    }
    b = results[base]
    paired = [q for q in b.per_query if all(q in r.per_query for r in results.values())]
    if not paired:
        raise CmrkitError(
            "no query is scored in every run; compare runs of the same topics, or pass "
            "--all-queries to score missing queries as 0"
        )
    comp = Comparison(base, ms, results, test, correction, alpha, paired, all_queries)
    others = [n for n in names if n != base]
    for name in others:
        r = results[name]
        comp.stats[name] = {}
        for m in ms:
            xs, ys = r.values(m, paired), b.values(m, paired)
            if test == "t":
                p = paired_t_test(xs, ys)
            else:
                p = permutation_test(xs, ys, permutations=permutations, seed=seed)
            mean, baseline_mean = aggregate(m, xs), aggregate(m, ys)
            comp.stats[name][m.name] = MeasureComparison(
                mean=mean,
                baseline_mean=baseline_mean,
                delta=mean - baseline_mean,
                queries=len(paired),
                improved=sum(x > y for x, y in zip(xs, ys, strict=True)),
                hurt=sum(x < y for x, y in zip(xs, ys, strict=True)),
                p=p,
            )
    for m in ms:
        cells = [comp.stats[n][m.name] for n in others]
        for cell, adjusted in zip(
            cells, correct_pvalues([c.p for c in cells], correction), strict=True
        ):
            cell.p_adjusted = adjusted
            cell.significant = not math.isnan(adjusted) and adjusted < alpha
    return comp


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
