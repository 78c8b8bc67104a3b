"""The shape the project guide asks of the code: no function body in cmrkit/ over 120 lines
(issue 32's done-when). A command whose parameters are option declarations counts its body
only: the declarations sit in its signature, which is not measured."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "cmrkit"
LONGEST = 120


def body_lengths(source: str) -> list[tuple[int, str, int]]:
    """(line, name, lines of the body) of every function and method, nested ones included; the
    body runs from its first statement (the docstring, if any) to its last line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((node.lineno, node.name, node.end_lineno - node.body[0].lineno + 1))
    return found


def test_the_measure_counts_the_body_not_the_option_declarations():
    options = "\n".join(f"    o{i}: int = typer.Option({i})," for i in range(200))
    source = f"def command(\n{options}\n) -> None:\n    '''Doc.'''\n    run()\n"
    assert body_lengths(source) == [(1, "command", 2)]
    body = "\n".join(f"    x{i} = {i}" for i in range(LONGEST + 1))
    assert body_lengths(f"def f():\n{body}\n") == [(1, "f", LONGEST + 1)]
    nested = f"def outer():\n    def inner():\n{body.replace('    ', '        ')}\n    return 1\n"
    assert dict((n, k) for _, n, k in body_lengths(nested)) == {
        "outer": LONGEST + 3,
        "inner": LONGEST + 1,
    }


def test_no_function_body_is_over_120_lines():
    long = [
        f"{path.relative_to(PACKAGE.parent)}:{line} {name} ({length} lines)"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, name, length in body_lengths(path.read_text(encoding="utf-8"))
        if length > LONGEST
    ]
    assert not long, "split into named steps: " + "; ".join(long)
