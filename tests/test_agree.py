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
