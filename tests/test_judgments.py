"""`cmrkit judgments aggregate|simulate`: the protocol's rules, worker quality, agreement, filters,
and the simulate -> aggregate round trip scored with infAP."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import pytrec_eval
from pool_fixtures import read_qrels_lines, write_collection, write_qrels, write_run

from cmrkit.judgments.agreement import fleiss_kappa
from cmrkit.judgments.human import Judgment, aggregate, decide, needed_more
from cmrkit.pooling import read_pool


def write_simple(path: Path, rows) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["query_id", "doc_id", "worker_id", "label"])
        w.writerows(rows)
    return path


@pytest.mark.parametrize(
    "n_rel,n_non,min_agree,min_unanimous,label",
    [
        (5, 0, 4, 3, 1),
        (4, 1, 4, 3, 1),
        (1, 4, 4, 3, 0),
        (3, 2, 4, 3, -1),  # majority of 3 < 4
        (3, 0, 4, 3, 1),  # unanimous three
        (0, 3, 4, 3, 0),
        (2, 0, 4, 3, -1),  # unanimous but only two
        (2, 1, 4, 3, -1),
        (2, 2, 4, 3, -1),  # tie
        (3, 3, 2, 3, -1),  # a tie stays unknown even when enough agree
        (0, 0, 4, 3, -1),
    ],
)
def test_decide(n_rel, n_non, min_agree, min_unanimous, label):
    assert decide(n_rel, n_non, min_agree, min_unanimous) == label


@pytest.mark.parametrize(
    "n_rel,n_non,needed",
    [(2, 1, 2), (2, 2, None), (0, 0, 3), (3, 1, 1), (2, 0, 1), (3, 2, None)],
)
def test_needed_more(n_rel, n_non, needed):
    assert needed_more(n_rel, n_non, 4, 3, 5) == needed


def test_fleiss_kappa_hand_computed():
    # Fleiss (1971) as worked on Wikipedia: 10 subjects, 14 raters, 5 categories, kappa 0.210
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert fleiss_kappa(table) == pytest.approx(0.210, abs=5e-4)
    # by hand: P_i = 1, 1, 1/3 -> mean 7/9; p = 5/9, 4/9 -> Pe = 41/81; kappa = 22/40
    assert fleiss_kappa([[3, 0], [0, 3], [2, 1]]) == pytest.approx(0.55)
    assert fleiss_kappa([[3, 0], [3, 0]]) is None  # one category: chance agreement is 1
    assert fleiss_kappa([[1, 0]]) is None  # no item with two ratings


@pytest.fixture
def setup(tmp_path, cli):
    """q1: d01..d06 pooled, d06 outside the sample; q2 and q3: three pairs each."""
    docs = [f"d{i:02d}" for i in range(1, 10)] + ["dK"]
    coll = write_collection(tmp_path / "collections", ["q1", "q2", "q3"], docs)
    run = write_run(
        tmp_path / "r.trec",
        {
            "q1": [(f"d{i:02d}", 10.0 - i) for i in range(1, 7)],
            "q2": [("d01", 3.0), ("d02", 2.0), ("d03", 1.0)],
            "q3": [("d01", 3.0), ("d02", 2.0), ("d03", 1.0)],
        },
    )
    r = cli(
        "pool",
        "create",
        run,
        "--collection",
        coll,
        "--sample",
        "1-5:1.0",
        "-o",
        tmp_path / "p.jsonl",
    )
    assert r.exit_code == 0, r.output
    return tmp_path


def votes(qid, docno, labels, start=1):
    return [(qid, docno, f"w{start + i}", lab) for i, lab in enumerate(labels)]


def test_aggregate_rules_unknowns_and_needs_more(setup, cli):
    tmp = setup
    rows = (
        votes("q1", "d01", [5, 4, 5, 4, 2])  # 4 of 5 relevant -> 1
        + votes("q1", "d02", [1, 2, 3])  # three agree, none dissents -> 0
        + votes("q1", "d03", [4, 5, 1, 2])  # tie -> -1, and one more cannot reach 4
        + votes("q1", "d04", [4, 4, 1])  # 2:1 -> -1, two more could make 4
        + [("q1", "d99", "w1", 5)]  # not in the pool
        + [("q1", "d01", "w1", 1)]  # w1 again: the first vote counts
    )
    judgments = write_simple(tmp / "j.csv", rows)
    known = write_qrels(tmp / "known.txt", {"q1": {"dK": 1}, "q9": {"d01": 1}})
    r = cli(
        "judgments",
        "aggregate",
        judgments,
        "--pool",
        tmp / "p.jsonl",
        "--qrels",
        known,
        "--min-relevant",
        "1",
        "--hard-threshold",
        "1",
        "--needs-more",
        tmp / "more.jsonl",
        "--report",
        tmp / "rep.json",
        "-o",
        tmp / "out.txt",
    )
    assert r.exit_code == 0, r.output
    got = {k: v for k, v in read_qrels_lines(tmp / "out.txt").items() if k[0] == "q1"}
    assert got == {
        ("q1", "d01"): 1,
        ("q1", "d02"): 0,
        ("q1", "d03"): -1,
        ("q1", "d04"): -1,
        ("q1", "d05"): -1,
        ("q1", "d06"): -1,
        ("q1", "dK"): 1,
    }
    assert not any(k[0] == "q9" for k in read_qrels_lines(tmp / "out.txt"))
    more = read_pool(tmp / "more.jsonl")
    assert {(p.qid, p.docno): p.needed for p in more.pairs if p.qid == "q1"} == {
        ("q1", "d04"): 2,
        ("q1", "d05"): 3,
    }
    rep = json.loads((tmp / "rep.json").read_text())
    assert rep["ignored_not_in_pool"] == 1 and rep["duplicate_votes"] == 1
    assert "j.csv:" in rep["ignored_examples"][0] and "d99" in rep["ignored_examples"][0]
    q1 = rep["queries"]["q1"]
    assert q1["incompleteness"] == pytest.approx(4 / 7)
    # pairs with 2+ votes: d01 (4:1), d02 (0:3), d03 (2:2), d04 (2:1); only d02 is unanimous
    assert q1["unanimous"] == pytest.approx(1 / 4)
    assert "ignored" in r.stdout

    # the pairs that need more go to the next round as a pool
    r = cli("pool", "export", tmp / "more.jsonl", "-f", "jsonl", "-o", tmp / "more-tasks.jsonl")
    assert r.exit_code == 0, r.output
    assert len((tmp / "more-tasks.jsonl").read_text().splitlines()) == len(more.pairs)


def test_hard_queries_and_min_relevant(setup, cli):
    tmp = setup
    rows = (
        votes("q1", "d01", [5, 5, 5])
        + votes("q1", "d02", [4, 4, 5])
        + votes("q1", "d03", [1, 1, 1])
        # q2: every pair split -> disagreement 1.0 -> hard
        + votes("q2", "d01", [5, 1, 5])
        + votes("q2", "d02", [1, 5, 1])
        # q3: agreed, but one relevant only
        + votes("q3", "d01", [5, 5, 5])
        + votes("q3", "d02", [1, 1, 1])
        + votes("q3", "d03", [2, 1, 2])
    )
    j = write_simple(tmp / "j.csv", rows)
    r = cli(
        "judgments",
        "aggregate",
        j,
        "--pool",
        tmp / "p.jsonl",
        "--min-relevant",
        "2",
        "--hard-threshold",
        "0.5",
        "-o",
        tmp / "out.txt",
    )
    assert r.exit_code == 0, r.output
    main = read_qrels_lines(tmp / "out.txt")
    hard = read_qrels_lines(tmp / "out.hard.txt")
    assert {q for q, _ in main} == {"q1"}
    assert {q for q, _ in hard} == {"q2"} and hard[("q2", "d01")] == -1
    # without the filters every query is kept
    r = cli(
        "judgments",
        "aggregate",
        j,
        "--pool",
        tmp / "p.jsonl",
        "--min-relevant",
        "0",
        "--hard-threshold",
        "1",
        "-o",
        tmp / "all.txt",
    )
    assert {q for q, _ in read_qrels_lines(tmp / "all.txt")} == {"q1", "q2", "q3"}
    assert (tmp / "all.hard.txt").read_text() == ""


def test_settings_no_pair_can_meet_are_refused_before_anything_is_written(setup, cli):
    """One assessor per pair and the defaults (--min-agree 4, --min-unanimous 3): no pair can
    get a label. Seen: an empty qrels file, exit 0, and the warning blamed --min-relevant. Now
    refused in one line naming --min-unanimous and the single-assessor setting, nothing
    written; --min-unanimous 1 takes each assessor's label; --needs-more (more rounds) goes on."""
    tmp = setup
    pool = read_pool(tmp / "p.jsonl")
    sampled = [(p.qid, p.docno) for p in pool.pairs if p.sampled]
    one = write_simple(
        tmp / "one.csv", [(q, d, "ann", 5 if d in ("d01", "d02") else 2) for q, d in sampled]
    )

    def aggregate_cli(judged, *extra, out="out.txt"):
        return cli(
            "judgments", "aggregate", judged, "--pool", tmp / "p.jsonl", "--min-relevant", "1",
            *extra, "-o", tmp / out,
        )  # fmt: skip

    r = aggregate_cli(one)
    assert r.exit_code == 2, r.output
    err = " ".join(r.stderr.split())
    assert "no pair can get a label: the judgments give each pair at most 1 assessor(s)" in err
    assert "a label needs --min-unanimous 3 assessors, all agreeing (--min-agree 4)" in err
    assert "pass --min-unanimous 1" in err and "--min-relevant" not in err
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp / "out.txt").exists() and not (tmp / "out.hard.txt").exists()
    with pytest.raises(Exception, match="at most 1 assessor"):
        aggregate(read_judgments_file(one), pool, min_relevant=1)

    # the setting the message gives: every pair takes its one assessor's label
    r = aggregate_cli(one, "--min-unanimous", "1", out="single.txt")
    assert r.exit_code == 0 and "warning" not in r.output, r.output
    got = read_qrels_lines(tmp / "single.txt")
    assert {k: v for k, v in got.items() if k in set(sampled)} == {
        (q, d): int(d in ("d01", "d02")) for q, d in sampled
    }
    assert got[("q1", "d06")] == -1  # outside the sample: unjudged

    # more rounds can still decide them: written, the next round's pairs in --needs-more
    r = aggregate_cli(one, "--needs-more", tmp / "more.jsonl", out="round1.txt")
    assert r.exit_code == 0, r.output
    said = " ".join(r.output.split())
    assert "no pair has enough assessors for a label yet (at most 1; --min-agree 4, " in said
    more = read_pool(tmp / "more.jsonl")
    assert {(p.qid, p.docno): p.needed for p in more.pairs} == dict.fromkeys(sampled, 2)
    # ... unless --max-assessors keeps every pair below a label
    r = aggregate_cli(one, "--needs-more", tmp / "m2.jsonl", "--max-assessors", "2", out="r2.txt")
    assert r.exit_code == 2 and "at most 2 with more rounds (--max-assessors)" in r.stderr
    assert not (tmp / "r2.txt").exists() and not (tmp / "m2.jsonl").exists()

    # two assessors per pair: the message names what two can reach
    two = write_simple(tmp / "two.csv", [(q, d, w, 5) for q, d in sampled for w in ("ann", "bob")])
    r = aggregate_cli(two, out="two.txt")
    assert r.exit_code == 2 and "pass --min-unanimous 2 for the pairs whose 2" in r.stderr
    r = aggregate_cli(two, "--min-agree", "2", out="two.txt")
    assert r.exit_code == 0 and set(read_qrels_lines(tmp / "two.txt").values()) == {1, -1}


