"""Options records are bound to a command's options explicitly (issue 41 item 6): every field
of RunOptions, DenseOptions and QE is read from the command's option of its name, given, or
left to its default by name (``commands/options.bind``). A field bound to no option, or one
left while the command has the option, fails here (read from each command's own code, for
every command of the app) and in ``bind`` at run time: an option renamed in a command can no
longer leave its field at the default unseen."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap

import pytest
from test_defaults import commands

from cmrkit.commands.options import bind
from cmrkit.retrieval.dense.options import DenseOptions
from cmrkit.retrieval.options import RunOptions
from cmrkit.retrieval.systems import QE

# builder -> (record, fields it gives itself, fields it leaves itself)
BUILDERS = {
    "run_options": (RunOptions, {"progress", "argv", "engine"}, set()),
    "lucene_run": (RunOptions, {"progress", "argv", "engine"}, set()),
    "training_call": (RunOptions, {"progress", "argv", "engine", "force"}, {"k", "name", "split"}),
    "_dense": (DenseOptions, {"markers"}, set()),
}
RECORDS = {"QE": QE, "RunOptions": RunOptions, "DenseOptions": DenseOptions}


def _bindings(function) -> list[tuple[type, set[str], set[str]]]:
    """(record, fields given, fields left) of every options record the command's body builds
    through a builder or ``bind`` itself."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
        keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
        leaves = set(ast.literal_eval(keywords.pop("leaves"))) if "leaves" in keywords else set()
        if name in BUILDERS:
            record, given, left = BUILDERS[name]
            found.append((record, given | set(keywords), left | leaves))
        elif name == "bind":
            record = RECORDS[node.args[0].id]
            found.append((record, set(keywords), leaves))
    return found


BOUND = [
    (path, record, given, left, {p.name for p in cmd.params})
    for path, cmd in commands()
    for record, given, left in _bindings(inspect.unwrap(cmd.callback))
]


def test_the_commands_that_build_records_are_found():
    by_record = {}
    for path, record, *_ in BOUND:
        by_record.setdefault(record.__name__, set()).add(path)
    assert by_record["RunOptions"] >= {
        "run bm25",
        "run fields",
        "run qe",
        "run dense",
        "run coref",
        "train dense",
        "train reader",
    }
    assert by_record["DenseOptions"] == {"encode", "run dense", "train dense"}
    assert by_record["QE"] == {"run qe"}


@pytest.mark.parametrize(
    ("path", "record", "given", "left", "params"),
    BOUND,
    ids=[f"{b[0]}:{b[1].__name__}" for b in BOUND],
)
def test_every_field_of_a_record_is_bound_to_an_option_given_or_left_by_name(
    path, record, given, left, params
):
    fields = {f.name for f in dataclasses.fields(record)}
    assert left <= fields and given <= fields, (path, (left | given) - fields)
    unbound = fields - given - left - params
    assert not unbound, f"{path}: {record.__name__} fields with no option: {sorted(unbound)}"
    shadowed = left & params
    assert not shadowed, f"{path}: left at the default but an option: {sorted(shadowed)}"


def test_bind_refuses_a_field_bound_to_nothing_and_one_left_that_is_an_option():
    params = {f.name: None for f in dataclasses.fields(DenseOptions)}
    params.update(model="m", device="cpu", batch_size=4, shard_size=8, precision="fp32")
    params.update(download=False, markers=None)
    assert bind(DenseOptions, params).batch_size == 4
    renamed = {k: v for k, v in params.items() if k != "batch_size"}
    renamed["encode_batch"] = 4
    with pytest.raises(TypeError, match=r"DenseOptions\.batch_size is bound to no option"):
        bind(DenseOptions, renamed)
    assert bind(DenseOptions, renamed, leaves=("batch_size",)).batch_size == 32
    with pytest.raises(TypeError, match=r"DenseOptions\.device is left at its default"):
        bind(DenseOptions, params, leaves=("device",))
    with pytest.raises(TypeError, match="has no field nonesuch"):
        bind(DenseOptions, params, leaves=("nonesuch",))
