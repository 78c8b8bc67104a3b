"""Every command takes the measure names `cmrkit eval` takes (issue 22, trip 4)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cmrkit.cli import app
from cmrkit.errors import CmrkitError
from cmrkit.evaluation.scoring import query_scorer
from cmrkit.pooling.plan import PlanOptions, plan_measure

QRELS = "q1 0 a 1\nq1 0 b 0\nq1 0 c 2\nq2 0 a 1\nq2 0 d 1\n"
RUN = "q1 Q0 b 1 3 t\nq1 Q0 a 2 2 t\nq1 Q0 c 3 1 t\nq2 Q0 d 1 5 t\nq2 Q0 x 2 4 t\n"
RUN_DICT = {"q1": {"b": 3.0, "a": 2.0, "c": 1.0}, "q2": {"d": 5.0, "x": 4.0}}
QRELS_DICT = {"q1": {"a": 1, "b": 0, "c": 2}, "q2": {"a": 1, "d": 1}}


@pytest.mark.parametrize(
    ("name", "cli_measure", "key"),
    [("AP", "AP", "AP"), ("map", "map", "AP"), ("RR@10", "RR@10", "RR@10"),
     ("relative_P.2", "relative_P.2", "relative_P_2"), ("ndcg_cut.2", "ndcg_cut.2", "nDCG@2"),
     ("SetF", "SetF", "set_F")],
)  # fmt: skip
def test_query_scorer_equals_eval(tmp_path, name, cli_measure, key):
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.trec").write_text(RUN)
    out = CliRunner().invoke(
        app, ["eval", str(tmp_path / "r.trec"), str(tmp_path / "q.txt"), "-m", cli_measure,
              "-f", "json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    per_query = json.loads(out.stdout)["per_query"]
    printed, scores = query_scorer(name)
    got = scores(RUN_DICT, QRELS_DICT)
    assert key in (printed, name)  # the name eval prints (ir_measures' when it has one)
    assert got == {q: row[printed] for q, row in per_query.items()}


@pytest.mark.parametrize(
    ("name", "words"),
    [("P", "gives 9 values"), ("all_trec", "values"), ("ERR@10", "unknown measure"),
     ("xinfAP", "stratified")],
)  # fmt: skip
def test_query_scorer_refuses_in_one_line(name, words):
    with pytest.raises(CmrkitError, match=words):
        query_scorer(name)


def test_pool_plan_takes_eval_names():
    assert plan_measure("map") == plan_measure("AP") == "AP"
    assert plan_measure("ndcg") == plan_measure("nDCG") == "nDCG"
    assert PlanOptions(budgets=(5,), measure="MAP").measure == "AP"
    with pytest.raises(CmrkitError, match="no such estimator"):
        plan_measure("MRR")


@pytest.mark.parametrize("name", ["infAP", "AP", "map", "relative_P.2", "SetF"])
def test_pool_bias_scores_with_eval_names(tmp_path, name):
    from cmrkit.pooling.bias import score_runs

    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.trec").write_text(RUN)
    out = CliRunner().invoke(
        app, ["eval", str(tmp_path / "r.trec"), str(tmp_path / "q.txt"), "-m", name, "-f", "json"]
    )
    assert out.exit_code == 0, out.stderr
    (value,) = json.loads(out.stdout)["measures"].values()
    assert score_runs({"r": RUN_DICT}, QRELS_DICT, name) == {"r": value}


def test_pool_bias_refuses_several_measures():
    from cmrkit.pooling.bias import score_runs

    with pytest.raises(CmrkitError, match="one measure"):
        score_runs({"r": RUN_DICT}, QRELS_DICT, "AP,P@10")
    with pytest.raises(CmrkitError, match="values"):
        score_runs({"r": RUN_DICT}, QRELS_DICT, "P")


def test_api_takes_trec_eval_names_and_the_version(tmp_path):
    import cmrkit

    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.trec").write_text(RUN)
    df = cmrkit.evaluate(str(tmp_path / "r.trec"), str(tmp_path / "q.txt"), ["P.1,2", "set_F"],
                         trec_eval="9")  # fmt: skip
    assert list(df.columns) == ["qid", "measure", "value", "trec_eval"]
    assert set(df["trec_eval"]) == {"9.0.8"}
    out = CliRunner().invoke(
        app, ["eval", str(tmp_path / "r.trec"), str(tmp_path / "q.txt"), "-m", "P.1,2", "-m",
              "set_F", "--trec-eval", "9", "-f", "csv"],
    )  # fmt: skip
    rows = [line.split(",") for line in out.stdout.splitlines()[1:]]
    got = [[q, m, repr(float(v)), t] for q, m, v, t in df.itertuples(index=False)]
    assert got == rows