def read_judgments_file(path: Path):
    from cmrkit.judgments.human import read_judgments

    return list(read_judgments(path))


def test_worker_accuracy_on_gold(setup):
    pool = read_pool(setup / "p.jsonl")
    gold = {("q1", "g1"): 1, ("q1", "g2"): 0}

    def j(worker, docno, label):
        return Judgment("q1", docno, worker, label, "x.csv", 1)

    judgments = [
        j("w1", "g1", 5),
        j("w1", "g2", 1),  # right twice
        j("w2", "g1", 4),
        j("w2", "g2", 4),  # right once
        j("w3", "g1", 5),
        j("w3", "g2", 2),
        j("w4", "g1", 1),
        j("w4", "g2", 5),  # wrong twice
        j("w1", "d01", 5),
        j("w2", "d01", 5),
        j("w3", "d01", 5),
        j("w4", "d01", 1),
    ]
    kept = aggregate(judgments, pool, gold=gold, min_relevant=0, hard_threshold=None)
    acc = {w: v["accuracy"] for w, v in kept.report["workers"].items()}
    assert acc == {"w1": 1.0, "w2": 0.5, "w3": 1.0, "w4": 0.0}
    assert kept.qrels["q1"]["d01"] == -1  # 3:1 is not 4 agreeing
    assert kept.report["ignored_not_in_pool"] == 0  # gold answers are not strays
    strict = aggregate(
        judgments, pool, gold=gold, min_relevant=0, hard_threshold=None, min_worker_accuracy=0.5
    )
    assert (
        strict.report["workers"]["w4"]["dropped"] and not strict.report["workers"]["w2"]["dropped"]
    )
    assert strict.qrels["q1"]["d01"] == 1  # the three left agree
    assert strict.report["dropped_worker_judgments"] == 1


