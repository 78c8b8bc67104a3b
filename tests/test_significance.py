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


def test_the_bootstrap_test_of_one_query_or_no_variance_is_undefined_as_scipy_s_bootstrap():
    """Issue 42 item 3: with one query every resample is that query, so the resampled
    difference never moved and p came out 1 / (B + 1) = 1e-4, significant. Efron &
    Tibshirani's shift method (and Sakai's paired bootstrap test, studentised) learn the
    spread of the mean difference from the queries' differences: none, or none that vary,
    say nothing. scipy.stats.bootstrap, the reference of the intervals, refuses one
    observation and calls a distribution without variance degenerate."""
    import warnings

    one_a, one_b = [0.8333333333333333], [0.5833333333333333]
    with pytest.raises(ValueError, match="two or more observations"):
        stats.bootstrap((np.array(one_a) - one_b,), np.mean, rng=np.random.default_rng(0))
    assert math.isnan(bootstrap_test(one_a, one_b, samples=10000, seed=0))
    note = undefined_test("bootstrap", one_a, one_b)
    assert note == "the bootstrap test needs two queries or more"
    # the same difference on every query: scipy's bootstrap distribution does not vary
    a, b = [0.25, 0.5, 0.75, 1.0], [0.5, 0.75, 1.0, 1.25]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        theirs = stats.bootstrap((np.subtract(a, b),), np.mean, n_resamples=500,
                                 rng=np.random.default_rng(1))  # fmt: skip
    assert np.ptp(theirs.bootstrap_distribution) < 1e-12
    assert any("degenerate" in str(w.message) for w in caught)
    assert math.isnan(bootstrap_test(a, b, samples=500, seed=1))
    note = undefined_test("bootstrap", a, b)
    assert note.startswith("every query differs by -0.25") and "bootstrap test is undefined" in note
    # the tests that need no variance still answer
    assert sign_test(a, b) == pytest.approx(stats.binomtest(0, 4).pvalue)
    # two queries that differ: defined, and scipy's distribution gives the same p
    a2, b2 = np.array([1.0, 0.25]), np.array([0.0, 0.25])
    dist = stats.bootstrap((a2 - b2,), np.mean, n_resamples=999, method="percentile",
                           rng=np.random.default_rng(3)).bootstrap_distribution  # fmt: skip
    observed = (a2 - b2).mean()
    far = np.count_nonzero(np.abs(dist - observed) >= abs(observed) * (1 - 1e-12))
    assert bootstrap_test(a2, b2, samples=999, seed=3) == pytest.approx((far + 1) / 1000)
    assert 0.3 < bootstrap_test(a2, b2, samples=999, seed=3) < 0.7


def test_compare_of_the_one_query_reproducer_calls_nothing_significant(tmp_path):
    """The issue's reproducer: qrels q1 d1 1 / d2 0 / d3 1; A ranks d1 d2 d3, B d2 d1 d3."""
    import json

    from typer.testing import CliRunner

    from cmrkit.cli import app

    (tmp_path / "q.txt").write_text("q1 0 d1 1\nq1 0 d2 0\nq1 0 d3 1\n")
    (tmp_path / "a.trec").write_text("q1 Q0 d1 1 3 A\nq1 Q0 d2 2 2 A\nq1 Q0 d3 3 1 A\n")
    (tmp_path / "b.trec").write_text("q1 Q0 d2 1 3 B\nq1 Q0 d1 2 2 B\nq1 Q0 d3 3 1 B\n")
    files = [str(tmp_path / n) for n in ("q.txt", "a.trec", "b.trec")]
    for test in ("bootstrap", "t", "wilcoxon", "sign", "permutation"):
        res = CliRunner().invoke(app, ["compare", *files, "-m", "AP", "--test", test, "-f", "json"])
        assert res.exit_code == 0, res.stderr
        cell = json.loads(res.stdout)["systems"]["b"]["against_baseline"]["AP"]
        assert cell["delta"] == pytest.approx(-0.25) and not cell["significant"], (test, cell)
        if test in ("bootstrap", "t"):
            assert cell["p"] is None and cell["note"].endswith("needs two queries or more")
        else:
            assert cell["p"] == 1.0
    table = CliRunner().invoke(app, ["compare", *files, "-m", "AP", "--test", "bootstrap"])
    assert "p undefined" in table.stdout and "0.5833*" not in table.stdout
    assert "note: b vs a on AP: the bootstrap test needs two queries or more" in table.stderr
