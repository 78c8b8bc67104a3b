"""The per-query difference plot of a comparison (matplotlib, imported when drawn)."""

from __future__ import annotations

import os

from cmrkit.evaluation.measures import Measure
from cmrkit.evaluation.report import format_p
from cmrkit.evaluation.significance import Comparison

# Okabe-Ito colours, told apart with any common colour-vision deficiency
IMPROVED = "#0072B2"  # blue
HURT = "#E69F00"  # orange
TIED = "#999999"  # grey
TESTS = {"t": "paired t-test", "permutation": "paired permutation test"}


def _plain(text: str) -> str:
    """Text shown as written: a run name holding '$' would otherwise start matplotlib math."""
    return text.replace("$", r"\$")


def plot_differences(
    comp: Comparison, measure: Measure, path: str | os.PathLike, fmt: str | None = None
) -> None:
    """Write :func:`difference_figure` as PNG (300 dpi), PDF or SVG (``fmt``, default: from
    the file's extension)."""
    from cmrkit.figures import save_figure

    save_figure(difference_figure(comp, measure), path, fmt)


def difference_figure(comp: Comparison, measure: Measure):
    """Per-query differences (system - baseline) of one measure over the compared queries,
    sorted, one panel per system, all panels on one y-axis; each title names the test, the
    correction and the p-value. Returns the matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    others = [n for n in comp.systems if n != comp.baseline]
    fig, axes = plt.subplots(
        len(others), 1, figsize=(8, 2.6 * len(others) + 0.6), squeeze=False, sharey=True
    )
    base = comp.results[comp.baseline]
    test = TESTS.get(comp.test, comp.test)
    correction = "uncorrected" if comp.correction == "none" else f"{comp.correction}-corrected"
    for ax, name in zip(axes[:, 0], others, strict=True):
        r = comp.results[name]
        diffs = sorted(
            x - y
            for x, y in zip(
                r.values(measure, comp.queries), base.values(measure, comp.queries), strict=True
            )
        )
        colors = [IMPROVED if d > 0 else HURT if d < 0 else TIED for d in diffs]
        ax.bar(range(len(diffs)), diffs, width=1.0, color=colors)
        ax.axhline(0, color="black", linewidth=0.8)
        c = comp.stats[name][measure.name]
        ax.set_title(
            _plain(
                f"{name} - {comp.baseline}: {measure.name} {c.delta:+.4f} "
                f"(+{c.improved} / -{c.hurt} of {c.queries}); {test}, "
                f"{correction} p={format_p(c.p_adjusted)}"
            ),
            fontsize=9,
        )
        ax.set_ylabel(_plain(f"delta {measure.name}"))
        ax.set_xlim(-0.5, max(len(diffs), 1) - 0.5)
        ax.set_xticks([])
    axes[-1, 0].set_xlabel(f"the {len(comp.queries)} compared queries, sorted by difference")
    fig.legend(
        handles=[
            Patch(color=IMPROVED, label="improved"),
            Patch(color=HURT, label="hurt"),
            Patch(color=TIED, label="tied"),
        ],
        loc="upper right",
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))
    return fig