def test_bad_judgment_files(setup, cli):
    tmp = setup
    bad = write_simple(tmp / "bad.csv", [("q1", "d01", "w1", 4), ("q1", "d02", "w1", 7)])
    r = cli("judgments", "aggregate", bad, "--pool", tmp / "p.jsonl", "-o", tmp / "out.txt")
    assert r.exit_code == 2
    assert "bad.csv: line 3:" in r.stderr and "'7'" in r.stderr and "1..5" in r.stderr
    assert not (tmp / "out.txt").exists() and not (tmp / "out.hard.txt").exists()
    stray = write_simple(tmp / "stray.csv", [("x1", "d01", "w1", 4)])
    r = cli("judgments", "aggregate", stray, "--pool", tmp / "p.jsonl", "-o", tmp / "out.txt")
    assert r.exit_code == 2 and "stray.csv: line 2:" in r.stderr and "another pool" in r.stderr
    r = cli(
        "judgments",
        "simulate",
        "--qrels",
        write_qrels(tmp / "o.txt", {"x1": {"d1": 1}}),
        "--pool",
        tmp / "p.jsonl",
        "-o",
        tmp / "sim.csv",
    )
    assert r.exit_code == 2 and "another collection" in r.stderr
    (tmp / "cols.csv").write_text("query_id,doc_id,label\nq1,d01,4\n")
    r = cli(
        "judgments", "aggregate", tmp / "cols.csv", "--pool", tmp / "p.jsonl", "-o", tmp / "out.txt"
    )
    assert r.exit_code == 2 and "cols.csv: line 1:" in r.stderr and "worker_id" in r.stderr
    (tmp / "mt.csv").write_text("HITId,WorkerId,Answer.p1_label\nH1,W1,4\n")
    r = cli(
        "judgments", "aggregate", tmp / "mt.csv", "--pool", tmp / "p.jsonl", "-o", tmp / "out.txt"
    )
    assert r.exit_code == 2 and "AssignmentStatus" in r.stderr and "Input.p1_pair_id" in r.stderr
    # blind answers need the key, and the key must hold their pair ids
    (tmp / "blind.csv").write_text("pair_id,worker_id,label\nx0123456789,w1,4\n")
    r = cli(
        "judgments",
        "aggregate",
        tmp / "blind.csv",
        "--pool",
        tmp / "p.jsonl",
        "-o",
        tmp / "blind.txt",
    )
    assert r.exit_code == 2 and "blind.csv: line 2:" in r.stderr and "--key" in r.stderr
    assert (
        cli("pool", "export", tmp / "p.jsonl", "-f", "jsonl", "-o", tmp / "t.jsonl").exit_code == 0
    )
    r = cli(
        "judgments",
        "aggregate",
        tmp / "blind.csv",
        "--pool",
        tmp / "p.jsonl",
        "--key",
        tmp / "t.key.tsv",
        "-o",
        tmp / "blind.txt",
    )
    assert r.exit_code == 2 and "pair id x0123456789 is in none of the --key files" in r.stderr
    (tmp / "k.tsv").write_text("pair_id\tquery_id\n")
    r = cli(
        "judgments",
        "aggregate",
        tmp / "blind.csv",
        "--pool",
        tmp / "p.jsonl",
        "--key",
        tmp / "k.tsv",
        "-o",
        tmp / "blind.txt",
    )
    assert r.exit_code == 2 and "k.tsv: line 1:" in r.stderr and "pool export" in r.stderr
    assert not (tmp / "blind.txt").exists()


