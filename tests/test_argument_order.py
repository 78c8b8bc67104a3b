"""Swapped file arguments are told as swapped, with the usage, before any other error, by the
one check (commands/output.check_order) of every command that takes qrels, runs, labels,
judgments or a pool: eval and compare had it; agree, judgments check and judgments aggregate
now share it (issue 42: `agree` said 'expected 4 fields ..., found 6')."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from pool_fixtures import write_collection, write_qrels, write_run

QRELS = {"q1": {"d1": 1, "d2": 0, "d3": 1}, "q2": {"d1": 0, "d4": 1}}


@pytest.fixture
def files(tmp_path, cli):
    """Qrels, a shallower copy, three runs, a labels CSV, a pool (pool create) and its
    judgments CSV."""
    qrels = write_qrels(tmp_path / "qrels.txt", QRELS)
    shallow = write_qrels(tmp_path / "shallow.txt", {"q1": {"d1": 1, "d2": 0}, "q2": {"d4": 1}})
    runs = [
        write_run(
            tmp_path / f"r{i}.trec",
            {q: [(f"d{(i + k) % 4 + 1}", 4.0 - k) for k in range(4)] for q in QRELS},
        )  # fmt: skip
        for i in range(3)
    ]
    labels = tmp_path / "labels.csv"
    with open(labels, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["query_id", "doc_id", "worker_id", "label", "probability"])
        w.writerows([["q1", "d1", "judge", 5, 0.9], ["q1", "d2", "judge", 1, 0.1]])
    coll = write_collection(tmp_path / "collections", list(QRELS), ["d1", "d2", "d3", "d4"])
    pool = tmp_path / "p.jsonl"
    made = cli("pool", "create", runs[0], "--collection", coll, "--depth", "2", "-o", pool)
    assert made.exit_code == 0, made.output
    judged = tmp_path / "judged.csv"
    with open(judged, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["query_id", "doc_id", "worker_id", "label"])
        w.writerows([["q1", "d2", "w1", 5], ["q1", "d3", "w1", 1]])
    return {"qrels": qrels, "shallow": shallow, "runs": runs, "labels": labels, "pool": pool,
            "judged": judged, "tmp": tmp_path}  # fmt: skip


def refused(cli, *args) -> str:
    r = cli(*args)
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1, r.stderr
    return r.stderr


def test_agree_with_a_run_first_says_the_arguments_are_swapped(files, cli):
    q, s, runs = files["qrels"], files["shallow"], files["runs"]
    assert cli("agree", q, s, *runs, "--bootstrap", "0").exit_code == 0
    message = refused(cli, "agree", runs[0], s, q, *runs[1:], "--bootstrap", "0")
    assert f"{runs[0]} looks like a run, {q} looks like qrels: the arguments are swapped" in message
    assert "usage: cmrkit agree QRELS_A QRELS_B RUN RUN RUN" in message
    assert "expected 4 fields" not in message
    # a run where the second qrels go, the runs complete: named, with the usage
    message = refused(cli, "agree", q, runs[0], *runs, "--bootstrap", "0")
    assert f"{runs[0]} looks like a run, not qrels; usage: cmrkit agree" in message


def test_judgments_check_with_its_arguments_swapped(files, cli):
    q, labels, runs = files["qrels"], files["labels"], files["runs"]
    message = refused(cli, "judgments", "check", labels, "--against", runs[0], q, *runs[1:])
    assert f"{runs[0]} looks like a run, {q} looks like qrels: the arguments are swapped" in message
    assert "usage: cmrkit judgments check LABELS --against QRELS" in message
    message = refused(cli, "judgments", "check", q, "--against", labels)
    assert f"{q} looks like qrels, not a CSV; usage: cmrkit judgments check" in message
    # people's labels (a CSV) are a reference too: no refusal of the order
    r = cli("judgments", "check", labels, "--against", labels)
    assert "looks like" not in r.output


def test_judgments_aggregate_with_its_arguments_swapped(files, cli):
    pool, judged, q, tmp = files["pool"], files["judged"], files["qrels"], files["tmp"]
    out = tmp / "out.txt"
    message = refused(cli, "judgments", "aggregate", pool, "--pool", judged, "-o", out)
    assert (
        f"{pool} looks like JSON lines, {judged} looks like a CSV: the arguments are swapped"
        in message
    )
    assert "usage: cmrkit judgments aggregate JUDGMENTS.csv... --pool POOL.jsonl" in message
    message = refused(cli, "judgments", "aggregate", judged, "--pool", pool, "--qrels",
                      files["runs"][0], "-o", out)  # fmt: skip
    assert f"{files['runs'][0]} looks like a run, not qrels" in message
    message = refused(cli, "judgments", "aggregate", q, "--pool", pool, "-o", out)
    assert f"{q} looks like qrels, not a CSV" in message
    assert not out.exists()
    done = cli("judgments", "aggregate", judged, "--pool", pool, "--qrels", q, "-o", out,
               "--min-agree", "1", "--min-unanimous", "1", "--min-relevant", "1")  # fmt: skip
    assert done.exit_code == 0, done.output
    assert Path(out).is_file()
