"""cmrkit's own measures of issue 40 (evaluation/measures/own.py): AUC and AUC_micro against
scikit-learn's roc_auc_score on real Lucene runs of the sample, arboEL's mention recall@k by
hand and on a real run, the refusals, and how `eval` marks them as cmrkit's own."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from cmrkit.cli import app
from cmrkit.errors import CmrkitError
from cmrkit.evaluation import by_group, evaluate
from cmrkit.trec import read_qrels, read_run

metrics = pytest.importorskip("sklearn.metrics")


RUNS = ("bm25", "fields-doc")
SYSTEMS = (("bm25",), ("fields", "--preset", "doc"))


def _eval(*args):
    return CliRunner().invoke(app, ["eval", *map(str, args)])


def _invoke(*args):
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output


def run_paths(root):
    return [root / "runs" / "sample" / f"{r}.test.trec" for r in RUNS]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The sample's real Lucene runs (BM25, fields), its gold qrels, and two qrels that judge
    non-relevant units: every annotated unit judged against every 4th test query (complete:
    the gold holds every mention of each cluster), and the runs' depth-5 pool judged by the
    gold (some queries then have no non-relevant judgment)."""
    root = tmp_path_factory.mktemp("sample")
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    try:
        _invoke("build-collection")
        _invoke("index", "--no-entities", "--quiet")
        for system in SYSTEMS:
            _invoke("run", *system, "--quiet")
    finally:
        mp.undo()
    gold = read_qrels(root / "qrels" / "sample.test.txt")
    with gzip.open(root / "collections" / "sample" / "corpus.jsonl.gz", "rt") as f:
        annotated = [r["id"] for r in map(json.loads, f) if r["kind"] == "annotated"]
    own = {}
    for line in (root / "collections" / "sample" / "topics.jsonl").read_text().splitlines():
        t = json.loads(line)
        own[t["qid"]] = t["unit"]
    out = tmp_path_factory.mktemp("auc")
    complete = out / "complete.txt"
    complete.write_text(
        "".join(
            f"{q} 0 {d} {1 if d in gold[q] else 0}\n"
            for q in sorted(gold)[::4]  # a quarter of the queries keeps the test in seconds
            for d in annotated
            if d != own[q]
        )
    )
    pooled = out / "pooled.txt"
    lines = []
    runs = [read_run(path) for path in run_paths(root)]
    for q in sorted(gold):
        seen = set()
        for run in runs:
            seen.update(d for d, _ in _ranked(run.get(q, {}))[:5])
        lines += [f"{q} 0 {d} {1 if d in gold[q] else 0}\n" for d in sorted(seen)]
    pooled.write_text("".join(lines))
    return root, complete, pooled


def _ranked(scores: dict[str, float]) -> list[tuple[str, float]]:
    """trec_eval's order: score descending, ties by docno descending."""
    by_docno = sorted(scores.items(), key=lambda x: x[0], reverse=True)
    return sorted(by_docno, key=lambda x: -x[1])


def _sklearn_auc(run, qrels, qids, pooled: bool, depth: int | None = None):
    """roc_auc_score over each query's judged units (grade >= 0), an unretrieved one scored
    below every score of the run; per query, or over every query's pairs at once."""
    lowest = min(s for q in run.values() for s in q.values()) - 1.0
    labels, scores, per_query = [], [], {}
    for q in qids:
        ranked = _ranked(run.get(q, {}))
        kept = dict(ranked[:depth] if depth else ranked)
        y = [1 if g >= 1 else 0 for d, g in qrels[q].items() if g >= 0]
        s = [kept.get(d, lowest) for d, g in qrels[q].items() if g >= 0]
        labels += y
        scores += s
        if 0 < sum(y) < len(y):
            per_query[q] = metrics.roc_auc_score(y, s)
    if pooled:
        return metrics.roc_auc_score(labels, scores)
    return per_query