def test_blind_answers_are_mapped_back_with_the_key_and_its_gold_scores_workers(setup, cli):
    tmp = setup
    gold = write_qrels(tmp / "gold.txt", {"q1": {"dK": 1}, "q2": {"d09": 0}, "q3": {"d09": 0}})
    r = cli(
        "pool",
        "export",
        tmp / "p.jsonl",
        "-f",
        "html",
        "--gold",
        gold,
        "--gold-per-hit",
        "1",
        "--per-hit",
        "3",
        "-o",
        tmp / "page.html",
    )
    assert r.exit_code == 0, r.output
    key = list(csv.DictReader(open(tmp / "page.key.tsv", encoding="utf-8"), delimiter="\t"))
    assert any(k["gold"] for k in key) and all(k["pair_id"] not in k["doc_id"] for k in key)
    rows = ["pair_id,worker_id,label"]
    for k in {k["pair_id"]: k for k in key}.values():
        truth = 5 if (k["gold"] == "1" or k["doc_id"] in ("d01", "d02")) else 1
        rows.append(f"{k['pair_id']},good,{truth}")
        wrong = 6 - truth if k["gold"] else truth  # right on pool pairs, wrong on gold
        rows.append(f"{k['pair_id']},sloppy,{wrong}")
    (tmp / "answers.csv").write_text("\n".join(rows) + "\n")
    args = ["--pool", tmp / "p.jsonl", "--min-agree", "1", "--min-unanimous", "1"]
    args += ["--min-relevant", "0", "--hard-threshold", "1", "--report", tmp / "rep.json"]
    r = cli(
        "judgments",
        "aggregate",
        tmp / "answers.csv",
        "--key",
        tmp / "page.key.tsv",
        "--min-worker-accuracy",
        "0.5",
        *args,
        "-o",
        tmp / "q.txt",
    )
    assert r.exit_code == 0, r.output
    workers = json.loads((tmp / "rep.json").read_text())["workers"]
    assert workers["good"]["accuracy"] == 1.0 and workers["sloppy"]["accuracy"] == 0.0
    assert workers["sloppy"]["dropped"] and workers["good"]["gold"] == len(
        {k["pair_id"] for k in key if k["gold"]}
    )
    qrels = read_qrels_lines(tmp / "q.txt")
    assert qrels[("q1", "d01")] == 1 and qrels[("q1", "d03")] == 0 and qrels[("q2", "d02")] == 1
    assert ("q1", "dK") not in qrels  # gold pairs score workers; they are not pool pairs


