"""Ranking agreement (evaluation/agreement.py) against scipy, the rbo package, the definitions
of tau_AP (Yilmaz et al. 2008; Urbano & Marrero 2017) worked by hand, and its bootstrap."""

from __future__ import annotations

import itertools
import math
import os

import numpy as np
import pytest
from scipy import stats

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.agreement import agreement_intervals, ranking_agreement
from cmrkit.evaluation.bootstrap import percentile_interval, resample_counts


def scores(names, values):
    return dict(zip(names, values, strict=True))


def agreement(ref, other, **kw):
    names = [f"s{i}" for i in range(len(ref))]
    return ranking_agreement(scores(names, ref), scores(names, other), **kw)


def test_kendall_tau_b_and_tau_a_match_scipy_with_and_without_ties():
    rng = np.random.default_rng(7)
    for trial in range(200):
        n = int(rng.integers(3, 15))
        x = rng.random(n)
        y = x + rng.normal(0, 0.3, n)
        if trial % 2:  # ties on both sides
            x, y = np.round(x * 4) / 4, np.round(y * 4) / 4
        got = agreement(x.tolist(), y.tolist())
        want = stats.kendalltau(x, y, variant="b").statistic
        if math.isnan(want):
            assert got.tau_b is None
            continue
        assert got.tau_b == pytest.approx(want, abs=1e-12)
        concordant = sum(
            1 for i, j in itertools.combinations(range(n), 2) if (x[i] - x[j]) * (y[i] - y[j]) > 0
        )
        discordant = sum(
            1 for i, j in itertools.combinations(range(n), 2) if (x[i] - x[j]) * (y[i] - y[j]) < 0
        )
        assert got.tau == pytest.approx((concordant - discordant) / (n * (n - 1) / 2), abs=1e-15)
        if len(set(x)) == n and len(set(y)) == n:
            assert got.tau == pytest.approx(want, abs=1e-12)


def test_pearson_and_spearman_match_scipy():
    rng = np.random.default_rng(3)
    for trial in range(100):
        n = int(rng.integers(3, 12))
        x = np.round(rng.random(n), 1 + trial % 2)
        y = np.round(x + rng.normal(0, 0.2, n), 1 + trial % 2)
        got = agreement(x.tolist(), y.tolist())
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            assert got.pearson is None and got.spearman is None
            continue
        assert got.pearson == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)
        assert got.spearman == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)


def test_tau_ap_by_hand():
    # reference a > b > c > d; the other ranking b > a > d > c. Walking down the other ranking:
    # a (2nd) is above b in the reference: 0 of 1 above it ordered right; d (3rd): 2 of 2;
    # c (4th): a and b right, d wrong: 2 of 3. tau_AP = 2/3 * (0 + 1 + 2/3) - 1 = 1/9.
    got = ranking_agreement(
        {"a": 0.5, "b": 0.4, "c": 0.3, "d": 0.2}, {"a": 0.4, "b": 0.5, "c": 0.1, "d": 0.2}
    )
    assert got.tau_ap == pytest.approx(1 / 9, abs=1e-15)
    assert got.tau == pytest.approx(1 / 3)
    # top-weighted: a swap at the top costs more than the same swap at the bottom, where
    # Kendall's tau sees no difference
    ref = {"a": 3.0, "b": 2.0, "c": 1.0}
    top = ranking_agreement(ref, {"a": 2.0, "b": 3.0, "c": 1.0})
    bottom = ranking_agreement(ref, {"a": 3.0, "b": 1.0, "c": 2.0})
    assert top.tau == bottom.tau == pytest.approx(1 / 3)
    # top: a (2nd) wrong 0/1, c (3rd) right 2/2 -> 2/2 * 1 - 1 = 0
    # bottom: c (2nd) right 1/1, b (3rd) a right, c wrong 1/2 -> 1.5 - 1 = 0.5
    assert top.tau_ap == pytest.approx(0.0, abs=1e-15)
    assert bottom.tau_ap == pytest.approx(0.5, abs=1e-15)
    assert ranking_agreement(ref, ref).tau_ap == pytest.approx(1.0)
    assert ranking_agreement(ref, {k: -v for k, v in ref.items()}).tau_ap == pytest.approx(-1.0)


