"""The tests, corrections and effect sizes of evaluation/significance.py against scipy and
statsmodels on the same inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multicomp import pairwise_tukeyhsd
from statsmodels.stats.multitest import multipletests

from cmrkit.evaluation import (
    bootstrap_test,
    cohens_dz,
    correct_pvalues,
    paired_p,
    paired_t_test,
    sign_test,
    tukey_hsd,
    wilcoxon_test,
)
from cmrkit.evaluation.bootstrap import percentile_interval
from cmrkit.evaluation.significance import resampled_means, undefined_test


def pairs(seed: int, count: int = 30):
    """Paired per-query scores of two systems: the second a little better, with ties and
    queries where both score the same (as AP and RR do)."""
    rng = np.random.default_rng(seed)
    for trial in range(count):
        n = int(rng.integers(5, 80))
        a = np.round(rng.random(n), 2)
        b = np.round(np.clip(a + rng.normal(0.03, 0.15, n), 0, 1), 2)
        b[: trial % 4] = a[: trial % 4]  # a few queries tied
        yield a, b


def test_t_wilcoxon_and_sign_are_scipys():
    for a, b in pairs(1):
        assert paired_t_test(a, b) == pytest.approx(stats.ttest_rel(a, b).pvalue, abs=1e-12)
        assert wilcoxon_test(a, b) == pytest.approx(stats.wilcoxon(a, b).pvalue, abs=1e-12)
        wins, losses = int((a > b).sum()), int((a < b).sum())
        want = stats.binomtest(wins, wins + losses, 0.5).pvalue
        assert sign_test(a, b) == pytest.approx(want, abs=1e-12)
        assert paired_p("sign", a, b) == sign_test(a, b)


def test_identical_runs_have_p_one_and_a_constant_difference_has_no_t_test():
    a = [0.1, 0.5, 0.3]
    for test in ("t", "wilcoxon", "sign", "permutation", "bootstrap"):
        assert paired_p(test, a, a) == 1.0
    shifted = [x + 0.25 for x in a]
    assert math.isnan(paired_t_test(shifted, a))
    note = undefined_test("t", shifted, a)
    assert note.startswith("every query differs by +0.25") and "t-test is undefined" in note
    # the other tests are defined: three wins of three
    assert sign_test(shifted, a) == pytest.approx(stats.binomtest(3, 3).pvalue)
    assert undefined_test("sign", shifted, a) is None
    assert undefined_test("t", [0.2], [0.1]) == "the t-test needs two queries or more"
    assert cohens_dz(shifted, a) is None


def test_bootstrap_intervals_are_scipys_percentile_bootstrap_with_the_same_seed():
    for seed, (a, b) in enumerate(pairs(2, count=10)):
        d = a - b
        ours = resampled_means(np.array([a, b]), 2000, seed)
        theirs = stats.bootstrap(
            (d,),
            np.mean,
            n_resamples=2000,
            method="percentile",
            confidence_level=0.9,
            rng=np.random.default_rng(seed),
        )
        got = percentile_interval(ours[:, 0] - ours[:, 1], 0.9)
        want = (theirs.confidence_interval.low, theirs.confidence_interval.high)
        assert got == pytest.approx(want, abs=1e-12)
        # the shift method's p from scipy's bootstrap distribution of the mean difference
        dist = theirs.bootstrap_distribution
        far = np.count_nonzero(np.abs(dist - d.mean()) >= abs(d.mean()) * (1 - 1e-12))
        assert bootstrap_test(a, b, samples=2000, seed=seed) == pytest.approx(
            (far + 1) / 2001, abs=1e-12
        )


def test_bootstrap_test_agrees_with_the_t_test_on_many_queries():
    rng = np.random.default_rng(5)
    for shift in (0.0, 0.01, 0.02, 0.04):
        a = rng.random(800)
        b = np.clip(a + shift + rng.normal(0, 0.2, 800), 0, 1)
        t = paired_t_test(a, b)
        boot = bootstrap_test(a, b, samples=20000, seed=1)
        # the same verdict, and p-values a Monte Carlo error apart
        assert abs(boot - t) < 0.01 + 0.1 * t
    assert bootstrap_test(a, b, samples=500, seed=3) == bootstrap_test(a, b, samples=500, seed=3)


def test_cohens_dz_by_its_definition():
    for a, b in pairs(3, count=5):
        d = a - b
        assert cohens_dz(a, b) == pytest.approx(d.mean() / d.std(ddof=1), rel=1e-12)
        # d_z is the t statistic over sqrt(n)
        t = stats.ttest_rel(a, b).statistic
        assert cohens_dz(a, b) == pytest.approx(t / math.sqrt(len(d)), rel=1e-9)


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [("holm", "holm"), ("bonferroni", "bonferroni"), ("bh", "fdr_bh"), ("by", "fdr_by")],
)
def test_corrections_are_statsmodels(ours, theirs):
    rng = np.random.default_rng(4)
    for _ in range(50):
        p = rng.random(int(rng.integers(1, 20))) ** 3
        got = correct_pvalues(list(p), ours)
        assert got == pytest.approx(list(multipletests(p, method=theirs)[1]), abs=1e-12)
        # a NaN (an undefined test) is left out of the family and stays NaN
        with_nan = correct_pvalues([*p, math.nan], ours)
        assert math.isnan(with_nan[-1]) and with_nan[:-1] == pytest.approx(got, abs=1e-15)


def test_bh_by_hand():
    # sorted 0.01, 0.03, 0.04 times 3/1, 3/2, 3/3 -> 0.03, 0.045, 0.04; from the largest down
    # the running minimum: 0.04, 0.04, 0.03
    assert correct_pvalues([0.01, 0.04, 0.03], "bh") == pytest.approx([0.03, 0.04, 0.04])
    c = 1 + 1 / 2 + 1 / 3
    assert correct_pvalues([0.01, 0.04, 0.03], "by") == pytest.approx(
        [0.03 * c, 0.04 * c, 0.04 * c]
    )


def test_tukey_hsd_is_statsmodels():
    rng = np.random.default_rng(8)
    values = {f"s{i}": rng.random(60) + 0.05 * i for i in range(4)}
    got = tukey_hsd(values, ci=0.95, alpha=0.05)
    endog = np.concatenate(list(values.values()))
    groups = np.repeat(list(values), 60)
    ref = pairwise_tukeyhsd(endog, groups, alpha=0.05)
    assert [(p.first, p.second) for p in got] == [
        (a, b) for a, b in zip(ref.groupsunique[ref._multicomp.pairindices[0]],
                               ref.groupsunique[ref._multicomp.pairindices[1]], strict=True)
    ]  # fmt: skip
    for pair, diff, p, (low, high), reject in zip(
        got, ref.meandiffs, ref.pvalues, ref.confint, ref.reject, strict=True
    ):
        # statsmodels reports second - first
        assert pair.delta == pytest.approx(-diff, abs=1e-12)
        assert pair.p == pytest.approx(p, abs=1e-6)
        assert pair.ci == pytest.approx((-high, -low), abs=1e-6)
        assert pair.significant == bool(reject)
    flat = tukey_hsd({"a": [0.5, 0.5], "b": [0.5, 0.5]})
    assert math.isnan(flat[0].p) and "undefined" in flat[0].note


def test_tukey_hsd_is_scipys_to_the_last_bit():
    """Each pair integrated once (scipy integrates every cell of the k x k matrix) and the
    critical value shared across measures give scipy.stats.tukey_hsd's doubles: the difference,
    p and the interval, for equal and unequal group sizes, near and far apart."""
    import warnings

    from scipy import stats

    rng = np.random.default_rng(5)
    criteria: dict = {}
    for sizes, spread in (([40] * 5, 0.02), ([40] * 5, 0.3), ([30, 45, 60], 0.05)):
        groups = [rng.random(n) * 0.5 + spread * i for i, n in enumerate(sizes)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = stats.tukey_hsd(*groups)
            interval = ref.confidence_interval(0.9)
        got = tukey_hsd({f"s{i}": g for i, g in enumerate(groups)}, ci=0.9, criteria=criteria)
        assert len(got) == len(groups) * (len(groups) - 1) // 2
        for pair in got:
            i, j = int(pair.first[1:]), int(pair.second[1:])
            assert pair.delta == ref.statistic[i, j] and pair.p == ref.pvalue[i, j]
            assert pair.ci == (interval.low[i, j], interval.high[i, j])
    assert sorted(criteria) == [(0.9, 3, 132), (0.9, 5, 195)]  # one root search per shape