@pytest.mark.parametrize("name", RUNS)
def test_auc_equals_sklearn_on_real_runs(sample, name):
    root, complete, _ = sample
    run_path = root / "runs" / "sample" / f"{name}.test.trec"
    run, qrels = read_run(run_path), read_qrels(complete)
    result = evaluate(run, qrels, ["AUC", "AUC_micro"])
    qids = sorted(set(run) & set(qrels))
    want = _sklearn_auc(run, qrels, qids, pooled=False)
    assert set(want) == set(qids)  # every query has both judgments here
    got = {q: result.per_query[q]["AUC"] for q in qids}
    assert max(abs(got[q] - want[q]) for q in qids) < 1e-12
    assert result.aggregate["AUC"] == pytest.approx(np.mean(list(want.values())), abs=1e-12)
    micro = _sklearn_auc(run, qrels, qids, pooled=True)
    assert result.aggregate["AUC_micro"] == pytest.approx(micro, abs=1e-12)
    assert {result.per_query[q]["AUC_micro"] for q in qids} == {result.aggregate["AUC_micro"]}
    # -M 5: units below rank 5 count as not retrieved
    cut = evaluate(run, qrels, ["AUC"], depth=5)
    want5 = _sklearn_auc(run, qrels, qids, pooled=False, depth=5)
    assert max(abs(cut.per_query[q]["AUC"] - want5[q]) for q in qids) < 1e-12
    assert cut.aggregate["AUC"] < result.aggregate["AUC"]


def test_auc_by_hand_with_ties_unretrieved_and_missing_queries():
    run = {"q1": {"a": 3.0, "b": 2.0, "c": 2.0, "x": 9.0}, "q3": {"z": 1.0}}
    qrels = {
        # a above n2 and n3, tied with nothing; c ties n1; r2 unretrieved ties n3 (half)
        "q1": {"a": 1, "c": 1, "r2": 1, "b": 0, "n3": 0, "u": -1},
        "q2": {"p": 1, "n": 0},  # not in the run: everything ties below, 0.5
        "q3": {"z": 1, "y": 0},
    }
    # pairs (rel, non): (a,b)=1 (a,n3)=1 (c,b)=.5 (c,n3)=1 (r2,b)=0 (r2,n3)=.5 -> 4/6
    result = evaluate(run, qrels, ["AUC", "AUC_micro"], all_queries=True)
    assert result.per_query["q1"]["AUC"] == pytest.approx(4 / 6)
    assert result.per_query["q2"]["AUC"] == 0.5 and result.per_query["q3"]["AUC"] == 1.0
    assert result.aggregate["AUC"] == pytest.approx((4 / 6 + 0.5 + 1.0) / 3)
    # pooled: every judged pair of every query in one ranking (the 'x' judged nowhere)
    labels = [1, 1, 1, 0, 0, 1, 0, 1, 0]
    scores = [3.0, 2.0, -9, 2.0, -9, -9, -9, 1.0, -9]
    assert result.aggregate["AUC_micro"] == pytest.approx(metrics.roc_auc_score(labels, scores))
    # without -c the query missing from the run is not averaged
    assert evaluate(run, qrels, ["AUC"]).queries == 2


def test_mention_recall_by_hand_and_beside_recall():
    run = {
        "q1": {"r1": 5.0, "r2": 4.0, "n1": 3.0, "r3": 2.0},
        "q2": {"n1": 5.0, "n2": 4.0, "r1": 3.0},
    }
    qrels = {
        "q1": {"r1": 1, "r2": 1, "r3": 1, "r4": 1, "n1": 0},  # |cluster| - 1 = 4
        "q2": {"r1": 2},
        "q3": {"r9": 1},  # not retrieved at all
    }
    result = evaluate(
        run, qrels, ["MentionRecall@2", "MentionRecall@3", "MentionRecall@64", "R@2"],
        all_queries=True,
    )  # fmt: skip
    q1, q2, q3 = (result.per_query[q] for q in ("q1", "q2", "q3"))
    assert q1["MentionRecall@2"] == 1.0 and q1["R@2"] == 0.5  # 2 hits over min(4, 2)
    assert q1["MentionRecall@3"] == pytest.approx(2 / 3)  # r3 is 4th
    assert q1["MentionRecall@64"] == 0.75  # 3 hits over min(4, 64)
    assert q2["MentionRecall@2"] == 0.0 and q2["MentionRecall@3"] == 1.0  # 1 relevant: over 1
    assert q3["MentionRecall@64"] == 0.0
    assert result.aggregate["MentionRecall@2"] == pytest.approx(1 / 3)


