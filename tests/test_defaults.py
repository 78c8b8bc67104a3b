"""One owner per default (issue 32 item 4): each default is written once, in the module that
owns it, and the command line and the library ask that module for it."""

from __future__ import annotations

import ast
from pathlib import Path

import typer

from cmrkit.cli import app
from cmrkit.retrieval.dense.options import DEFAULT_MODEL
from cmrkit.retrieval.reader.options import RERANK_DEFAULTS, RerankOptions
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

PACKAGE = Path(__file__).resolve().parents[1] / "cmrkit"


def _constants(value: str) -> list[str]:
    """Where the string ``value`` stands whole as a literal in cmrkit's code (docstrings and
    longer texts, such as help that names it, do not count)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value == value:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def _parameters():
    """(command path, click parameter) of every option and argument of every command."""
    root = typer.main.get_command(app)

    def walk(group, ctx, path):
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            sub = cmd.context_class(cmd, info_name=name, parent=ctx)
            if hasattr(cmd, "list_commands"):
                yield from walk(cmd, sub, (*path, name))
            else:
                for param in cmd.params:
                    yield " ".join((*path, name)), param

    yield from walk(root, root.context_class(root, info_name="cmrkit"), ())


def test_the_spacy_model_is_named_once_and_every_default_asks_it():
    assert _constants(DEFAULT_SPACY_MODEL) == ["spacy_model.py:5"]
    defaults = {c: p.default for c, p in _parameters() if p.name == "spacy_model"}
    assert {"build-collection", "index", "run bm25", "train reader"} <= set(defaults)
    assert set(defaults.values()) == {DEFAULT_SPACY_MODEL}, defaults


def test_the_base_encoder_is_named_once_and_every_default_asks_it():
    assert _constants(DEFAULT_MODEL) == ["retrieval/dense/options.py:11"]
    encoders = {"encode", "run dense", "train dense", "train reader"}
    defaults = {c: p.default for c, p in _parameters() if p.name == "model" and c in encoders}
    assert defaults == dict.fromkeys(encoders, DEFAULT_MODEL), defaults


def test_run_rerank_declares_its_options_from_the_library_defaults():
    """Every option of `run rerank` that RerankOptions holds takes its default from
    RERANK_DEFAULTS (not a number written again in commands/reader.py)."""
    import dataclasses

    from cmrkit.commands import reader

    # engine: --engine and its Ray options, shared with encode and run dense (commands/runs.py)
    fields = {f.name for f in dataclasses.fields(RerankOptions)} - {"engine"}
    tree = ast.parse(Path(reader.__file__).read_text(encoding="utf-8"))
    command = next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "rerank_command"
    )
    args = command.args.args[-len(command.args.defaults) :]
    asked = set()
    for arg, default in zip(args, command.args.defaults, strict=True):
        if arg.arg not in fields or arg.arg in ("device", "precision"):  # shared with dense
            continue
        assert isinstance(default, ast.Call) and default.args, arg.arg
        first = default.args[0]
        assert ast.unparse(first) == f"RERANK.{arg.arg}", (arg.arg, ast.unparse(first))
        asked.add(arg.arg)
    assert asked == fields - {"device", "precision"}
    params = {p.name: p.default for c, p in _parameters() if c == "run rerank"}
    for name in fields:
        default = getattr(params[name], "value", params[name])
        assert default == getattr(RERANK_DEFAULTS, name), name


def test_dedupe_is_declared_once_with_one_help():
    assert _constants("--dedupe") == ["commands/output.py:27"]
    helps = {c: p.help for c, p in _parameters() if p.name == "dedupe"}
    assert {"eval", "compare", "agree", "repro"} <= set(helps)
    assert len(set(helps.values())) == 1, helps
