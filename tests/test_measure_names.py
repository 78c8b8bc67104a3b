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


def _ir_text(fam) -> str:
    from cmrkit.evaluation.measures import trec as defs

    if fam.params == defs.CUT_LONG:
        return f"{fam.ir_name}@5"
    if fam.params == defs.CUT_DOUBLE:
        return f"{fam.ir_name}@0.5"
    return fam.ir_name


def test_every_ir_measures_name_round_trips_through_both_engines():
    """The mapping is written once (each family's ir_name): an ir_measures name reads as that
    family in trec_eval's engine, as a measure printing the same name in the ranking engine,
    and the trec_eval name it prints reads back as the same measure."""
    from cmrkit.evaluation.measures import RANKING, TREC_EVAL, parse_measure, resolve
    from cmrkit.evaluation.measures import trec as defs

    named = [f for f in defs.FAMILIES if f.ir_name is not None]
    assert len(named) >= 20
    for fam in named:
        text, version = _ir_text(fam), fam.versions[-1]
        trec = resolve([text], version, engine=TREC_EVAL).columns
        assert [c.family.name for c in trec] == [fam.name], text
        (printed,) = trec[0].names
        ranking = resolve([text], version, engine=RANKING).measures
        if not fam.per_query:  # num_q: one value per query in the ranking engine too
            assert [m.name for m in ranking] == ["NumQ"]
            continue
        (m,) = ranking
        assert m.trec_name == printed, text
        back = parse_measure(m.spec or m.trec_name, version)
        assert back == m, (text, m, back)
    # the aliases read as the names they stand for (in trec_eval's engine a name without a
    # cutoff is trec_eval's own family: recall is recall at its nine cutoffs there)
    for alias, name in defs.IR_ALIASES.items():
        cases = [(RANKING, ""), (RANKING, "@10"), (TREC_EVAL, "@10")]
        for engine, suffix in cases:
            assert _outcome(alias + suffix, engine) == _outcome(name + suffix, engine), alias


def _outcome(text: str, engine: str):
    from cmrkit.evaluation.measures import resolve

    try:
        return resolve([text], engine=engine)
    except CmrkitError:
        return "refused"


def test_every_kind_with_a_trec_eval_family_reads_back_from_its_trec_eval_name():
    from cmrkit.evaluation.measures import _KINDS, Measure, parse_measure

    for kind in _KINDS:
        if kind.trec:
            assert parse_measure(kind.trec) == Measure(kind.name), kind
        if kind.trec_cut:
            assert parse_measure(f"{kind.trec_cut}_7") == Measure(kind.name, 7), kind
            assert Measure(kind.name, 7).trec_name == f"{kind.trec_cut}_7"


@pytest.mark.parametrize("text", ["", ",", " , "])
def test_no_measure_named_is_one_line(tmp_path, text):
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.trec").write_text(RUN)
    for fmt in ("table", "trec"):
        out = CliRunner().invoke(
            app, ["eval", str(tmp_path / "r.trec"), str(tmp_path / "q.txt"), "-m", text,
                  "-f", fmt],
        )  # fmt: skip
        assert out.exit_code == 2, out.output
        assert out.stderr.count("\n") == 1 and "names no measure" in out.stderr, out.stderr


def test_a_trec_eval_cutoff_list_after_another_measure_is_its_parameters(tmp_path):
    """`-m map,P.5,10` (trip 7): map and P at 5 and 10, as `-m map -m P.5,10`."""
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.trec").write_text(RUN)
    args = ["eval", str(tmp_path / "r.trec"), str(tmp_path / "q.txt"), "-f", "trec"]
    joined = CliRunner().invoke(app, [*args, "-m", "map,P.5,10"])
    apart = CliRunner().invoke(app, [*args, "-m", "map", "-m", "P.5,10"])
    assert joined.exit_code == 0, joined.stderr
    assert joined.stdout == apart.stdout
    names = [line.split()[0] for line in joined.stdout.splitlines()]
    assert names == ["map", "P_5", "P_10"]
    # and a name after the numbers starts the next measure
    after = CliRunner().invoke(app, [*args, "-m", "P.5,10,map"])
    assert after.stdout == joined.stdout