def test_mention_recall_on_a_real_run_is_recall_over_the_capped_cluster(sample):
    root, _, _ = sample
    run = read_run(root / "runs" / "sample" / "bm25.test.trec")
    qrels = read_qrels(root / "qrels" / "sample.test.txt")
    result = evaluate(run, qrels, ["MentionRecall@5", "R@5", "MentionRecall@64", "R@64"])
    for q, row in result.per_query.items():
        top = [d for d, _ in _ranked(run[q])][:5]
        n = sum(1 for g in qrels[q].values() if g >= 1)
        hits = sum(1 for d in top if qrels[q].get(d, 0) >= 1)
        assert row["MentionRecall@5"] == pytest.approx(hits / min(n, 5))
        assert row["R@5"] == pytest.approx(hits / n)
        if n <= 64:
            assert row["MentionRecall@64"] == row["R@64"]
    assert result.aggregate["MentionRecall@5"] > result.aggregate["R@5"]


def test_auc_refuses_qrels_without_non_relevant_judgments_in_one_line(sample):
    root, _, pooled = sample
    run = root / "runs" / "sample" / "bm25.test.trec"
    for measure in ("AUC", "AUC_micro"):
        r = _eval(run, root / "qrels" / "sample.test.txt", "-m", measure, "-m", "AP")
        assert r.exit_code == 2, r.output
        assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1
        assert "judge none" in r.stderr and "not 0.5 or 1" in r.stderr
    # the depth-5 pool judged by the gold: some queries have relevant units only
    r = _eval(run, pooled, "-m", "AUC")
    assert r.exit_code == 2 and "AUC is undefined for" in r.stderr and "AUC_micro" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = _eval(run, pooled, "-m", "AUC_micro", "-f", "json")
    assert r.exit_code == 0, r.output
    qrels = read_qrels(pooled)
    want = _sklearn_auc(read_run(run), qrels, sorted(qrels), pooled=True)
    assert json.loads(r.stdout)["measures"]["AUC_micro"] == pytest.approx(want, abs=1e-12)
    # a pooled value has no mean per group: refused, not averaged
    result = evaluate(read_run(run), qrels, ["AUC_micro"])
    with pytest.raises(CmrkitError, match="none per group"):
        by_group(result, {q: q[:2] for q in result.per_query})


def test_eval_marks_them_as_cmrkits_own(sample):
    root, complete, _ = sample
    run = root / "runs" / "sample" / "bm25.test.trec"
    r = _eval(run, complete, "-m", "AUC", "-m", "MentionRecall@64", "-m", "R@64")
    assert r.exit_code == 0, r.output
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in r.stdout.splitlines() if line.startswith("│")}  # fmt: skip
    assert rows == {"AUC": "(cmrkit's own)", "MentionRecall@64": "(cmrkit's own)",
                    "R@64": "recall_64"}  # fmt: skip
    helped = _eval("--help").stdout.replace("\n", " ")
    assert "cmrkit's own, not trec_eval's" in " ".join(helped.split())
    assert "AUC_micro" in helped and "MentionRecall@k" in " ".join(helped.split())
    # with trec_eval's options they are refused as cmrkit's own
    r = _eval(run, complete, "-m", "AUC", "-J")
    assert r.exit_code == 2 and "cmrkit's own, not trec_eval's" in r.stderr
