"""`cmrkit export beir`: a built collection in another tool's layout."""

from __future__ import annotations

from pathlib import Path

import typer

from cmrkit.commands.group import group
from cmrkit.console import out, user_errors

export_app = group(
    help="Write a collection in another tool's layout (BEIR). For ir_datasets, see "
    "cmrkit.exports.ir_datasets.register in Python."
)


def register(app: typer.Typer) -> None:
    """Add the `export` group."""
    app.add_typer(export_app, name="export")


@export_app.command("beir")
@user_errors
def beir_command(
    collection: Path = typer.Argument(..., help="The collection folder (collections/NAME)."),
    output: Path = typer.Option(..., "--output", "-o", help="The BEIR folder to write."),
    split: list[str] = typer.Option(
        None, "--split", help="Split to export (repeatable; default: every split)."
    ),
    qrels_dir: Path = typer.Option(
        None, "--qrels-dir", help="Folder of NAME.SPLIT.txt qrels (default: qrels/)."
    ),
    force: bool = typer.Option(
        False, "--force", help="Overwrite an output folder that holds another export."
    ),
) -> None:
    """Write corpus.jsonl, queries.jsonl and qrels/SPLIT.tsv as BEIR's GenericDataLoader reads them.

    Mention spans go in each line's "metadata"; every qrels grade is kept (0 and -1 too).

    Example: cmrkit export beir collections/sample -o beir/sample
    """
    from cmrkit.exports.beir import export_beir

    report = export_beir(collection, output, splits=split or None, qrels_dir=qrels_dir, force=force)
    if report.up_to_date:
        out.print(f"{report.out_dir}/ is up to date; --force rewrites it", markup=False)
        return
    qrels = ", ".join(f"qrels/{s}.tsv {n:,}" for s, n in report.qrels.items())
    out.print(
        f"wrote {report.out_dir}/: corpus.jsonl {report.corpus:,} units, "
        f"queries.jsonl {report.queries:,} queries, {qrels} judgments"
    )
