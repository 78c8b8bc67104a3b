"""`cmrkit agree`: runs scored under two sets of qrels, the rankings' agreement with intervals."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from scipy import stats
from test_compare import _variant
from trec_eval_fixtures import write_collection
from typer.testing import CliRunner

from cmrkit.cli import app
from cmrkit.evaluation import evaluate
from cmrkit.evaluation.agreement import ranking_agreement
from cmrkit.trec import read_qrels, read_run


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Complete qrels, a shallower copy (a third of the judgments dropped, a few grades
    flipped), and five runs of different quality."""
    folder = tmp_path_factory.mktemp("agree")
    qrels, base, _ = write_collection(folder, seed=3, name="base")
    runs = [base] + [
        _variant(base, qrels, folder / f"s{i}.trec", seed=i, boost=float(i)) for i in range(1, 5)
    ]
    r = random.Random(0)
    lines = qrels.read_text().splitlines()
    kept = []
    for line in lines:
        if r.random() < 0.33:
            continue
        f = line.split()
        if r.random() < 0.1:
            f[3] = "0" if f[3] not in ("0", "-1") else "1"
        kept.append(" ".join(f))
    shallow = folder / "shallow.txt"
    shallow.write_text("\n".join(kept) + "\n")
    return qrels, shallow, runs


