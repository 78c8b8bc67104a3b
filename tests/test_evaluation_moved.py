"""Public names of the evaluation wing that moved (issue 41): the old import path still works
for one release, warns with a DeprecationWarning naming the new home, and gives the same
object; a name that never existed is still an AttributeError."""

from __future__ import annotations

import importlib

import pytest

MOVED = [
    ("cmrkit.evaluation.repro", "rbo", "cmrkit.evaluation.rbo", "rbo_normalised"),
    ("cmrkit.evaluation.repro", "rbo_weights", "cmrkit.evaluation.rbo", "normalised_weights"),
    *[
        ("cmrkit.evaluation.sampled", name, "cmrkit.evaluation.measures.sampled", name)
        for name in ("MAX_RESULTS", "SINGLE_STRATUM", "SampleStats", "sample_stats",
                     "sample_ranking", "estimate", "estimate_pooled", "per_query")
    ],  # fmt: skip
    ("cmrkit.evaluation.trec_bulk", "MIN_GEO_MEAN", "cmrkit.evaluation.measures.ranked",
     "MIN_GEO_MEAN"),
    ("cmrkit.evaluation.trec_bulk", "INFAP_EPSILON", "cmrkit.evaluation.measures.ranked",
     "INFAP_EPSILON"),
    ("cmrkit.evaluation.trec_bulk", "NEG_NAN", "cmrkit.evaluation.measures.cmath", "NEG_NAN"),
    ("cmrkit.evaluation.trec_bulk", "c_div", "cmrkit.evaluation.measures.cmath", "c_div"),
    ("cmrkit.evaluation.trec_bulk", "c_log", "cmrkit.evaluation.measures.cmath", "c_log"),
    ("cmrkit.evaluation.trec_bulk", "log2_discounts", "cmrkit.evaluation.measures.dcg",
     "discounts"),
    *[
        ("cmrkit.evaluation.trec_bulk", name, "cmrkit.evaluation.measures.dcg", name)
        for name in ("gains", "gain_map", "ideal_runs", "ideal_walk", "ideal_seq")
    ],
    ("cmrkit.evaluation.trec_bulk", "rbp_persistence", "cmrkit.evaluation.measures.rows",
     "rbp_persistence"),
]  # fmt: skip


@pytest.mark.parametrize(("old", "name", "new", "new_name"), MOVED)
def test_an_old_import_path_warns_and_gives_the_new_object(old, name, new, new_name):
    module = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=f"{old}.{name} is now {new}.{new_name}"):
        got = getattr(module, name)
    assert got is getattr(importlib.import_module(new), new_name)
    with pytest.warns(DeprecationWarning):
        exec(f"from {old} import {name}", {})


def test_the_kernel_tables_that_went_still_answer():
    """trec_bulk.MEASURES (and its m_NAME functions) and trec_prefs.MEASURES: each family's
    kernel now, with the old call (block, params)."""
    import cmrkit.evaluation.trec_bulk as trec_bulk
    import cmrkit.evaluation.trec_prefs as trec_prefs
    from cmrkit.evaluation.measures import trec as defs

    with pytest.warns(DeprecationWarning, match="trec_bulk.MEASURES is now each family's kernel"):
        table = trec_bulk.MEASURES
    assert {"map", "ndcg_cut", "bpref", "P"} <= set(table)
    with pytest.warns(DeprecationWarning, match="m_bpref"):
        assert trec_bulk.m_bpref.__self__ is defs.BY_NAME["bpref"]
    with pytest.warns(DeprecationWarning, match="trec_prefs.MEASURES"):
        prefs = trec_prefs.MEASURES
    assert prefs["prefs_simp"] is defs.BY_NAME["prefs_simp"].kernel and len(prefs) == 14
    with pytest.raises(AttributeError):
        trec_bulk.m_no_such_measure  # noqa: B018


def test_a_moved_method_still_answers():
    from cmrkit.evaluation.rescore import Judgments

    judgments = Judgments({"q": {"a": 2, "b": 1, "c": 0}})
    with pytest.warns(DeprecationWarning, match="Judgments.ideal_dcg"):
        got = judgments.ideal_dcg("q")
    assert got == 2 / 1.0 + 1 / 1.584962500721156


def test_the_moved_rbo_gives_the_same_numbers():
    from cmrkit.evaluation.rbo import rbo_normalised

    with pytest.warns(DeprecationWarning):
        from cmrkit.evaluation.repro import rbo
    a, b = ["d1", "d2", "d3", "d4"], ["d2", "d1", "d5"]
    assert rbo(a, b, 0.8, 4) == rbo_normalised(a, b, 0.8, 4)


@pytest.mark.parametrize("old", [*sorted({m[0] for m in MOVED}), "cmrkit.evaluation.trec_prefs"])
def test_an_unknown_name_is_still_an_attribute_error(old):
    module = importlib.import_module(old)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018
