"""Help and tables at 80 columns: pipeline order, placeholders, short flags, runnable examples."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from cmrkit.cli import PIPELINE, app
from cmrkit.commands.evaluate import TREC_EVAL_LETTERS
from cmrkit.commands.tables import Table, render


def _commands(group, ctx, path: tuple[str, ...] = ()):
    """(command path, command, context) of every leaf command (typer's own click objects)."""
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        sub = cmd.context_class(cmd, info_name=name, parent=ctx)
        if hasattr(cmd, "list_commands"):
            yield from _commands(cmd, sub, (*path, name))
        else:
            yield (*path, name), cmd, sub


@pytest.fixture(scope="module")
def commands():
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="cmrkit")
    return root, ctx, list(_commands(root, ctx))


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_commands_are_listed_in_pipeline_order():
    text = _help()
    listed = re.findall(r"^  ([a-z][a-z-]+)  ", text.split("Commands:")[1], flags=re.M)
    assert listed == [c for c in PIPELINE if c in listed]
    assert listed[:5] == ["sample-data", "build-collection", "index", "encode", "run"]
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines())


def test_help_at_80_columns_has_word_placeholders_and_no_cuts(commands):
    _, _, found = commands
    for path, _, _ in found:
        text = _help(*path)
        # no type placeholders such as <bool>, <int>, <path>, <list[str]>
        assert not re.search(r"<[a-z][a-z_\[\]|]*>", text), (path, text)
        assert "…" not in text, path  # nothing cut short
        assert all(len(line) <= 80 for line in text.splitlines()), path


def test_a_short_flag_means_one_thing_everywhere(commands):
    """Except trec_eval's own letters in `eval`, which mean what trec_eval means."""
    _, _, found = commands
    meaning: dict[str, set[str]] = {}
    for path, cmd, _ in found:
        for p in cmd.params:
            if p.param_type_name == "option":
                longs = [o for o in p.opts + p.secondary_opts if o.startswith("--")]
                for o in p.opts:
                    if path == ("eval",) and o in TREC_EVAL_LETTERS:
                        continue
                    if not o.startswith("--"):
                        meaning.setdefault(o, set()).add(longs[0] if longs else o)
    clashes = {flag: names for flag, names in meaning.items() if len(names) > 1}
    assert not clashes


def _examples(cmd) -> list[str]:
    text = (cmd.help or "").replace("\n", " ")
    found = re.findall(
        r"Example[^:]*:\s*(cmrkit .*?)(?=\s{2,}|\s*(?:[A-Z][a-z]+ )?[Ee]xample|$)", text
    )
    return [re.sub(r"\s+", " ", f).strip() for f in found]


def test_every_help_example_parses_against_its_command(commands):
    root, ctx, found = commands
    seen = 0
    for path, cmd, _ in found:
        examples = _examples(cmd)
        assert examples, f"cmrkit {' '.join(path)} has no example"
        for example in examples:
            words = shlex.split(example)[1:]
            assert words[: len(path)] == list(path), example
            args = words[len(path) :]
            cmd.make_context(" ".join(path), list(args), parent=ctx)  # unknown options raise
            seen += 1
            # runs are named SYSTEM.SPLIT.trec: an example never names a file cmrkit never writes
            for w in args:
                if w.startswith("runs/") and w.endswith(".trec"):
                    assert re.fullmatch(r"runs/[\w.-]+/[\w.+=,:-]+\.(dev|test|train)\.trec", w), w
    assert seen >= len(found)


def test_tables_fit_80_columns_without_cutting_a_number():
    t = Table(
        "leave one run out (infAP)",
        ["run", "pairs only it", "relevant only it", "score", "score without", "delta", "rank"],
    )
    t.add_row("qe-rocchio-fields-doc.test", "1234", "56", "0.812345", "0.798765", "-0.0136", "1")
    t.add_row("bm25-mention+entities.test", "9", "0", "0.456789", "0.456789", "+0.0000", "2")
    console = Console(width=80, record=True, color_system=None)
    render(t, console)
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "…" not in text
    for value in ("0.812345", "0.798765", "-0.0136", "0.456789", "qe-rocchio-fields-doc.test"):
        assert value in text