def test_scores_under_both_qrels_and_their_agreement(files):
    qrels, shallow, runs = files
    args = ["agree", str(qrels), str(shallow), *map(str, runs), "-m", "AP", "-m", "P@10",
            "--bootstrap", "300", "--seed", "2", "-f", "json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    obj = json.loads(result.stdout)
    a, b = read_qrels(qrels), read_qrels(shallow)
    common = [q for q in a if q in b]
    assert obj["queries"] == len(common) and obj["runs"] == [r.stem for r in runs]
    for measure in ("AP", "P@10"):
        entry = obj["per_measure"][measure]
        for side, judged in (("reference", a), ("other", b)):
            subset = {q: judged[q] for q in common}
            for run in runs:
                want = evaluate(read_run(run), subset, [measure], all_queries=True)
                assert entry[side][run.stem] == pytest.approx(want.aggregate[measure], abs=1e-12)
        ref = [entry["reference"][r.stem] for r in runs]
        oth = [entry["other"][r.stem] for r in runs]
        assert entry["tau_b"] == pytest.approx(stats.kendalltau(ref, oth).statistic, abs=1e-12)
        assert entry["spearman"] == pytest.approx(stats.spearmanr(ref, oth).statistic, abs=1e-12)
        point = ranking_agreement(entry["reference"], entry["other"]).to_json()
        assert {k: entry[k] for k in point} == point
        for interval in entry["intervals"].values():
            assert interval is None or interval[0] <= interval[1]
    assert CliRunner().invoke(app, args).stdout == result.stdout  # seeded


def test_table_and_csv(files):
    qrels, shallow, runs = files
    base = ["agree", str(qrels), str(shallow), *map(str, runs), "--bootstrap", "100"]
    table = CliRunner().invoke(app, base)
    assert table.exit_code == 0, table.stderr
    assert "Kendall's tau-b" in table.stdout and "tau_AP" in table.stdout
    assert "(the reference)" in " ".join(table.stdout.split())
    rows = CliRunner().invoke(app, [*base, "-f", "csv"]).stdout.splitlines()
    assert rows[0] == "measure,statistic,value,low,high"
    assert [r.split(",")[1] for r in rows[1:]] == [
        "tau", "tau_b", "tau_ap", "tau_ap_b", "rbo", "pearson", "spearman", "swap",
    ]  # fmt: skip


def test_bad_inputs_one_line_exit_2(files, tmp_path):
    qrels, shallow, runs = files
    other = tmp_path / "other.txt"
    other.write_text("elsewhere 0 D1 1\nelsewhere 0 D2 0\n")
    cases = [
        (["agree", str(qrels), str(shallow), *map(str, runs[:2])], "at least 3 runs"),
        (["agree", str(qrels), str(other), *map(str, runs)], "share no query"),
        (["agree", str(qrels), str(shallow), *map(str, runs), "--rbo-p", "1"], "persistence"),
        (["agree", str(qrels), str(shallow), *map(str, runs), "--ci", "2"], "--ci 2.0"),
    ]
    for args, words in cases:
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.stderr
        assert words in result.stderr and result.stderr.count("\n") == 1


def test_the_intervals_cover_the_point_for_a_noisy_copy(files):
    qrels, shallow, runs = files
    obj = json.loads(
        CliRunner()
        .invoke(app, ["agree", str(qrels), str(shallow), *map(str, runs), "-f", "json"])
        .stdout
    )
    entry = obj["per_measure"]["AP"]
    low, high = entry["intervals"]["pearson"]
    assert low <= entry["pearson"] <= high
    assert np.isfinite(entry["rbo"]) and entry["rbo_p"] == 0.9


def test_a_run_with_no_query_in_common_is_named_by_agree_and_judgments_check(files, tmp_path):
    """Issue 42 item 14: with several runs, 'no query in common between the run and the
    qrels' did not say which run."""
    qrels, shallow, runs = files
    stray = tmp_path / "stray.trec"
    stray.write_text("zz1 Q0 D1 1 2.0 s\nzz1 Q0 D2 2 1.0 s\n")
    result = CliRunner().invoke(app, ["agree", str(qrels), str(shallow), *map(str, runs[:3]),
                                      str(stray), "--bootstrap", "0"])  # fmt: skip
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "no query in common between run stray and the qrels" in result.stderr
    labels = tmp_path / "labels.csv"
    first = read_qrels(qrels)
    qid = next(iter(first))
    rows = [f"{qid},{d},judge,{5 if g > 0 else 1},0.5" for d, g in list(first[qid].items())[:4]]
    labels.write_text("query_id,doc_id,worker_id,label,probability\n" + "\n".join(rows) + "\n")
    args = ["judgments", "check", str(labels), "--against", str(qrels), *map(str, runs[:3]),
            str(stray), "--bootstrap", "0"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "no query in common between run stray and the qrels" in result.stderr


def test_identical_runs_are_named_in_a_warning_by_agree_and_compare(files, tmp_path):
    """From the new user's walk: the docs' own `export ir-metadata` path, matched by the docs'
    glob runs/sample/*.test.trec, ranked as a second system without a word. Here a copy with
    its lines reordered and a comment on top."""
    qrels, shallow, runs = files
    lines = runs[1].read_text().splitlines(keepends=True)
    copy = tmp_path / "copy.trec"
    copy.write_text("# a copy\n" + "".join(reversed(lines)))
    near = tmp_path / "near.trec"  # one score changed: another run
    near.write_text("".join(lines[:-1]) + lines[-1].replace(lines[-1].split()[4], "-5.5"))
    given = [*map(str, runs[:3]), str(copy), str(near)]
    warning = (f"warning: runs {runs[1].stem} and copy are identical (the same documents with "
               "the same scores for every query): one system counted 2 times")  # fmt: skip
    for args in (["agree", str(qrels), str(shallow), *given, "--bootstrap", "0"],
                 ["compare", str(qrels), *given, "--bootstrap", "0"]):  # fmt: skip
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.stderr
        said = " ".join(result.stderr.split())
        assert warning in said and said.count("are identical") == 1, result.stderr
        assert "near" not in said.split("are identical")[0]
    result = CliRunner().invoke(app, ["agree", str(qrels), str(shallow), *map(str, runs)])
    assert "identical" not in result.stderr


def test_a_run_the_reference_never_judges_is_refused_one_the_shallow_qrels_miss_is_not(
    files, tmp_path
):
    """Issue 42 item 5a in agree: a run of another collection (no sidecar) gave all-zero means.
    Against the reference only: a run no document of which the shallow qrels judge is what
    pool-bias studies measure."""
    qrels, shallow, runs = files
    lines = runs[1].read_text().splitlines(keepends=True)
    foreign = tmp_path / "foreign.trec"
    foreign.write_text("".join(" ".join(f[:2] + ["X" + f[2]] + f[3:]) + "\n"
                               for f in (line.split() for line in lines)))  # fmt: skip
    args = ["agree", str(qrels), str(shallow), *map(str, runs[:3]), str(foreign), "--bootstrap",
            "0"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"error: {foreign}: none of the ") and "judged anywhere" in (
        result.stderr
    )
    assert CliRunner().invoke(app, [*args, "--allow-unjudged"]).exit_code == 0
    # the shallow qrels judge none of this run's documents: scored, 0 under them
    judged_b = {(f[0], f[2]) for f in (line.split() for line in shallow.read_text().splitlines())}
    unseen = tmp_path / "unseen.trec"
    unseen.write_text("".join(line for line in lines if tuple(line.split()[0:3:2]) not in judged_b))
    result = CliRunner().invoke(app, ["agree", str(qrels), str(shallow), *map(str, runs[:3]),
                                      str(unseen), "--bootstrap", "0", "-f", "json"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["per_measure"]["AP"]["other"]["unseen"] == 0.0
