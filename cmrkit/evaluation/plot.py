"""The per-query difference plot of a comparison (matplotlib, imported when drawn)."""

from __future__ import annotations

import os

from cmrkit.evaluation.measures import Measure
from cmrkit.evaluation.report import format_p
from cmrkit.evaluation.significance import Comparison


def _plain(text: str) -> str:
    """Text shown as written: a run name holding '$' would otherwise start matplotlib math."""
    return text.replace("$", r"\$")


def plot_differences(comp: Comparison, measure: Measure, path: str | os.PathLike) -> None:
    """Per-query differences (system - baseline) of one measure, sorted, one panel per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [n for n in comp.systems if n != comp.baseline]
    fig, axes = plt.subplots(len(others), 1, figsize=(8, 2.6 * len(others)), squeeze=False)
    base = comp.results[comp.baseline]
    for ax, name in zip(axes[:, 0], others, strict=True):
        r = comp.results[name]
        paired = [q for q in base.per_query if q in r.per_query]
        diffs = sorted(
            x - y
            for x, y in zip(r.values(measure, paired), base.values(measure, paired), strict=True)
        )
        colors = ["tab:green" if d > 0 else "tab:red" if d < 0 else "tab:gray" for d in diffs]
        ax.bar(range(len(diffs)), diffs, width=1.0, color=colors)
        ax.axhline(0, color="black", linewidth=0.8)
        c = comp.stats[name][measure.name]
        ax.set_title(
            _plain(
                f"{name} - {comp.baseline}: {measure.name} "
                f"(+{c.improved} / -{c.hurt}, p={format_p(c.p_adjusted)})"
            ),
            fontsize=10,
        )
        ax.set_ylabel(_plain(f"delta {measure.name}"))
        ax.set_xlim(-0.5, max(len(diffs), 1) - 0.5)
        ax.set_xticks([])
    axes[-1, 0].set_xlabel("queries, sorted by difference")
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