def test_old_mturk_layout_with_real_ids_is_still_read(tmp_path):
    from cmrkit.judgments.human import read_judgments

    (tmp_path / "old.csv").write_text(
        "HITId,WorkerId,AssignmentStatus,Input.p1_query_id,Input.p1_doc_id,Answer.p1_label\n"
        "H1,W1,Approved,q1,d01,4\n"
    )
    [j] = read_judgments(tmp_path / "old.csv")
    assert (j.qid, j.docno, j.worker, j.label) == ("q1", "d01", "W1", 4)


def test_mturk_results_round_trip(setup, cli):
    tmp = setup
    r = cli("pool", "export", tmp / "p.jsonl", "-f", "mturk", "--per-hit", "4", "-o", tmp / "mt")
    assert r.exit_code == 0, r.output
    batch = list(csv.DictReader(open(tmp / "mt" / "batch-input.csv", encoding="utf-8")))
    key = {
        r["pair_id"]: (r["query_id"], r["doc_id"])
        for r in csv.DictReader(open(tmp / "mt.key.tsv", encoding="utf-8"), delimiter="\t")
    }
    truth = {("q1", "d01"): 5, ("q1", "d02"): 1, ("q2", "d03"): 4}
    header = ["HITId", "WorkerId", "AssignmentStatus"] + [f"Input.{c}" for c in batch[0]]
    slots = int(max(int(b["n_pairs"]) for b in batch))
    header += [f"Answer.p{i}_label" for i in range(1, slots + 1)]
    header += [f"Answer.p1_label.{v}" for v in range(1, 6)]  # a flattened radio group
    rows = []
    for worker, status in (
        ("A1", "Approved"),
        ("A2", "Submitted"),
        ("A3", "Approved"),
        ("BAD", "Rejected"),
    ):
        for h in batch:
            row = {"HITId": "X" + h["hit_id"], "WorkerId": worker, "AssignmentStatus": status}
            row.update({f"Input.{k}": v for k, v in h.items()})
            for i in range(1, int(h["n_pairs"]) + 1):
                pair = key[h[f"p{i}_pair_id"]]
                label = truth.get(pair, 2) if worker != "BAD" else 5
                if worker == "A3" and i == 1:
                    row.update(
                        {f"Answer.p1_label.{v}": str(v == label).lower() for v in range(1, 6)}
                    )
                else:
                    row[f"Answer.p{i}_label"] = str(label)
            rows.append(row)
    with open(tmp / "results.csv", "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, restval="")
        w.writeheader()
        w.writerows(rows)
    r = cli(
        "judgments",
        "aggregate",
        tmp / "results.csv",
        "--pool",
        tmp / "p.jsonl",
        "--key",
        tmp / "mt.key.tsv",
        "--min-agree",
        "3",
        "--min-relevant",
        "0",
        "--hard-threshold",
        "1",
        "--report",
        tmp / "rep.json",
        "-o",
        tmp / "out.txt",
    )
    assert r.exit_code == 0, r.output
    got = read_qrels_lines(tmp / "out.txt")
    for (qid, docno), p in ((k, v) for k, v in got.items()):
        sampled = not (qid == "q1" and docno == "d06")
        expected = (1 if truth.get((qid, docno), 2) >= 4 else 0) if sampled else -1
        assert p == expected, (qid, docno)
    rep = json.loads((tmp / "rep.json").read_text())
    assert rep["rejected_assignments"] == len(batch)
    assert rep["agreement"]["unanimous"] == 1.0


# --- simulate -> aggregate -> infAP ------------------------------------------------------------


@pytest.fixture
def world(tmp_path, cli):
    """Two queries over 30 documents; the complete truth marks every third document relevant."""
    docs = [f"d{i:02d}" for i in range(30)]
    coll = write_collection(tmp_path / "collections", ["q1", "q2"], docs)
    truth = {
        q: {d: int(i % 3 == k) for i, d in enumerate(docs)} for k, q in enumerate(["q1", "q2"])
    }
    write_qrels(tmp_path / "truth.txt", truth)
    run = write_run(
        tmp_path / "r.trec",
        {
            q: [(d, 100.0 - ((i * 7 + k) % 30)) for i, d in enumerate(docs)]
            for k, q in enumerate(["q1", "q2"])
        },
    )
    return tmp_path, coll, run, truth


def infap(run_path: Path, qrels: dict) -> float:
    from cmrkit.trec import read_run

    res = pytrec_eval.RelevanceEvaluator(qrels, {"infAP"}).evaluate(read_run(run_path))
    return sum(v["infAP"] for v in res.values()) / len(res)


def test_simulate_then_aggregate_recovers_truth(world, cli):
    tmp, coll, run, truth = world
    assert cli("pool", "create", run, "--collection", coll, "-o", tmp / "p.jsonl").exit_code == 0
    r = cli(
        "judgments",
        "simulate",
        "--qrels",
        tmp / "truth.txt",
        "--pool",
        tmp / "p.jsonl",
        "--assessors",
        "3",
        "--noise",
        "0",
        "-o",
        tmp / "sim.csv",
    )
    assert r.exit_code == 0, r.output
    lines = (tmp / "sim.csv").read_text().splitlines()
    assert lines[0] == "query_id,doc_id,worker_id,label" and len(lines) == 1 + 60 * 3
    r = cli(
        "judgments", "aggregate", tmp / "sim.csv", "--pool", tmp / "p.jsonl", "-o", tmp / "q.txt"
    )
    assert r.exit_code == 0, r.output
    got = read_qrels_lines(tmp / "q.txt")
    assert got == {(q, d): rel for q, docs in truth.items() for d, rel in docs.items()}
    assert infap(run, {q: dict(d) for q, d in truth.items()}) == pytest.approx(
        infap(run, {q: {d: v for (qq, d), v in got.items() if qq == q} for q in truth})
    )


def test_noisy_assessors_sampled_pool_and_a_second_round(world, cli):
    tmp, coll, run, truth = world
    r = cli(
        "pool",
        "create",
        run,
        "--collection",
        coll,
        "--depth",
        "20",
        "--sample",
        "1-10:1,11-20:0.5",
        "-o",
        tmp / "p.jsonl",
    )
    assert r.exit_code == 0
    args = [
        "--qrels",
        tmp / "truth.txt",
        "--pool",
        tmp / "p.jsonl",
        "--assessors",
        "3",
        "--noise",
        "0.3",
        "--seed",
        "3",
    ]
    assert cli("judgments", "simulate", *args, "-o", tmp / "a.csv").exit_code == 0
    assert cli("judgments", "simulate", *args, "-o", tmp / "b.csv").exit_code == 0
    assert (tmp / "a.csv").read_bytes() == (tmp / "b.csv").read_bytes()
    rows = list(csv.DictReader(open(tmp / "a.csv", encoding="utf-8")))
    assert len(rows) == 3 * 30  # 20 + 20 pooled per query, 10 + 5 sampled
    assert {int(x["label"]) for x in rows} <= {1, 2, 3, 4, 5}
    flipped = sum((int(x["label"]) >= 4) != bool(truth[x["query_id"]][x["doc_id"]]) for x in rows)
    assert 0.15 < flipped / len(rows) < 0.45

    r = cli(
        "judgments",
        "aggregate",
        tmp / "a.csv",
        "--pool",
        tmp / "p.jsonl",
        "--min-relevant",
        "0",
        "--hard-threshold",
        "1",
        "--needs-more",
        tmp / "more.jsonl",
        "-o",
        tmp / "q1.txt",
    )
    assert r.exit_code == 0, r.output
    first = read_qrels_lines(tmp / "q1.txt")
    pool = read_pool(tmp / "p.jsonl")
    for p in pool.pairs:
        if not p.sampled:
            assert first[(p.qid, p.docno)] == -1
    decided = [(k, v) for k, v in first.items() if v >= 0]
    assert decided and sum(v == truth[q][d] for (q, d), v in decided) / len(decided) > 0.8
    unknown_before = sum(v < 0 for v in first.values())

    more = read_pool(tmp / "more.jsonl")
    assert more.pairs
    assert (
        cli(
            "judgments",
            "simulate",
            "--qrels",
            tmp / "truth.txt",
            "--pool",
            tmp / "more.jsonl",
            "--assessors",
            "2",
            "--noise",
            "0.3",
            "--seed",
            "4",
            "--worker-prefix",
            "round2-",
            "-o",
            tmp / "c.csv",
        ).exit_code
        == 0
    )
    r = cli(
        "judgments",
        "aggregate",
        tmp / "a.csv",
        tmp / "c.csv",
        "--pool",
        tmp / "p.jsonl",
        "--min-relevant",
        "0",
        "--hard-threshold",
        "1",
        "-o",
        tmp / "q2.txt",
    )
    assert r.exit_code == 0
    second = read_qrels_lines(tmp / "q2.txt")
    assert sum(v < 0 for v in second.values()) < unknown_before
    assert (
        0 <= infap(run, {q: {d: v for (qq, d), v in second.items() if qq == q} for q in truth}) <= 1
    )