def yilmaz(ref: list[float], order: list[int]) -> float:
    """tau_AP of the ranking ``order`` (indices, best first) against ``ref`` scores, as
    Yilmaz et al. define it."""
    n = len(order)
    total = 0.0
    for i in range(1, n):
        right = sum(1 for j in range(i) if ref[order[j]] > ref[order[i]])
        total += right / i
    return 2 / (n - 1) * total - 1


def test_tau_ap_with_ties_in_the_other_ranking_is_its_expectation_over_the_tie_orders():
    rng = np.random.default_rng(11)
    for _ in range(40):
        n = int(rng.integers(3, 8))
        ref = rng.permutation(n).astype(float).tolist()
        other = rng.integers(0, 3, n).astype(float).tolist()
        # every order of the systems the other ranking ties, equally likely
        groups = sorted(set(other), reverse=True)
        orders = [
            [i for i in range(n) if other[i] == g] for g in groups
        ]  # each tie group, best group first
        expected = []
        for perms in itertools.product(*(itertools.permutations(g) for g in orders)):
            expected.append(yilmaz(ref, [i for group in perms for i in group]))
        got = agreement(ref, other)
        assert got.tau_ap == pytest.approx(sum(expected) / len(expected), abs=1e-12)


def test_tau_ap_is_undefined_when_the_reference_ties_and_tau_ap_b_by_hand():
    # reference a > b > c, other a = b > c.
    # tau_AP,b, positions from the other: c (3rd) has a and b above, both right: 2/2 -> 2/1*1-1
    # = 1; positions from the reference: b (2nd) has a above, tied in the other: 0/1; c (3rd)
    # 2/2 -> 2/2 * 1 - 1 = 0; the mean: 0.5. tau_AP,a: the tie's two orders give 1 and 0.
    got = ranking_agreement({"a": 3.0, "b": 2.0, "c": 1.0}, {"a": 2.0, "b": 2.0, "c": 1.0})
    assert got.tau_ap_b == pytest.approx(0.5)
    assert got.tau_ap == pytest.approx(0.5)
    swapped = ranking_agreement({"a": 2.0, "b": 2.0, "c": 1.0}, {"a": 3.0, "b": 2.0, "c": 1.0})
    assert swapped.tau_ap is None and swapped.tau_ap_b == pytest.approx(0.5)
    # without ties tau_AP,b is the mean of tau_AP both ways
    rng = np.random.default_rng(5)
    for _ in range(20):
        x, y = rng.random(7).tolist(), rng.random(7).tolist()
        both = (agreement(x, y).tau_ap + agreement(y, x).tau_ap) / 2
        assert agreement(x, y).tau_ap_b == pytest.approx(both, abs=1e-12)


def _rbo_package():
    """The rbo package (Webber et al.'s RBO as its authors' users run it). It pins numpy<2, so
    it is not in the test extra: .ci/run installs it with --no-deps, and with CI=true a missing
    one fails the test instead of skipping it."""
    try:
        import rbo
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but the rbo package is missing: .ci/run installs it (--no-deps)")
        pytest.skip("the rbo package is not installed: pip install --no-deps rbo==0.1.3")
    return rbo


def test_rbo_matches_the_rbo_package_and_its_definition():
    rbo = _rbo_package()
    rng = np.random.default_rng(2)
    for _ in range(50):
        n = int(rng.integers(2, 30))
        p = float(rng.uniform(0.5, 0.98))
        x, y = rng.random(n), rng.random(n)
        names = [f"s{i}" for i in range(n)]
        got = ranking_agreement(scores(names, x.tolist()), scores(names, y.tolist()), p=p)
        first = [names[i] for i in np.argsort(-x)]
        second = [names[i] for i in np.argsort(-y)]
        assert got.rbo == pytest.approx(
            rbo.RankingSimilarity(first, second).rbo_ext(p=p), abs=1e-12
        )
        # Webber et al.'s infinite sum, the two rankings agreeing on every depth past n
        total = sum(
            (1 - p) * p ** (d - 1) * len(set(first[:d]) & set(second[:d])) / d
            for d in range(1, n + 1)
        )
        assert got.rbo == pytest.approx(total + p**n, abs=1e-12)
        assert got.rbo_p == p


