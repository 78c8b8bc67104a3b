"""`cmrkit eval` and cmrkit.evaluation against the real trec_eval 9.0.4 binary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from trec_eval_fixtures import extract_trec_eval, parse_trec_eval, run_trec_eval, write_collection
from typer.testing import CliRunner

from cmrkit.cli import app
from cmrkit.errors import CmrkitError
from cmrkit.evaluation import by_group, evaluate, load_groups
from cmrkit.evaluation.measures import DEFAULT_MEASURES, parse_measure, parse_measures
from cmrkit.trec import read_qrels, read_run

# measures with a trec_eval counterpart, each checked against the binary's own value
TREC_MEASURES = [
    "infAP", "AP", "AP@5", "AP@10", "AP@50", "P@5", "P@10", "P@100", "R@5", "R@10", "R@50",
    "R@100", "nDCG", "nDCG@10", "nDCG@20", "Bpref", "Rprec", "RR", "Success@1", "Success@5",
    "NumRel", "NumRet", "NumRelRet", "NumQ",
]  # fmt: skip


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    folder = tmp_path_factory.mktemp("eval")
    binary = extract_trec_eval(folder)
    qrels, run, types = write_collection(folder)
    return binary, qrels, run, types, folder


def _binary_args(measures):
    # trec_eval keeps only the first -m of a measure: its cutoffs go in one list, map_cut.5,10
    cutoffs: dict[str, list[str]] = {}
    for m in measures:
        name, _, cutoff = parse_measure(m).pytrec_request.partition(".")
        cutoffs.setdefault(name, [])
        if cutoff:
            cutoffs[name].append(cutoff)
    args = []
    for name, cuts in cutoffs.items():
        args += ["-m", f"{name}.{','.join(cuts)}" if cuts else name]
    return args


def _check_equal(result, expected: dict, measures, *, all_line: bool = True) -> int:
    """Every per-query and aggregate value trec_eval printed equals ours as printed."""
    checked = 0
    for m in map(parse_measure, measures):
        printed = {q: v for (name, q), v in expected.items() if name == m.trec_name}
        assert printed, f"trec_eval printed nothing for {m.trec_name}"
        for qid, value in printed.items():
            ours = result.aggregate[m.name] if qid == "all" else result.per_query[qid][m.name]
            assert m.format(ours) == value, (m.name, qid, ours, value)
            checked += 1
        if all_line:
            assert "all" in printed
        per_query = [q for q in printed if q != "all"]
        assert sorted(per_query) == result.scored or m.kind == "NumQ"
    return checked


@pytest.mark.parametrize(
    "options",
    [{}, {"all_queries": True}, {"depth": 7}, {"depth": 7, "all_queries": True}],
    ids=["default", "all-queries", "depth", "depth+all-queries"],
)
def test_every_measure_equals_trec_eval(env, options):
    binary, qrels, run, _, _ = env
    args = _binary_args(TREC_MEASURES)
    if options.get("all_queries"):
        args.append("-c")
    if options.get("depth"):
        args += ["-M", str(options["depth"])]
    expected = parse_trec_eval(run_trec_eval(binary, qrels, run, *args))
    result = evaluate(read_run(run), read_qrels(qrels), TREC_MEASURES, **options, version="9")
    assert _check_equal(result, expected, TREC_MEASURES) > 500
    assert result.missing_from_run and result.missing_from_qrels
    n_qrels = len(read_qrels(qrels))
    assert result.queries == (n_qrels if options.get("all_queries") else len(result.scored))
    assert int(expected[("num_q", "all")]) == result.queries


@pytest.mark.parametrize("k", [1, 3, 10])
def test_rr_at_k_is_recip_rank_on_the_top_k(env, k):
    binary, qrels, run, _, _ = env
    expected = parse_trec_eval(run_trec_eval(binary, qrels, run, "-M", str(k), "-m", "recip_rank"))
    result = evaluate(read_run(run), read_qrels(qrels), [f"RR@{k}"], version="9")
    for (_, qid), value in expected.items():
        ours = result.aggregate[f"RR@{k}"] if qid == "all" else result.per_query[qid][f"RR@{k}"]
        assert f"{ours:.4f}" == value, (qid, ours, value)


def test_judged_at_k_counts_any_judgment_in_the_top_k(env, tmp_path):
    binary, qrels, run, _, _ = env
    # every judged document made "relevant": trec_eval's num_rel_ret on the top k is then the
    # number of judged documents there, num_ret the length of the top k
    all_judged = tmp_path / "judged.qrels"
    all_judged.write_text(
        "".join(f"{q} 0 {d} 1\n" for q, docs in read_qrels(qrels).items() for d in docs)
    )
    k = 10
    printed = parse_trec_eval(
        run_trec_eval(binary, all_judged, run, "-M", str(k), "-m", "num_rel_ret", "-m", "num_ret")
    )
    result = evaluate(read_run(run), read_qrels(qrels), ["Judged@10"], version="9")
    expected = {}
    for qid in result.per_query:
        expected[qid] = int(printed[("num_rel_ret", qid)]) / int(printed[("num_ret", qid)])
        assert result.per_query[qid]["Judged@10"] == pytest.approx(expected[qid], abs=1e-12)
    mean = sum(expected.values()) / len(expected)
    assert result.aggregate["Judged@10"] == pytest.approx(mean, abs=1e-12)
    assert 0 < mean < 1


@pytest.mark.parametrize("complete", [False, True])
def test_trec_format_is_byte_identical_to_trec_eval_q(env, complete):
    binary, qrels, run, _, _ = env
    # in the order trec_eval prints its measures
    measures = ["NumQ", "NumRet", "NumRel", "NumRelRet", "AP", "Rprec", "Bpref", "RR", "P@5",
                "P@10", "R@10", "infAP", "nDCG", "nDCG@10", "AP@10", "Success@1"]  # fmt: skip
    args = _binary_args(measures) + (["-c"] if complete else [])
    expected = run_trec_eval(binary, qrels, run, *args)
    # trec_eval -q: the per-query lines; the 9.0.x binary: scores as C floats
    cli_args = ["eval", str(run), str(qrels), "--format", "trec", "-q", "--trec-eval", "9"]
    cli_args += [a for m in measures for a in ("-m", m)] + (["--all-queries"] if complete else [])
    result = CliRunner().invoke(app, cli_args)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == expected
    assert "averaged over" in result.stderr


def test_default_table_shows_the_default_measures(env):
    _, qrels, run, _, _ = env
    result = CliRunner().invoke(app, ["eval", str(run), str(qrels)])
    assert result.exit_code == 0, result.stderr
    for name in DEFAULT_MEASURES:
        assert name in result.stdout
    expected = evaluate(read_run(run), read_qrels(qrels))
    assert f"{expected.aggregate['infAP']:.4f}" in result.stdout
    assert f"averaged over {expected.queries} queries" in result.stdout.replace("\n", " ")


def test_json_and_csv_formats(env):
    _, qrels, run, _, _ = env
    expected = evaluate(read_run(run), read_qrels(qrels), ["AP", "RR@10"])
    out = CliRunner().invoke(app, ["eval", str(run), str(qrels), "-m", "AP,RR@10", "-f", "json"])
    assert out.exit_code == 0, out.stderr
    obj = json.loads(out.stdout)
    assert obj["measures"] == expected.aggregate
    assert obj["queries"] == expected.queries == len(obj["per_query"])
    assert obj["missing_from_run"] == expected.missing_from_run
    assert obj["missing_from_qrels"] == expected.missing_from_qrels
    assert obj["trec_names"] == {"AP": "map", "RR@10": "RR@10"}
    out = CliRunner().invoke(app, ["eval", str(run), str(qrels), "-m", "AP,RR@10", "-f", "csv"])
    assert out.exit_code == 0, out.stderr
    rows = out.stdout.splitlines()
    assert rows[0] == "qid,measure,value,trec_eval"
    assert obj["trec_eval"] == "10.0" and rows[1].endswith(",10.0")
    assert len(rows) == 1 + 2 * expected.queries + 2
    assert rows[-2].startswith("all,AP,") and float(rows[-2].split(",")[2]) == pytest.approx(
        expected.aggregate["AP"]
    )


def test_output_is_deterministic(env):
    _, qrels, run, _, _ = env
    outs = [CliRunner().invoke(app, ["eval", str(run), str(qrels), "-f", "json"]).stdout
            for _ in range(2)]  # fmt: skip
    assert outs[0] == outs[1]


def test_groups_from_topics_jsonl_and_cmr_queries_file(env, tmp_path):
    binary, qrels, run, types, _ = env
    topics = tmp_path / "topics.jsonl"
    topics.write_text(
        "".join(json.dumps({"qid": q, "type": t, "split": "test"}) + "\n" for q, t in types.items())
    )
    cmr_queries = tmp_path / "queries.tsv"
    cmr_queries.write_text(
        "".join(f"{q}\t{t}\tDOC:1:50:3:9\tBobby Hall \n" for q, t in types.items())
    )
    assert load_groups(topics, "type") == types == load_groups(cmr_queries, "type")
    printed = parse_trec_eval(run_trec_eval(binary, qrels, run, "-m", "infAP"))
    result = evaluate(read_run(run), read_qrels(qrels), ["infAP"], version="9")
    groups = by_group(result, types)
    assert [g.group for g in groups] == ["GPE", "ORG", "PER"]
    for g in groups:
        # the group mean from trec_eval's per-query values (4 decimals)
        values = [float(printed[("infAP", q)]) for q in g.queries]
        assert g.aggregate["infAP"] == pytest.approx(sum(values) / len(values), abs=1e-4)
        assert all(types[q] == g.group for q in g.queries)
    assert sum(len(g.queries) for g in groups) == result.queries

    out = CliRunner().invoke(
        app,
        ["eval", str(run), str(qrels), "-m", "infAP", "--topics", str(topics), "--by", "type",
         "-f", "json", "--trec-eval", "9"],
    )  # fmt: skip
    assert out.exit_code == 0, out.stderr
    obj = json.loads(out.stdout)
    assert set(obj["groups"]) == {"GPE", "ORG", "PER"}
    assert obj["groups"]["PER"]["measures"]["infAP"] == next(
        g.aggregate["infAP"] for g in groups if g.group == "PER"
    )
    table = CliRunner().invoke(
        app, ["eval", str(run), str(qrels), "-m", "infAP", "--topics", str(cmr_queries), "--by",
              "type"],
    )  # fmt: skip
    assert table.exit_code == 0, table.stderr
    assert "GPE" in table.stdout and "PER" in table.stdout


def test_measure_names():
    assert [m.name for m in parse_measures(["map", "MRR@10", "P_10", "ndcg_cut.10", "bpref"])] == [
        "AP", "RR@10", "P@10", "nDCG@10", "Bpref",
    ]  # fmt: skip
    assert [m.trec_name for m in parse_measures(None)][:4] == ["infAP", "map", "map_cut_10",
                                                                "map_cut_50"]  # fmt: skip
    for bad in ["foo", "AP@x", "P", "infAP@10", "AP@0", "P(rel=2)@10"]:
        with pytest.raises(CmrkitError):
            parse_measure(bad)


# --- bad input: exit code 2 and one line naming the file and line ------------------------


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


GOOD_QRELS = "q1 0 a 1\nq1 0 b 0\nq2 0 a 1\n"
GOOD_RUN = "q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\nq2 Q0 c 1 1.0 t\n"


@pytest.mark.parametrize(
    ("run_text", "qrels_text", "where", "words"),
    [
        ("q1 Q0 a 1 2.0\n", GOOD_QRELS, "run.trec: line 1", "expected 6 fields"),
        ("q1 Q0 a 1 2.0 t\nq1 Q0 b 2 high t\n", GOOD_QRELS, "run.trec: line 2", "not a number"),
        ("q1 Q0 a 1 nan t\n", GOOD_QRELS, "run.trec: line 1", "not finite"),
        ("q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\nq1 Q0 a 3 0.5 t\n", GOOD_QRELS, "run.trec: line 3",
         "--dedupe"),
        (GOOD_RUN, "q1 0 a 1\nq1 0 a 0\n", "qrels.txt: line 2", "judged 1 on line 1 and 0"),
        (GOOD_RUN, "q1 0 a\n", "qrels.txt: line 1", "expected 4 fields"),
        (GOOD_RUN, "q1 0 a yes\n", "qrels.txt: line 1", "not a number"),
        (GOOD_RUN, "q1 0 a 0.5\n", "qrels.txt: line 1", "whole number"),
        ("", GOOD_QRELS, "run.trec", "empty"),
        (GOOD_RUN, "\n", "qrels.txt", "no judgments"),
        ("x1 Q0 a 1 1.0 t\n", GOOD_QRELS, "", "no query in common"),
    ],
    ids=["run-fields", "score", "nan", "duplicate", "conflict", "qrels-fields", "rel", "fraction",
         "empty-run", "empty-qrels", "no-common"],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(tmp_path, run_text, qrels_text, where, words):
    run = _write(tmp_path / "run.trec", run_text)
    qrels = _write(tmp_path / "qrels.txt", qrels_text)
    result = CliRunner().invoke(app, ["eval", str(run), str(qrels)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert where in lines[0] and words in lines[0]
    assert "Traceback" not in result.output


def test_unknown_measure_lists_the_valid_ones(tmp_path):
    run = _write(tmp_path / "run.trec", GOOD_RUN)
    qrels = _write(tmp_path / "qrels.txt", GOOD_QRELS)
    result = CliRunner().invoke(app, ["eval", str(run), str(qrels), "-m", "MAP@ten"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "unknown measure" in result.stderr or "cutoff" in result.stderr
    result = CliRunner().invoke(app, ["eval", str(run), str(qrels), "-m", "ERR@10"])
    assert result.exit_code == 2
    assert "valid measures: AP[@k], infAP, RR[@k]" in result.stderr


def test_by_needs_topics(tmp_path):
    run = _write(tmp_path / "run.trec", GOOD_RUN)
    qrels = _write(tmp_path / "qrels.txt", GOOD_QRELS)
    result = CliRunner().invoke(app, ["eval", str(run), str(qrels), "--by", "type"])
    assert result.exit_code == 2 and "--topics" in result.stderr


def test_dedupe_keeps_the_best_score(env, tmp_path):
    binary = env[0]
    run = _write(tmp_path / "run.trec", "q1 Q0 b 1 3.0 t\nq1 Q0 a 2 1.0 t\nq1 Q0 a 3 5.0 t\n")
    deduped = _write(tmp_path / "deduped.trec", "q1 Q0 b 1 3.0 t\nq1 Q0 a 3 5.0 t\n")
    qrels = _write(tmp_path / "qrels.txt", "q1 0 a 1\nq1 0 b 0\n")
    result = CliRunner().invoke(app, ["eval", str(run), str(qrels), "--dedupe", "-m", "RR",
                                      "-f", "trec", "-q"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert result.stdout == run_trec_eval(binary, qrels, deduped, "-m", "recip_rank")


def test_identical_duplicate_judgments_warn(tmp_path):
    run = _write(tmp_path / "run.trec", GOOD_RUN)
    qrels = _write(tmp_path / "qrels.txt", GOOD_QRELS + "q1 0 a 1\n")
    result = CliRunner().invoke(app, ["eval", str(run), str(qrels), "-m", "AP", "-f", "trec"])
    assert result.exit_code == 0
    assert "warning:" in result.stderr and "duplicate" in result.stderr


def test_eval_never_imports_pyserini_torch_or_spacy(env):
    _, qrels, run, _, _ = env
    code = (
        "import sys\n"
        "from cmrkit.cli import app\n"
        f"try:\n    app(['eval', {str(run)!r}, {str(qrels)!r}, '-f', 'json'])\n"
        "except SystemExit as e:\n    assert not e.code, e.code\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pyserini', 'torch', 'spacy', 'jnius', 'transformers'))\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "HEAVY []" in proc.stderr
    assert json.loads(proc.stdout)["queries"] > 0


def _scored_run_text(seed: int) -> str:
    """A regular run whose scores are written in every way trec_eval's atof reads alike, with
    float32 ties, lines out of score order and a query the qrels lack."""
    import random

    r = random.Random(seed)
    forms = [
        lambda x: f"{x:.4f}",
        lambda x: f"{x:.17g}",
        lambda x: f"{x:.3e}",
        lambda x: str(int(x)) + ".",
        lambda x: f"{x:.1f}".replace("0.", "."),
        lambda x: "1.00000001",
        lambda x: "1.00000002",
        lambda x: "-0",
    ]
    lines = []
    for q in list(range(1, 13)) + [99]:
        docs = r.sample(range(60), 40)
        for i, d in enumerate(docs):
            x = r.uniform(-5, 5)
            lines.append(f"q{q} Q0 doc{d} {i + 1} {r.choice(forms)(x)} t")
    return "\n".join(lines) + "\n"


def _scored_qrels_text(seed: int) -> str:
    import random

    r = random.Random(seed)
    lines = []
    for q in list(range(1, 13)) + [50]:
        grades = [-1, 0] if q == 7 else [-1, 0, 0, 1, 2, 3]
        for d in r.sample(range(60), 25):
            lines.append(f"q{q} 0 doc{d} {r.choice(grades)}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("depth", [None, 7])
def test_file_path_equals_trec_eval_on_odd_score_texts(env, tmp_path, depth):
    from cmrkit.evaluation import evaluate_files
    from cmrkit.trec import read_run_columns

    binary = env[0]
    run = tmp_path / "odd.run"
    run.write_text(_scored_run_text(3))
    qrels = tmp_path / "odd.qrels"
    qrels.write_text(_scored_qrels_text(3))
    assert read_run_columns(run).to_run() == read_run(run)
    measures = [m for m in TREC_MEASURES if m not in ("NumQ",)]
    args = _binary_args(measures) + ["-c"] + (["-M", str(depth)] if depth else [])
    expected = parse_trec_eval(run_trec_eval(binary, qrels, run, *args))
    result = evaluate_files(run, qrels, measures, all_queries=True, depth=depth, version="9")
    assert _check_equal(result, expected, measures) > 100


def test_columns_and_dict_runs_score_bit_identically(env, tmp_path):
    from cmrkit.trec import read_run_columns

    _, qrels, run, _, _ = env
    odd = tmp_path / "odd.run"
    odd.write_text(_scored_run_text(4))
    odd_qrels = tmp_path / "odd.qrels"
    odd_qrels.write_text(_scored_qrels_text(4))
    for path, judged in ((run, read_qrels(qrels)), (odd, read_qrels(odd_qrels))):
        for options in ({}, {"depth": 5, "all_queries": True}):
            a = evaluate(read_run(path), judged, TREC_MEASURES + ["RR@3", "Judged@10"], **options)
            b = evaluate(read_run_columns(path), judged, a.measures, **options)
            assert a.per_query == b.per_query and a.aggregate == b.aggregate


def test_trec_eval_cutoff_lists_become_one_measure_per_cutoff():
    """`compare -m P.1,2` compares P@1 and P@2 (trec_eval's cutoff list), and a name after the
    numbers starts a new measure; a number with no dotted measure before it stays an error."""
    from cmrkit.errors import CmrkitError
    from cmrkit.evaluation.measures import parse_measures

    got = parse_measures(["P.1,2", "ndcg_cut.5,10,AP"])
    want = parse_measures(["P.1", "P.2", "ndcg_cut.5", "ndcg_cut.10", "AP"])
    assert got == want and len(got) == 5
    with pytest.raises(CmrkitError, match="unknown measure '2'"):
        parse_measures(["AP,2"])


def _random_case(seed: int):
    """Runs and qrels with ties, float32-only ties, negative, zero and graded judgments,
    queries without relevant documents and rankings of very unequal lengths."""
    import random

    r = random.Random(seed)
    run, qrels = {}, {}
    for q in range(r.randint(5, 30)):
        qid = f"q{q}"
        pool = [f"d{r.randint(0, 3000)}" for _ in range(r.choice([3, 40, 400, 2500]))]
        pool = list(dict.fromkeys(pool))
        grades = [-1, 0, 0, 1, 2, 3] if q % 4 else [-1, 0]
        qrels[qid] = {d: r.choice(grades) for d in r.sample(pool, r.randint(1, len(pool)))}
        n = r.choice([1, 2, 10, 60, len(pool)])
        run[qid] = {
            d: r.choice([round(r.random(), 1), 1.0 + r.choice([1e-9, 2e-9]), r.random() * 9])
            for d in r.sample(pool, min(n, len(pool)))
        }
    return run, qrels


ENGINE_MEASURES = ["AP", "AP@5", "AP@50", "infAP", "RR", "P@1", "P@7", "R@3", "R@100",
                   "Success@2", "nDCG@4", "nDCG@30", "NumRel", "NumRet", "NumRelRet",
                   "yaap"]  # fmt: skip


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("version", ["9", "10"])
@pytest.mark.parametrize("depth", [None, 25])
def test_the_two_engines_agree_bit_for_bit_on_random_runs(seed, version, depth):
    """AP, AP@k, infAP, RR, P@k, R@k, Success@k, nDCG@k and the counts have one kernel each
    (measures/), fed by two layouts: ranking.py's flat arrays (`eval`'s default path, kept for
    its speed) and trec_bulk.py's matrices (trec_eval's engine), each engine ranking and
    joining the run itself. Every per-query double is the same (tests/test_measure_kernels.py
    checks the kernels layout against layout)."""
    import cmrkit.evaluation.trec_eval as te
    from cmrkit.evaluation.measures import TREC_EVAL, resolve

    run, qrels = _random_case(seed)
    ours = evaluate(run, qrels, ENGINE_MEASURES, depth=depth, version=version)
    results = te.Results.of(run, version)
    opts = te.Options(version=version, max_docs=depth or te.Options.max_docs)
    columns = resolve(ENGINE_MEASURES, version, engine=TREC_EVAL).columns
    theirs = te.evaluate(results, te.RelInfo("qrels", qrels=qrels), columns, opts).by_query()
    assert sorted(theirs) == sorted(ours.per_query)
    checked = 0
    for qid, row in ours.per_query.items():
        for m in ours.measures:
            assert row[m.name] == theirs[qid][m.trec_name], (qid, m.name)
            checked += 1
    assert checked >= 5 * len(ENGINE_MEASURES)


@pytest.mark.parametrize("pure", [False, True])
def test_unjudged_finds_a_run_none_of_whose_documents_the_qrels_judge(tmp_path, monkeypatch, pure):
    """evaluation/judged.unjudged, the test behind eval/compare/agree's refusal of another
    collection's run: past the first queries it looks, a document judged for another query
    (or one of a query the run lacks) still counts as judged; bytes and str docnos alike."""
    from cmrkit.evaluation.judged import FIRST, Unjudged, unjudged
    from cmrkit.trec import read_qrels_with_strata, read_run_columns

    if pure:
        monkeypatch.setenv("CMRKIT_PURE_PYTHON", "1")
    n = FIRST + 20
    qrels = tmp_path / "q.txt"
    qrels.write_text("".join(f"q{i} 0 D{i} 1\n" for i in range(n)) + "extra 0 LATE 0\n")
    foreign = tmp_path / "f.trec"
    foreign.write_text("".join(f"q{i} Q0 X{i}.{k} {k + 1} {5 - k} t\n"
                               for i in range(n) for k in range(3)))  # fmt: skip
    judged, _ = read_qrels_with_strata(qrels, columns=True)
    assert unjudged(read_run_columns(foreign), judged) == Unjudged(3 * n, n)
    # one document, of the last query, judged for another query (beyond the first looked at)
    late = foreign.read_text().replace(f"X{n - 1}.2 3", "LATE 3")
    foreign.write_text(late)
    assert unjudged(read_run_columns(foreign), judged) is None
    assert (
        unjudged(read_run_columns(foreign).to_run(), {q: list(d) for q, d in judged.items()})
        is None
    )
    # no query in common: the scoring says so
    other = tmp_path / "o.trec"
    other.write_text("z1 Q0 D1 1 1.0 t\n")
    assert unjudged(read_run_columns(other), judged) is None
