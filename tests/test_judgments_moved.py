"""The judgments' old import paths (issue 41: one home in cmrkit/judgments/): ``cmrkit.judgments``
the module, ``cmrkit.judging.*`` and ``cmrkit.pooling.assessors`` keep working for one release,
warn with a DeprecationWarning naming the new home, and give the same object; a name that never
existed is still an AttributeError, and looking one up warns nothing."""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "cmrkit"
AUTO = (
    "auto cache calibration check completion fetch hybrid judges labels llm local options pairs "
    "prompt reader reliability"
).split()

# the module cmrkit.judgments was (0.5): its names and the kappas it re-exported
OLD_FACE = {
    **dict.fromkeys(
        "SIMPLE_COLUMNS BLIND_COLUMNS MTURK_COLUMNS Judgment read_judgments read_feedback decide "
        "needed_more Aggregate undecidable nothing_kept aggregate write_simple_csv".split(),
        "cmrkit.judgments.human",
    ),
    **dict.fromkeys(
        "simulate SimulatedAssessors check_assessors".split(), "cmrkit.judgments.simulated"
    ),
    **dict.fromkeys(
        "LABELS LABELS_TEXT MAX_ASSESSORS binarize majority".split(), "cmrkit.judgments.scale"
    ),
    **dict.fromkeys(
        "agreement_rows cohen_kappa fleiss_kappa".split(), "cmrkit.judgments.agreement"
    ),
}
ASSESSORS = {
    **dict.fromkeys(
        "LIKERT LABELS LABELS_TEXT MAX_ASSESSORS binarize majority".split(),
        "cmrkit.judgments.scale",
    ),
    **dict.fromkeys(
        "agreement_rows fleiss_kappa cohen_kappa weighted_kappa".split(),
        "cmrkit.judgments.agreement",
    ),
    **dict.fromkeys("SimulatedAssessors check_assessors".split(), "cmrkit.judgments.simulated"),
}


def _defined(module: str) -> list[str]:
    """The public names a module of cmrkit defines at its top level (functions, classes,
    constants), read from its source."""
    path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
    names = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for t in targets if isinstance(t, ast.Name)]
    return [n for n in names if not n.startswith("_")]


def _moves() -> list[tuple[str, str, str, str]]:
    """(old module, name, new module, new name) of every moved name."""
    out = [("cmrkit.judgments", n, m, n) for n, m in OLD_FACE.items()]
    out += [("cmrkit.pooling.assessors", n, m, n) for n, m in ASSESSORS.items()]
    out.append(
        ("cmrkit.pooling", "SimulatedAssessors", "cmrkit.judgments.simulated", "SimulatedAssessors")
    )
    for m in AUTO:
        new = f"cmrkit.judgments.auto.{m}"
        out += [(f"cmrkit.judging.{m}", n, new, n) for n in _defined(new)]
    out.append(("cmrkit.judging.pairs", "pool_targets", "cmrkit.pooling.pool", "pool_targets"))
    return out


MOVES = _moves()


def test_every_judging_module_and_name_is_listed():
    # the old judging/ modules are the new auto/ ones, one for one (make.py is new); the old
    # module's own names are the new module's (pool_targets went to pooling.pool)
    stems = {p.stem for p in (PACKAGE / "judgments" / "auto").glob("*.py")}
    assert stems - {*AUTO, "__init__"} == {"make"} and set(AUTO) <= stems
    assert sorted(p.stem for p in (PACKAGE / "judging").glob("*.py")) == sorted([*AUTO, "__init__"])
    assert {m for m, *_ in MOVES if m.startswith("cmrkit.judging.")} == {
        f"cmrkit.judging.{m}" for m in AUTO
    }
    assert len(MOVES) > 150


@pytest.mark.parametrize(("old", "name", "new", "new_name"), MOVES)
def test_an_old_import_path_warns_and_gives_the_new_object(old, name, new, new_name):
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"^{old}\.{name} is now {new}\.{new_name};"):
        got = getattr(module, name)
    assert got is getattr(importlib.import_module(new), new_name)


def test_from_import_warns_at_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from cmrkit.judging.cache import LabelCache  # noqa: F401
        from cmrkit.judgments import aggregate  # noqa: F401
        from cmrkit.pooling.assessors import cohen_kappa  # noqa: F401
    assert [w.category for w in caught] == [DeprecationWarning] * 3
    assert {w.filename for w in caught} == {__file__}


def test_a_submodule_through_the_old_package():
    from cmrkit.judgments.auto import reader as new

    with pytest.warns(DeprecationWarning, match="cmrkit.judging.reader.GROUP is now"):
        from cmrkit.judging import reader

        assert reader.GROUP == new.GROUP == 64


@pytest.mark.parametrize(
    "old",
    ["cmrkit.judgments", "cmrkit.pooling.assessors", "cmrkit.judging.cache", "cmrkit.pooling"],
)
def test_an_unknown_name_is_still_an_attribute_error_and_warns_nothing(old):
    module = importlib.import_module(old)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match=f"module '{old}' has no attribute 'no_such_name'"):
            module.no_such_name  # noqa: B018
        assert not hasattr(module, "__wrapped__")  # dunders probed by tools: no warning


def test_the_new_homes_import_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("scale", "agreement", "simulated", "human", "pooled"):
            importlib.import_module(f"cmrkit.judgments.{name}")
        for name in AUTO:
            importlib.import_module(f"cmrkit.judgments.auto.{name}")
        from cmrkit.pooling import read_pool  # noqa: F401
        from cmrkit.pooling.pool import pool_targets  # noqa: F401
