"""The `cmrkit` command line: assembles the command groups; each lives in cmrkit/commands/."""

from __future__ import annotations

import typer

from cmrkit._version import __version__
from cmrkit.commands import (
    assess,
    build,
    coref,
    dense,
    evaluate,
    export,
    pooling,
    reader,
    retrieval,
    runs,
    status,
    tac,
)
from cmrkit.commands.group import group

# the commands in the order a user meets them, as `cmrkit --help` lists them
PIPELINE = (
    "sample-data",
    "build-collection",
    "index",
    "encode",
    "run",
    "train",
    "eval",
    "compare",
    "cluster",
    "eval-coref",
    "eval-spans",
    "pool",
    "judgments",
    "assess",
    "status",
    "export",
    "tac",
)

app = group(
    order=PIPELINE,
    name="cmrkit",
    help="Build, run, pool and score coreference-search test collections.",
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cmrkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """cmrkit: coreference-search test collections, from annotations to trec_eval-exact scores."""


for _module in (
    build,
    retrieval,
    dense,
    reader,
    tac,
    pooling,
    assess,
    evaluate,
    coref,
    export,
    status,
):
    _module.register(app)
app.add_typer(runs.run_app, name="run")  # the groups the commands added themselves to
app.add_typer(runs.train_app, name="train")


def main() -> None:
    """Run the command line (see :func:`cmrkit.console.run` for signals and exit codes)."""
    from cmrkit.console import run

    run(app)
