"""A judge's scores made probabilities of relevance, and probabilities made Likert labels.

The reader judge's selection scores are logits of no fixed scale: Platt scaling fits
P(relevant | s) = 1 / (1 + exp(-(a*s + b))) on judged pairs (the collection's qrels of another
split, or people's labels). Platt, not isotonic regression: the judged pairs are few (hundreds),
two parameters do not overfit them where a step function would; the map is strictly monotone,
so the judge's ranking of pairs is kept and no two scores collapse onto one probability (the
hybrid judging ranks pairs by how sure the judge is); and it stays finite on a judge that
separates the pairs perfectly, thanks to Platt's target smoothing (targets (N+ + 1)/(N+ + 2) and
1/(N- + 2) instead of 1 and 0). The fit is Newton's method in float64: the same pairs give the
same parameters.

Likert labels from probabilities (:data:`BINS`): 1 below 0.1, 2 below 0.3, 3 below 0.5, 4 below
0.8, 5 from 0.8; so a label is relevant (4-5) exactly when the probability, as written with 6
decimals, is at least 0.5.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cmrkit.errors import CmrkitError

# upper bounds (exclusive) of labels 1..4; label 5 from the last bound up
BINS: tuple[float, ...] = (0.1, 0.3, 0.5, 0.8)
METHOD = "platt"


def likert(probability: float) -> int:
    """The Likert label of a probability of relevance, read as written (6 decimals)."""
    p = round(probability, 6)
    for label, bound in enumerate(BINS, 1):
        if p < bound:
            return label
    return len(BINS) + 1


@dataclass(frozen=True)
class Calibration:
    """A fitted Platt map and what it was fitted on."""

    a: float
    b: float
    pairs: int
    relevant: int
    fitted_on: dict[str, Any]

    def probability(self, score: float) -> float:
        """P(relevant) of a score (0 for a score of -inf: an empty unit)."""
        if math.isinf(score):
            return 0.0 if score < 0 else 1.0
        z = self.a * score + self.b
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)

    def to_json(self) -> dict[str, Any]:
        return {
            "method": METHOD,
            "a": self.a,
            "b": self.b,
            "pairs": self.pairs,
            "relevant": self.relevant,
            "fitted_on": self.fitted_on,
            "likert_bins": list(BINS),
        }


def _sigmoid(z: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(z))  # never overflows
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def fit_platt(
    scores: Sequence[float], relevant: Sequence[int], fitted_on: dict[str, Any]
) -> Calibration:
    """Platt scaling of ``scores`` against binary ``relevant`` (1/0); pairs whose score is not
    finite are left out. Needs both classes."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(relevant, dtype=np.float64)
    keep = np.isfinite(s)
    s, y = s[keep], y[keep]
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        what = "relevant" if n_pos == 0 else "non-relevant"
        raise CmrkitError(
            f"the calibration pairs hold no {what} pair ({len(y)} pairs); calibrate on judged "
            "pairs of both kinds (--calibrate-on a split with its qrels and candidates, or "
            "people's labels)"
        )
    t = np.where(y > 0, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    a, b = 0.0, math.log((n_pos + 1.0) / (n_neg + 1.0))  # Platt's start: the prior odds
    scale = max(float(np.std(s)), 1e-12)
    x = s / scale  # fit on standardised scores: better conditioned Newton steps
    for _ in range(100):
        p = _sigmoid(a * x + b)
        g = np.array([np.sum((p - t) * x), np.sum(p - t)])
        w = np.maximum(p * (1.0 - p), 1e-12)
        h = np.array([[np.sum(w * x * x), np.sum(w * x)], [np.sum(w * x), np.sum(w)]])
        h += np.eye(2) * 1e-12
        step = np.linalg.solve(h, g)
        a, b = a - float(step[0]), b - float(step[1])
        if float(np.max(np.abs(step))) < 1e-12:
            break
    return Calibration(a / scale, b, len(y), n_pos, fitted_on)