def test_rbo_by_hand():
    # a b c d against b a d c at p 0.9: agreement 0, 1, 2/3, 1 at depths 1-4;
    # 0.1 * (0 + 0.9 + 0.81 * 2/3 + 0.729) + 0.9**4 = 0.873
    got = ranking_agreement({"a": 4, "b": 3, "c": 2, "d": 1}, {"a": 3, "b": 4, "c": 1, "d": 2})
    assert got.rbo == pytest.approx(0.873, abs=1e-12)


def test_largest_swap_and_which_systems_swap():
    got = ranking_agreement(
        {"a": 0.50, "b": 0.40, "c": 0.30, "d": 0.10}, {"a": 0.30, "b": 0.45, "c": 0.20, "d": 0.25}
    )
    # swapped pairs: (a, b), 0.10 apart in the reference, and (c, d), 0.20 apart
    assert got.swap == pytest.approx(0.2)
    assert got.swapped == ("c", "d")
    same = ranking_agreement({"a": 2.0, "b": 1.0}, {"a": 5.0, "b": 4.0})
    assert same.swap == 0.0 and same.swapped is None and same.tau_b == 1.0


def test_constant_rankings_and_bad_inputs():
    flat = ranking_agreement({"a": 1.0, "b": 1.0, "c": 1.0}, {"a": 0.3, "b": 0.2, "c": 0.1})
    assert flat.tau is None and flat.tau_b is None and flat.pearson is None
    assert flat.spearman is None and flat.tau_ap is None
    with pytest.raises(CmrkitError, match="different systems"):
        ranking_agreement({"a": 1.0, "b": 2.0}, {"a": 1.0, "c": 2.0})
    with pytest.raises(CmrkitError, match="at least two systems"):
        ranking_agreement({"a": 1.0}, {"a": 1.0})
    with pytest.raises(CmrkitError, match="persistence"):
        ranking_agreement({"a": 1.0, "b": 0.0}, {"a": 1.0, "b": 0.0}, p=1.0)


def test_resamples_are_seeded_and_draw_every_query_count_once():
    a = np.concatenate(list(resample_counts(50, 2500, seed=4)))
    b = np.concatenate(list(resample_counts(50, 2500, seed=4)))
    assert a.shape == (2500, 50) and np.array_equal(a, b)
    assert (a.sum(axis=1) == 50).all()
    assert not np.array_equal(a, np.concatenate(list(resample_counts(50, 2500, seed=5))))
    # each query is drawn 1 time per resample on average
    assert a.mean() == pytest.approx(1.0, abs=0.01)


def test_intervals_are_the_statistics_of_each_resample():
    rng = np.random.default_rng(9)
    ref = rng.random((6, 40))
    other = ref + rng.normal(0, 0.15, ref.shape)
    got = agreement_intervals(ref, other, samples=300, ci=0.9, seed=1, p=0.8)
    assert got == agreement_intervals(ref, other, samples=300, ci=0.9, seed=1, p=0.8)
    names = [f"s{i}" for i in range(6)]
    per_sample: dict[str, list[float]] = {}
    for counts in resample_counts(40, 300, seed=1):
        for row in counts:
            one = ranking_agreement(
                scores(names, (ref @ row / 40).tolist()),
                scores(names, (other @ row / 40).tolist()),
                p=0.8,
            ).to_json()
            for name, value in one.items():
                if isinstance(value, float):
                    per_sample.setdefault(name, []).append(value)
    for name, (lo, hi) in ((k, v) for k, v in got.items() if v is not None):
        want = percentile_interval(np.array(per_sample[name]), 0.9)
        assert (lo, hi) == pytest.approx(want, abs=1e-12)
    point = ranking_agreement(
        scores(names, ref.mean(axis=1).tolist()), scores(names, other.mean(axis=1).tolist())
    )
    assert got["tau_b"][0] <= point.tau_b <= got["tau_b"][1]
