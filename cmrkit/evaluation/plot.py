"""A comparison's plots (matplotlib, imported when drawn): the per-query differences against
the baseline, and each system's mean with its interval."""

from __future__ import annotations

import os
import textwrap

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures import Measure
from cmrkit.evaluation.report import fixed, p_text
from cmrkit.evaluation.significance import CORRECTION_NAMES, TEST_NAMES, Comparison

# Okabe-Ito colours, told apart with any common colour-vision deficiency
IMPROVED = "#0072B2"  # blue
HURT = "#E69F00"  # orange
TIED = "#999999"  # grey


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
    test = TEST_NAMES[comp.test]
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
                f"{name} - {comp.baseline}: {measure.name} {fixed(c.delta, signed=True)} "
                f"(+{c.improved} / -{c.hurt} of {c.queries}); {test}, "
                f"{correction} {p_text(c.p_adjusted)}"
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


def plot_means(comp: Comparison, path: str | os.PathLike, fmt: str | None = None) -> None:
    """Write :func:`means_figure` as PNG (300 dpi), PDF or SVG (``fmt``, default: from the
    file's extension)."""
    from cmrkit.figures import save_figure

    save_figure(means_figure(comp), path, fmt)


def means_figure(comp: Comparison):
    """Each system's mean with its bootstrap interval, one panel per measure, the systems in
    the order given (the baseline's mean a dashed line); a filled circle differs significantly
    from the baseline, a hollow one not; the baseline is a square. Returns the Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cmrkit.figures import PALETTE

    if not comp.intervals:
        raise CmrkitError("the means plot shows bootstrap intervals: give --bootstrap 1 or more")
    systems = comp.systems
    count = len(comp.measures)
    fig, axes = plt.subplots(
        1, count, figsize=(max(3.2 * count + 1.2, 5.5), 0.45 * len(systems) + 1.3), squeeze=False,
        sharey=True,
    )  # fmt: skip
    rows = list(range(len(systems)))[::-1]  # the first system on top
    for ax, m in zip(axes[0], comp.measures, strict=True):
        ax.axvline(comp.mean(comp.baseline, m), color="#999999", linestyle="--", linewidth=0.8)
        for row, name in zip(rows, systems, strict=True):
            mean = comp.mean(name, m)
            low, high = comp.intervals[name][m.name] or (mean, mean)
            cell = comp.stats.get(name, {}).get(m.name)
            colour = PALETTE[0] if cell is None else PALETTE[1]
            filled = cell is None or cell.significant
            ax.errorbar(
                [mean], [row], xerr=[[max(mean - low, 0.0)], [max(high - mean, 0.0)]],
                fmt="s" if cell is None else "o", color=colour,
                markerfacecolor=colour if filled else "white", capsize=3, linewidth=1.2,
            )  # fmt: skip
        ax.set_title(_plain(m.name), fontsize=10)
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
    axes[0, 0].set_yticks(rows)
    axes[0, 0].set_yticklabels([_plain(n) for n in systems], fontsize=9)
    axes[0, 0].set_ylim(-0.6, len(systems) - 0.4)
    title = (
        f"means with {comp.ci:.0%} bootstrap intervals ({comp.bootstrap:,} resamples of "
        f"{len(comp.queries)} queries); filled: {TEST_NAMES[comp.test]} vs {comp.baseline} "
        f"(square, dashed), {CORRECTION_NAMES[comp.correction]} correction, p < {comp.alpha}"
    )
    lines = textwrap.wrap(_plain(title), width=int(fig.get_figwidth() * 15))
    fig.suptitle("\n".join(lines), fontsize=8)
    fig.tight_layout()  # makes room for the title too
    return fig


def plot_scatter(
    comp: Comparison, measure: Measure, path: str | os.PathLike, fmt: str | None = None
) -> None:
    """Write :func:`scatter_figure` as PNG (300 dpi), PDF or SVG (``fmt``, default: from the
    file's extension)."""
    from cmrkit.figures import save_figure

    save_figure(scatter_figure(comp, measure), path, fmt)


def scatter_figure(comp: Comparison, measure: Measure):
    """Per query, each system's value of one measure (y) against the baseline's (x) on the
    compared queries, one square panel per system on the same axes: above the diagonal the
    system does better (blue), below worse (orange), on it they tie (grey); a point drawn
    darker stands for several queries. Each title names the delta, the queries improved and
    hurt, the test, the correction and the p-value. Returns the matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [n for n in comp.systems if n != comp.baseline]
    base = comp.results[comp.baseline].values(measure, comp.queries)
    values = {n: comp.results[n].values(measure, comp.queries) for n in others}
    every = [*base, *(v for vs in values.values() for v in vs)]
    low, high = min(every, default=0.0), max(every, default=1.0)
    if 0.0 <= low and high <= 1.0:
        low, high = 0.0, 1.0  # the usual measures: their whole range
    pad = (high - low) * 0.03 or 0.5
    size = 4.2
    fig, axes = plt.subplots(
        1, len(others), figsize=(size * len(others), size + 0.9), squeeze=False
    )
    test = TEST_NAMES[comp.test]
    correction = "uncorrected" if comp.correction == "none" else f"{comp.correction}-corrected"
    for ax, name in zip(axes[0], others, strict=True):
        ys = values[name]
        colors = [
            IMPROVED if y > x else HURT if y < x else TIED for x, y in zip(base, ys, strict=True)
        ]
        ax.plot([low - pad, high + pad], [low - pad, high + pad], color="black", linewidth=0.8)
        ax.scatter(base, ys, s=14, c=colors, alpha=0.55, linewidths=0)
        ax.set_xlim(low - pad, high + pad)
        ax.set_ylim(low - pad, high + pad)
        ax.set_aspect("equal")
        ax.set_xlabel(_plain(f"{comp.baseline} (baseline) {measure.name}"), fontsize=9)
        ax.set_ylabel(_plain(f"{name} {measure.name}"), fontsize=9)
        c = comp.stats[name][measure.name]
        lines = [
            f"{name} vs {comp.baseline}: {fixed(c.delta, signed=True)} "
            f"(+{c.improved} / -{c.hurt} of {c.queries})",
            f"{test}, {correction} {p_text(c.p_adjusted)}",
        ]
        ax.set_title("\n".join(_plain(line) for line in lines), fontsize=8)
    from matplotlib.patches import Patch

    fig.suptitle(
        _plain(f"{measure.name} per query: {len(comp.queries)} queries, a point each"),
        fontsize=9,
    )
    fig.legend(
        handles=[Patch(color=c, label=t) for c, t in
                 ((IMPROVED, "improved"), (HURT, "hurt"), (TIED, "tied"))],
        loc="upper right", ncol=3, fontsize=8, frameon=False,
    )  # fmt: skip
    fig.tight_layout()
    return fig
