"""Public names of the evaluation wing that moved (issue 41): the old import path still works
for one release, warns with a DeprecationWarning naming the new home, and gives the same
object; a name that never existed is still an AttributeError."""

from __future__ import annotations

import importlib

import pytest

MOVED = [
    ("cmrkit.evaluation.repro", "rbo", "cmrkit.evaluation.rbo", "rbo_normalised"),
    ("cmrkit.evaluation.repro", "rbo_weights", "cmrkit.evaluation.rbo", "normalised_weights"),
]


@pytest.mark.parametrize(("old", "name", "new", "new_name"), MOVED)
def test_an_old_import_path_warns_and_gives_the_new_object(old, name, new, new_name):
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=f"{old}.{name} is now {new}.{new_name}"):
        got = getattr(module, name)
    assert got is getattr(importlib.import_module(new), new_name)
    with pytest.warns(DeprecationWarning):
        exec(f"from {old} import {name}", {})


def test_the_moved_rbo_gives_the_same_numbers():
    from cmrkit.evaluation.rbo import rbo_normalised

    with pytest.warns(DeprecationWarning):
        from cmrkit.evaluation.repro import rbo
    a, b = ["d1", "d2", "d3", "d4"], ["d2", "d1", "d5"]
    assert rbo(a, b, 0.8, 4) == rbo_normalised(a, b, 0.8, 4)


@pytest.mark.parametrize("old", sorted({m[0] for m in MOVED}))
def test_an_unknown_name_is_still_an_attribute_error(old):
    module = importlib.import_module(old)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018