def test_measures_only_cmrkit_has_and_only_trec_eval_has_are_asked_apart(tmp_path):
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.trec").write_text(RUN)
    out = CliRunner().invoke(
        app, ["eval", str(tmp_path / "r.trec"), str(tmp_path / "q.txt"), "-m", "RR@10",
              "-m", "all_trec"],
    )  # fmt: skip
    assert out.exit_code == 2 and "two calls" in out.stderr, out.output
    # RR@10 with a trec_eval option: said why
    out = CliRunner().invoke(
        app, ["eval", str(tmp_path / "r.trec"), str(tmp_path / "q.txt"), "-m", "RR@10", "-J"]
    )
    assert out.exit_code == 2 and "cmrkit's own" in out.stderr, out.output


def test_a_measure_of_the_other_version_is_refused_by_both_engines():
    """rbp is trec_eval 10.0's: with --trec-eval 9, groups and compare (the ranking engine)
    refuse it as `-f trec` does (they used to compute it)."""
    from cmrkit.evaluation.measures import RANKING, TREC_EVAL, resolve

    for engine in (RANKING, TREC_EVAL):
        with pytest.raises(CmrkitError, match="10.0 only, not in 9.0.8"):
            resolve(["rbp"], "9", engine=engine)
    assert [m.name for m in resolve(["rbp"], "10", engine=RANKING).measures] == ["rbp"]


def test_a_grade_equal_to_the_old_missing_mark_is_a_judgment(tmp_path):
    """A retrieved document judged -1099511627776 (-2**40, the value that marked documents
    missing from the qrels) is in the qrels: Judged@1 is 1."""
    (tmp_path / "q.txt").write_text("q1 0 a -1099511627776\nq1 0 b 1\n")
    (tmp_path / "r.trec").write_text("q1 Q0 a 1 2 t\nq1 Q0 b 2 1 t\n")
    out = CliRunner().invoke(
        app, ["eval", str(tmp_path / "r.trec"), str(tmp_path / "q.txt"), "-m", "Judged@1",
              "-f", "json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    assert json.loads(out.stdout)["measures"]["Judged@1"] == 1.0


@pytest.mark.parametrize(
    ("typed", "meant", "extra"),
    [("nDGC@10", "nDCG@10", []), ("mapp", "map", []), ("recip_rnk", "recip_rank", []),
     ("Judgd@10", "Judged@10", []), ("offical", "official", ["-f", "trec"]),
     ("xinfAPP", "xinfAP", []), ("mapp", "map", ["-J"])],
)  # fmt: skip
def test_an_unknown_measure_a_letter_off_gets_a_did_you_mean(tmp_path, typed, meant, extra):
    """From the new user's walk: an unknown measure got the valid names, no 'did you mean'
    (Typer suggests commands already). One place (measures' unknown-name line) serves both
    engines and every command."""
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.trec").write_text(RUN)
    files = [str(tmp_path / "r.trec"), str(tmp_path / "q.txt")]
    for args in (["eval", *files, "-m", typed, *extra],
                 ["compare", files[1], files[0], files[0], "-m", typed]):  # fmt: skip
        if args[0] == "compare" and extra:
            continue
        out = CliRunner().invoke(app, args)
        assert out.exit_code == 2 and out.stderr.count("\n") == 1, out.stderr
        assert f"unknown {'trec_eval ' if '-J' in extra else ''}measure {typed!r} (did you " \
            f"mean {meant!r}?)" in out.stderr, out.stderr  # fmt: skip
    with pytest.raises(CmrkitError, match=rf"\(did you mean {meant!r}\?\)"):
        query_scorer(typed)


def test_a_name_far_from_every_measure_gets_no_guess(tmp_path):
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.trec").write_text(RUN)
    out = CliRunner().invoke(app, ["eval", str(tmp_path / "r.trec"), str(tmp_path / "q.txt"),
                                   "-m", "zebra"])  # fmt: skip
    assert out.exit_code == 2 and "unknown measure 'zebra'; valid measures:" in out.stderr
