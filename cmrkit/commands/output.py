"""What the scoring commands (`eval`, `compare`, `eval-coref`, `eval-spans`) share in their
output: the formats, loader warnings as lines, the coverage line under a table, raw output."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TypeVar

import typer

from cmrkit.commands.choices import choices
from cmrkit.console import console, out

T = TypeVar("T")


Format = choices("Format", ("table", "json", "csv", "trec"))


FORMAT = typer.Option(Format.table, "--format", "-f", help="Output format.")


def with_warnings(load: Callable[[], T]) -> T:
    """Run a loader, showing its warnings (identical duplicate qrels lines) as one line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = load()
    for w in caught:
        console.print(f"warning: {w.message}", markup=False)
    return value


def coverage(result, label: str = "") -> str:
    """The line under a score table: how many queries were averaged, and which were left out."""
    parts = [f"{label}averaged over {result.queries} queries"]
    if result.missing_from_run:
        how = "scored 0 (--all-queries)" if result.all_queries else "not counted"
        parts.append(f"{len(result.missing_from_run)} qrels queries missing from the run ({how})")
    if result.missing_from_qrels:
        parts.append(
            f"{len(result.missing_from_qrels)} run queries missing from the qrels (ignored)"
        )
    if result.depth is not None:
        parts.append(f"top {result.depth} documents per query")
    return "; ".join(parts)


def emit(text: str) -> None:
    """Machine-readable output (JSON, CSV, trec_eval text) to stdout as it is."""
    out.file.write(text)
    out.file.flush()