def test_titles_and_captions_break_only_between_words():
    """Issue 32 trip 9: at 80 columns a title was wrapped at the width of its (narrow) table,
    cutting file names mid-word; it now takes the console's width and breaks at spaces, and a
    name longer than the line stays whole."""
    run = "runs/sample/bm25-mention+entities-rerank-int8-depth50.test.trec"
    qrels = "qrels/sample.assessed-by-three-people.test.txt"
    huge = "runs/" + "x" * 90 + ".trec"
    t = Table(f"{run} vs {qrels} [trec_eval 10]", ["measure", "all"], caption=f"also {huge} here")
    t.add_row("map", "0.5000")
    console = Console(width=80, record=True, color_system=None)
    render(t, console)
    text = console.export_text()
    lines = text.splitlines()
    words = text.split()
    for name in (run, qrels, huge):
        assert name in words, text
    assert "[trec_eval" in words  # not read as console markup
    assert all(len(line) <= 80 for line in lines if huge not in line)
    assert lines[0] == f"{run} vs"  # the title is as wide as the line, not as the table


def test_wide_tables_are_split_repeating_the_labels():
    measures = [f"measure{i}" for i in range(12)]
    t = Table("comparison", ["system", *measures])
    t.add_row("a-long-system-name.test", *(f"0.{i:04d}*" for i in range(12)))
    console = Console(width=80, record=True, color_system=None)
    render(t, console)
    text = console.export_text()
    assert all(len(line) <= 80 for line in text.splitlines())
    parts = re.findall(r"comparison \((\d) of (\d)\)", text)
    assert len(parts) >= 2 and text.count("a-long-system-name.test") == len(parts)
    for m in measures:
        assert m in text
    wide = Console(width=200, record=True, color_system=None)
    render(t, wide)
    assert "(1 of" not in wide.export_text()  # split only when it does not fit


def test_readme_and_docs_name_no_path_outside_the_repository():
    root = Path(__file__).resolve().parents[1]
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        if doc.name == "benchmarks.md":  # a record of measurements on the project's machine
            continue
        assert "../shared" not in doc.read_text(encoding="utf-8"), doc


def test_light_coercion_answers_as_typer_does(tmp_path):
    """commands/group.py coerces text, choices and paths without pydantic (start-up time): each
    command line below, good or bad, gives the same exit code, stdout and stderr with it as with
    Typer's own coercion."""
    import os
    import subprocess
    import sys

    from cmrkit.commands.group import LIGHT_COERCION_TYPER

    run = tmp_path / "r.trec"
    run.write_text("1 Q0 a 1 2.0 x\n1 Q0 b 2 1.0 x\n2 Q0 c 1 1.0 x\n")
    run2 = tmp_path / "r2.trec"
    run2.write_text("1 Q0 b 1 2.0 y\n2 Q0 d 1 1.0 y\n")
    qrels = tmp_path / "q.txt"
    qrels.write_text("1 0 b 1\n2 0 c 1\n2 0 d 0\n")
    lines = [
        ["eval", str(run), str(qrels)],
        ["eval", str(run), str(qrels), "-m", "P.1,2", "-q", "-f", "trec"],
        ["eval", str(run), str(qrels), "-f", "xml"],
        ["eval", str(run), str(qrels), "--trec-eval", "8"],
        ["eval", str(tmp_path / "missing.trec"), str(qrels)],
        ["eval", str(run), str(qrels), "-M", "two"],
        ["compare", str(qrels), str(run), str(run2), "--test", "nope"],
        ["compare", str(qrels), str(run), str(run2), "-m", "P.1", "-m", "set_F"],
        ["run", "fuse", str(run), str(run), "--method", "x"],
        ["build-collection", "--source", "bogus"],
        ["pool", "create", str(run), "--depth", "abc"],
    ]
    for args in lines:
        seen = []
        for how in ("light", "typer"):
            env = {**os.environ, "COLUMNS": "80", "CMRKIT_TYPER_COERCION": how}
            proc = subprocess.run(
                [sys.executable, "-m", "cmrkit", *args],
                capture_output=True,
                text=True,
                env=env,
                cwd=tmp_path,
                timeout=120,
            )
            seen.append((proc.returncode, proc.stdout, proc.stderr))
        assert seen[0] == seen[1], (args, seen)
    if typer.__version__.startswith(LIGHT_COERCION_TYPER):  # the point of it: no pydantic
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "cmrkit", *lines[0]],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "pydantic" not in proc.stderr
