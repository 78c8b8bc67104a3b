"""How well a judge's probabilities of relevance are calibrated against people's (or the
qrels') labels: the reliability diagram of ``judgments check --plot``.

The pairs with a probability and a binary reference fall into ``bins`` equal-width bins of the
probability ([0, 0.1), [0.1, 0.2), ..., [0.9, 1.0] for 10); per bin: the pairs, their mean
probability (the judge's confidence) and the share the reference calls relevant (what
happened), with a Wilson 95% interval. A calibrated judge's points lie on the diagonal. The
expected calibration error (ECE) is the pair-weighted mean of |share - mean probability| over
the bins (Naeini et al., 2015; Guo et al., 2017), the Brier score the mean squared distance of
the probability to the reference. The figure is written by :mod:`cmrkit.figures` (PNG 300 dpi,
PDF or SVG by the extension, the same bytes for the same figure, the Okabe-Ito palette);
matplotlib is imported only then.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.judgments.auto.labels import Label

BINS = 10
Z95 = 1.959963984540054


@dataclass
class Reliability:
    """The bins of a reliability diagram and the summary figures."""

    bins: list[dict[str, Any]]  # lo, hi, pairs, mean_probability, relevant_share, low, high
    pairs: int
    ece: float
    brier: float

    def to_json(self) -> dict[str, Any]:
        return {"pairs": self.pairs, "ece": self.ece, "brier": self.brier, "bins": self.bins}


def _wilson(hits: int, n: int) -> tuple[float, float]:
    """Wilson score interval (95%) of a share ``hits / n``."""
    p = hits / n
    centre = (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)) / (1 + Z95**2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def reliability(
    labels: Sequence[Label], truth: Mapping[tuple[str, str], int], bins: int = BINS
) -> Reliability:
    """The reliability diagram's bins of the labels' probabilities against ``truth`` (pair ->
    1/0, the pairs with a binary reference); pairs without a probability or a reference are
    left out. Refused when no pair has both."""
    pairs = [
        (lb.probability, truth[lb.key])
        for lb in labels
        if lb.probability is not None and lb.key in truth
    ]
    if not pairs:
        raise CmrkitError(
            "--plot: no labelled pair has both a probability and a reference label; a "
            "reliability diagram needs the judge's probabilities (labels of `judgments auto`)"
        )
    grouped: list[list[tuple[float, int]]] = [[] for _ in range(bins)]
    for prob, rel in pairs:
        grouped[min(int(prob * bins), bins - 1)].append((prob, rel))
    rows = []
    ece = 0.0
    for i, members in enumerate(grouped):
        row: dict[str, Any] = {"lo": i / bins, "hi": (i + 1) / bins, "pairs": len(members)}
        if members:
            mean = sum(p for p, _ in members) / len(members)
            hits = sum(r for _, r in members)
            share = hits / len(members)
            low, high = _wilson(hits, len(members))
            row.update(mean_probability=mean, relevant_share=share, low=low, high=high)
            ece += len(members) / len(pairs) * abs(share - mean)
        else:
            row.update(mean_probability=None, relevant_share=None, low=None, high=None)
        rows.append(row)
    brier = sum((p - r) ** 2 for p, r in pairs) / len(pairs)
    return Reliability(rows, len(pairs), ece, brier)


def plot_reliability(rel: Reliability, path: str | os.PathLike, title: str) -> None:
    """Write the reliability diagram (above: relevant share against mean probability per bin,
    with intervals and the diagonal; below: the pairs per bin) to ``path``, its format by the
    extension."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cmrkit.figures import MARKERS, PALETTE, save_figure

    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(5.6, 6.0), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    top.plot([0, 1], [0, 1], linestyle=":", color=PALETTE[6], lw=1, label="calibrated")
    filled = [b for b in rel.bins if b["pairs"]]
    x = [b["mean_probability"] for b in filled]
    y = [b["relevant_share"] for b in filled]
    err = [[b["relevant_share"] - b["low"] for b in filled], [b["high"] - b["relevant_share"]
                                                              for b in filled]]  # fmt: skip
    top.errorbar(
        x, y, yerr=err, color=PALETTE[0], marker=MARKERS[0], linestyle="-", lw=1.4, capsize=3,
        label=f"the judge, at each bin's mean (ECE {rel.ece:.3f}, Brier {rel.brier:.3f})",
    )  # fmt: skip
    top.set_xlim(0, 1)
    top.set_ylim(-0.02, 1.02)
    top.set_ylabel("share relevant by the reference")
    top.grid(alpha=0.3)
    top.legend(loc="upper left", fontsize=8)
    width = 1 / len(rel.bins)
    bottom.bar(
        [b["lo"] for b in rel.bins],
        [b["pairs"] for b in rel.bins],
        width=width,
        align="edge",
        color=PALETTE[1],
        edgecolor=PALETTE[6],
        linewidth=0.5,
    )
    bottom.set_xlabel(f"the judge's probability of relevance (bins of {width:g})")
    bottom.set_ylabel("pairs")
    bottom.set_xticks([i / 10 for i in range(11)])
    bottom.grid(alpha=0.3, axis="y")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
