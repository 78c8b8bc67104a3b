"""The `cmrkit` command line: assembles the command groups; each lives in cmrkit/commands/."""

from __future__ import annotations

import importlib

import typer

from cmrkit._version import __version__
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
    "agree",
    "repro",
    "cluster",
    "eval-coref",
    "coref-table",
    "eval-spans",
    "pool",
    "judgments",
    "assess",
    "status",
    "export",
    "tac",
)

# the modules of cmrkit/commands/ that register commands, in registration order
MODULES = (
    "build",
    "retrieval",
    "dense",
    "reader",
    "tac",
    "pooling",
    "judgments",
    "judge",
    "judge_check",
    "assess",
    "evaluate",
    "agree",
    "repro",
    "coref",
    "coref_train",
    "export",
    "status",
)
# commands whose module alone registers them: running one loads that module only (the eval
# command starts about 0.08 s sooner than with every command's module and Typer definition)
ALONE = {"eval": "evaluate", "compare": "evaluate", "status": "status"}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"cmrkit {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """cmrkit: coreference-search test collections, from annotations to trec_eval-exact scores."""


def make_app(modules: tuple[str, ...] = MODULES) -> typer.Typer:
    """The `cmrkit` command line with the commands of ``modules`` (all by default)."""
    app = group(
        order=PIPELINE,
        name="cmrkit",
        help="Build, run, pool and score coreference-search test collections.",
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_root)
    for name in modules:
        importlib.import_module(f"cmrkit.commands.{name}").register(app)
    if modules == MODULES:
        from cmrkit.commands import runs

        app.add_typer(runs.run_app, name="run")  # the groups the commands added themselves to
        app.add_typer(runs.train_app, name="train")
    return app


def __getattr__(name: str):
    if name == "app":  # the whole command line, made on first use
        made = globals()["app"] = make_app()
        return made
    raise AttributeError(f"module 'cmrkit.cli' has no attribute {name!r}")


def _app_for(args: list[str]) -> typer.Typer:
    """The command line that ``args`` needs: one command's module when it registers that command
    alone, else every command."""
    owner = ALONE.get(args[0]) if args else None
    return make_app((owner,)) if owner is not None else make_app()


def main() -> None:
    """Run the command line (see :func:`cmrkit.console.run` for signals and exit codes)."""
    from cmrkit.console import run

    run(_command_line)


def _command_line() -> None:
    """The command line, a usage error (unknown option, missing argument, bad value) told in
    one line, as every other error is."""
    import sys

    try:
        from typer._click.exceptions import ClickException, UsageError
    except ImportError:  # a Typer that uses Click itself
        from click.exceptions import ClickException, UsageError

    try:
        code = _app_for(sys.argv[1:])(standalone_mode=False, prog_name="cmrkit")
    except UsageError as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # `cmrkit` or a group alone: its help
            print(e.format_message(), file=sys.stderr)
            raise SystemExit(2) from None
        where = e.ctx.command_path if e.ctx is not None else "cmrkit"
        # a value outside an option's choices: Typer words it "Value error, 'x' is not one of"
        text = e.format_message().replace("\n", " ").replace("Value error, ", "").rstrip(".")
        print(f"error: {text}; see `{where} --help`", file=sys.stderr)
        raise SystemExit(e.exit_code) from None
    except ClickException as e:
        print(f"error: {e.format_message()}", file=sys.stderr)
        raise SystemExit(e.exit_code) from None
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        raise SystemExit(1) from None
    raise SystemExit(code if type(code) is int else 0)  # an Exit code, not a value returned
