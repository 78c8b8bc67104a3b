"""What the scoring commands (`eval`, `compare`, `eval-coref`, `eval-spans`) share: the formats,
loader warnings as lines, the coverage line under a table, raw output, and the check that their
file arguments come in the order the usage gives."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import typer

from cmrkit.commands.choices import choices
from cmrkit.console import console, out
from cmrkit.errors import CmrkitError

T = TypeVar("T")


Format = choices("Format", ("table", "json", "csv", "trec"))


FORMAT = typer.Option(Format.table, "--format", "-f", help="Output format.")
DEDUPE = typer.Option(
    False,
    "--dedupe",
    help="Keep the best score of a document retrieved twice for a query instead of refusing "
    "the run.",
)
ALLOW_UNJUDGED = typer.Option(
    False,
    "--allow-unjudged",
    help="Score a run even when none of the documents it retrieved is judged in the qrels "
    "(another collection's run: every measure 0). Default: refused in one line.",
)


def with_warnings(load: Callable[[], T]) -> T:
    """Run a loader, showing its warnings (identical duplicate qrels lines) as one line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = load()
    for w in caught:
        console.print(f"warning: {w.message}", markup=False)
    return value


def warn_identical(runs) -> None:
    """A warning line for each group of runs given that are one run (the same documents and
    scores for every query): ranked as several systems, they weigh one system twice."""
    from cmrkit.evaluation.identical import identical_runs

    for group in identical_runs(runs):
        console.print(
            f"warning: runs {', '.join(group[:-1])} and {group[-1]} are identical (the same "
            "documents with the same scores for every query): one system counted "
            f"{len(group)} times; give each run once",
            markup=False,
            soft_wrap=True,
        )


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


def first_line(path: Path) -> bytes | None:
    """The first line that is not blank or a ``#`` comment, among the first 1000 (None: none,
    unreadable, or stdin)."""
    if str(path) == "-":
        return None
    try:
        with open(path, "rb") as fh:
            for _, line in zip(range(1000), fh, strict=False):
                fields = line.split()
                if fields and not fields[0].startswith(b"#"):
                    return line
    except OSError:
        return None
    return None


def looks_like(path: Path) -> str | None:
    """ "qrels" (4 or 5 fields), "a run" (6 or more), "JSON lines" or "a CSV" (more
    comma-separated cells than whitespace-separated fields) by the first line."""
    line = first_line(path)
    if line is None:
        return None
    if line.lstrip()[:1] == b"{":
        return "JSON lines"
    fields = len(line.split())
    if len(line.split(b",")) > fields:
        return "a CSV"
    return "qrels" if fields in (4, 5) else "a run" if fields >= 6 else None


def check_order(named: Sequence[tuple[Path, str | tuple[str, ...]]], usage: str) -> None:
    """Refuse arguments given in another order than ``usage``'s, before any other error:
    ``named`` pairs each file argument with what it should be ("qrels", "a run", "JSON
    lines", "a CSV", or a tuple of those it may be); when one looks like what another should
    be, they are swapped; else one that is not what it should be is named, unless it should be
    a run (whose reader says what is wrong with it)."""
    wants = [(p, (want,) if isinstance(want, str) else tuple(want)) for p, want in named]
    wrong = [(p, want, looks_like(p)) for p, want in wants]
    wrong = [(p, want, got) for p, want, got in wrong if got is not None and got not in want]
    for _, want, got in wrong:
        if any(got in other_want for _, other_want, _ in wrong if other_want != want):
            swapped = ", ".join(f"{p} looks like {g}" for p, _, g in wrong)
            raise CmrkitError(f"{swapped}: the arguments are swapped; {usage}")
    for path, want, got in wrong:
        if "a run" not in want:
            raise CmrkitError(f"{path} looks like {got}, not {' or '.join(want)}; {usage}")
