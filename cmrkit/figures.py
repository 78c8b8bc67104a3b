"""Figures as files for papers: PNG at 300 dpi, PDF or SVG (vector), chosen by the file's
extension; the same figure gives the same bytes (no dates, no tool versions, fixed SVG ids), so
a command run again finds its plot up to date. matplotlib is imported only when one is saved."""

from __future__ import annotations

import os
from pathlib import Path

from cmrkit.errors import CmrkitError

FORMATS = {".png": "png", ".pdf": "pdf", ".svg": "svg"}
DPI = 300  # PNG resolution (print quality); PDF and SVG are vector

# Okabe-Ito: colours told apart with any common colour-vision deficiency (and in grey print
# when paired with the markers and line styles below)
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#F0E442"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1)), (0, (1, 1)), (0, (8, 2))]

_METADATA = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
    "svg": {"Creator": None, "Date": None},
}


def figure_format(path: str | os.PathLike, option: str = "--plot") -> str:
    """The format a plot is written in, from its name; an unknown extension is refused."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise CmrkitError(
            f"{option} writes PNG (300 dpi), PDF or SVG, told by the extension; name it "
            "FILE.png, FILE.pdf or FILE.svg",
            path=path,
        )
    return FORMATS[suffix]


def save_figure(fig, path: str | os.PathLike, fmt: str | None = None) -> None:
    """Write ``fig`` to ``path`` in ``fmt`` (default: from the extension) and close it."""
    import matplotlib
    import matplotlib.pyplot as plt

    fmt = fmt or figure_format(path)
    with matplotlib.rc_context({"svg.hashsalt": "cmrkit", "pdf.fonttype": 42}):
        fig.savefig(path, format=fmt, dpi=DPI, metadata=_METADATA[fmt])
    plt.close(fig)


def plot_training(
    log: dict, path: str | os.PathLike, measures: tuple[str, ...], dev_label: str = "dev"
) -> None:
    """Write :func:`training_figure` as a PNG (300 dpi)."""
    save_figure(training_figure(log, measures, dev_label), path, "png")


def training_figure(log: dict, measures: tuple[str, ...], dev_label: str = "dev"):
    """A training log's loss per step and its dev ``measures`` per epoch (the Figure).

    ``log`` holds ``loss`` ({"step", "loss"} rows) and ``epochs`` ({"epoch", "dev": {...}} rows),
    as `train dense` and `train reader` keep it, and ``title``, what was trained (the model
    folder adds it). Steps and epochs are whole numbers on the axes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    with_dev = [e for e in log["epochs"] if "dev" in e]
    fig, axes = plt.subplots(1, 2 if with_dev else 1, figsize=(10 if with_dev else 5, 3.5))
    axes = np.atleast_1d(axes)
    steps = [x["step"] for x in log["loss"]]
    axes[0].plot(steps, [x["loss"] for x in log["loss"]], lw=1, color=PALETTE[0])
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("training loss")
    if with_dev:
        for i, name in enumerate(measures):
            axes[1].plot(
                [e["epoch"] for e in with_dev],
                [e["dev"][name] for e in with_dev],
                marker=MARKERS[i % len(MARKERS)],
                linestyle=LINESTYLES[i % len(LINESTYLES)],
                color=PALETTE[i % len(PALETTE)],
                label=name,
            )
        axes[1].set_xlabel("epoch")
        axes[1].set_ylabel(dev_label)
        axes[1].legend()
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if log.get("title"):
        fig.suptitle(str(log["title"]), fontsize=10)
    fig.tight_layout()
    return fig
