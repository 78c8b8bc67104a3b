"""`cmrkit export beir` and `cmrkit export ir-metadata`: a built collection in another tool's
layout, a run with its ir_metadata block."""

from __future__ import annotations

from pathlib import Path

import typer

from cmrkit.commands.group import group
from cmrkit.console import out, user_errors

export_app = group(
    help="Write a collection in another tool's layout (BEIR), or a run with its ir_metadata "
    "block. For ir_datasets, see cmrkit.exports.ir_datasets.register in Python."
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


@export_app.command("ir-metadata")
@user_errors
def ir_metadata_command(
    run: Path = typer.Argument(..., help="A run cmrkit made (its sidecar RUN.json beside it)."),
    output: Path = typer.Option(
        ..., "--output", "-o", help="The run file to write, with its ir_metadata block."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an output file that differs."),
) -> None:
    """Write the run with its ir_metadata block (PRIMAD, https://www.ir-metadata.org) on top.

    The block is built from the run's sidecar: Platform (the software versions), Implementation
    (the exact command), Method (system, parameters, tie-breaking, index), Data (collection,
    split, qrels, hashes). trec_eval 10.0, eval and compare skip it; trec_eval 9.0.8 cannot read
    such a run.

    Example: cmrkit export ir-metadata runs/sample/bm25.test.trec
    -o runs/sample/bm25-ir_metadata.test.trec
    """
    from cmrkit.collection.layout import qrels_path
    from cmrkit.errors import CmrkitError
    from cmrkit.exports import ir_metadata
    from cmrkit.fileio import RepeatableOutputs, iter_lines
    from cmrkit.retrieval.runfile import read_sidecar, sidecar_of

    if not run.is_file():
        from cmrkit.fileio import missing_file

        raise missing_file(run)
    sidecar = read_sidecar(run)
    if sidecar is None:
        raise CmrkitError(
            f"no cmrkit sidecar ({sidecar_of(run).name}) beside the run: the block is built "
            "from it; export a run cmrkit made",
            path=run,
        )
    if output.resolve() == run.resolve():
        raise CmrkitError("-o is the run itself: write the annotated run to another file")
    if sidecar_of(output).is_file():
        raise CmrkitError(
            f"{output} is a run cmrkit wrote ({sidecar_of(output).name} beside it): write the "
            "annotated run elsewhere"
        )
    collection, split = sidecar.get("collection"), sidecar.get("split")
    qrels = str(qrels_path(collection, split)) if collection and split else None
    block = ir_metadata.block(ir_metadata.metadata(sidecar, qrels=qrels))
    with RepeatableOutputs([output], force=force) as staged:
        with open(staged.path(output), "w", encoding="utf-8", newline="\n") as f:
            f.write(block)
            for line in ir_metadata.without_block(iter_lines(run), run):
                f.write(f"{line}\n")
    lines = block.count("\n")
    if staged.up_to_date:
        out.print(f"{output} is up to date; --force rewrites it", markup=False)
    else:
        out.print(f"wrote {output} (the run under {lines} lines of ir_metadata)", markup=False)
