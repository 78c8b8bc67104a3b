"""Resampling queries: the seeded bootstrap that every interval over queries draws from
(``compare``'s effect sizes and bootstrap test, ``agree``'s intervals), and percentile intervals.

A resample is a vector of how often each query is drawn (the queries drawn with replacement, as
many as there are); a statistic that is a mean over queries is then ``counts @ values / n``, so
thousands of resamples cost a few matrix products.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

BLOCK = 1024


def resample_counts(queries: int, samples: int, seed: int) -> Iterator[np.ndarray]:
    """``samples`` resamples of ``queries`` queries, in blocks of up to 1,024 rows (resamples x
    queries, float64 counts), from ``numpy.random.default_rng(seed)``: the same resamples for
    every caller that gives the same seed and sizes."""
    rng = np.random.default_rng(seed)
    for start in range(0, samples, BLOCK):
        rows = min(samples, start + BLOCK) - start
        draws = rng.integers(0, queries, size=(rows, queries))
        flat = draws + (np.arange(rows) * queries)[:, None]
        counts = np.bincount(flat.ravel(), minlength=rows * queries)
        yield counts.reshape(rows, queries).astype(np.float64)


def percentile_interval(values: np.ndarray, ci: float) -> tuple[float, float] | None:
    """The central ``ci`` percentile interval of ``values`` (NaN left out; None when none is
    left), with numpy's default (linear) quantiles."""
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    if not len(values):
        return None
    lo, hi = np.quantile(values, [(1 - ci) / 2, 1 - (1 - ci) / 2])
    return float(lo), float(hi)
