"""Inputs that used to end in a traceback: deep JSON, byte-order marks, undecodable text, bad
judgment files, absurd option values; each one line naming the file, line and field.

The real components run: the CLI as its own process, real signals and file systems (see
fault_tools)."""

from __future__ import annotations

import pytest
from fault_tools import (
    pool_workspace,
)
from pool_fixtures import write_qrels, write_run

# === 6. every input a traceback-free answer =================================================


def test_deeply_nested_json_is_one_line(tmp_path, cli):
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "pool.jsonl").write_text('{"format": ' + deep + "}\n")
    r = cli("pool", "export", "pool.jsonl", "-f", "jsonl", "-o", "t.jsonl")
    assert r.exit_code == 2 and "pool.jsonl: line 1: JSON nested more than" in r.output, r.output
    (tmp_path / "wec.json").write_text(deep)
    r = cli("build-collection", "-i", "wec.json")
    assert r.exit_code == 2 and "wec.json" in r.output and "nested" in r.output, r.output
    pool_workspace(tmp_path / "w", ["q1"], ["d1"])
    (tmp_path / "w" / "topics.jsonl").write_text('{"qid": ' + deep + "}\n")
    r = cli(
        "pool",
        "create",
        "w/runs/tiny/r.trec",
        "--collection",
        "w/collections/tiny",
        "--topics",
        "w/topics.jsonl",
        "-o",
        "p.jsonl",
    )
    assert r.exit_code == 2 and "topics.jsonl: line 1" in r.output, r.output


def test_a_byte_order_mark_is_accepted_never_part_of_a_query_id(tmp_path, cli):
    write_run(tmp_path / "r.trec", {"q1": [("d1", 2.0), ("d2", 1.0)], "q2": [("d1", 1.0)]})
    write_qrels(tmp_path / "q.txt", {"q1": {"d1": 1}, "q2": {"d2": 1}})
    plain = cli("eval", "r.trec", "q.txt", "-m", "AP", "-q", "-f", "csv")
    for name in ("r.trec", "q.txt"):
        (tmp_path / f"bom-{name}").write_bytes(b"\xef\xbb\xbf" + (tmp_path / name).read_bytes())
    marked = cli("eval", "bom-r.trec", "bom-q.txt", "-m", "AP", "-q", "-f", "csv")
    assert marked.exit_code == 0 and marked.stdout == plain.stdout
    assert "\ufeff" not in marked.stdout
    judgments = "\ufeffquery_id,doc_id,worker_id,label\nq1,d1,w,5\n"
    (tmp_path / "j.csv").write_text(judgments, encoding="utf-8")
    from cmrkit.judgments.human import read_judgments

    assert [j.qid for j in read_judgments(tmp_path / "j.csv")] == ["q1"]


def test_undecodable_text_names_its_line(tmp_path, cli):
    (tmp_path / "r.trec").write_bytes(b"q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\nq\xff1 Q0 d3 3 0.5 t\n")
    write_qrels(tmp_path / "q.txt", {"q1": {"d1": 1}})
    r = cli("eval", "r.trec", "q.txt")
    assert r.exit_code == 2 and "r.trec: line 3: not UTF-8 text (byte 0xff)" in r.output, r.output
    (tmp_path / "u16.txt").write_bytes("q1 0 d1 1\n".encode("utf-16"))
    r = cli("eval", "r.trec", "u16.txt")
    assert r.exit_code == 2 and "UTF-16" in r.output, r.output


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "empty judgments file"),
        ("query_id,doc_id,worker_id,label\n", "no judgments in the file"),
        ("query_id,doc_id,worker_id,label,label\nq1,d1,w,5,4\n", "'label' appears more than once"),
        (
            'query_id,doc_id,worker_id,label\nq1,d1,w,5\nq1,"' + "x" * 200_000 + '",w,5\n',
            "line 3: malformed CSV (field larger than field limit",
        ),
        ("query_id,doc_id,worker_id,label\nq1,d1,w,5,extra\n", "line 2: more fields than"),
    ],
)
def test_bad_judgment_files_are_one_line(tmp_path, cli, content, expected):
    pool_workspace(tmp_path, ["q1"], ["d1"])
    assert cli("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl").exit_code == 0
    (tmp_path / "j.csv").write_text(content, encoding="utf-8")
    r = cli("judgments", "aggregate", "j.csv", "--pool", "p.jsonl", "-o", "q.txt")
    assert r.exit_code == 2 and expected in r.output, r.output
    assert not (tmp_path / "q.txt").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("eval", "r.trec", "q.txt", "-m", "P@" + "9" * 30), "cutoff must be an integer from 1"),
        (
            (
                "judgments",
                "aggregate",
                "j.csv",
                "--pool",
                "p.jsonl",
                "-o",
                "o.txt",
                "--max-assessors",
                str(10**11),
            ),
            "--max-assessors must lie in 1..1000",
        ),
        (
            (
                "judgments",
                "aggregate",
                "j.csv",
                "--pool",
                "p.jsonl",
                "-o",
                "o.txt",
                "--hard-threshold",
                "nan",
            ),
            "--hard-threshold must lie in 0..1",
        ),
        (
            (
                "judgments",
                "aggregate",
                "j.csv",
                "--pool",
                "p.jsonl",
                "-o",
                "o.txt",
                "--min-worker-accuracy",
                "2",
            ),
            "--min-worker-accuracy must lie in 0..1",
        ),
        (
            (
                "judgments",
                "aggregate",
                "j.csv",
                "--pool",
                "p.jsonl",
                "-o",
                "o.txt",
                "--min-relevant",
                "-1",
            ),
            "--min-relevant must be 0 or more",
        ),
        (
            (
                "judgments",
                "simulate",
                "--qrels",
                "q.txt",
                "--pool",
                "p.jsonl",
                "-o",
                "s.csv",
                "--assessors",
                str(10**11),
            ),
            "--assessors must lie in 1..1000",
        ),
        (("build-collection", "--resplit", "train=nan,test=1"), "--resplit ratios must be"),
        (("build-collection", "--resplit", "train=inf,test=1"), "--resplit ratios must be"),
        (
            ("compare", "q.txt", "r.trec", "r2.trec", "--permutations", str(10**15)),
            "--permutations",
        ),
        (("index", "collections/tiny", "--threads", "100000"), "--threads must lie in 1..256"),
        (
            (
                "pool",
                "create",
                "runs/tiny/r.trec",
                "-o",
                "x.jsonl",
                "--strategy",
                "rrf",
                "--budget",
                "1",
                "--per-query",
                "--rrf-k",
                "nan",
            ),
            "--rrf-k must lie in 0..1e+06",
        ),
    ],
)
def test_absurd_option_values_are_refused_where_they_enter(tmp_path, cli, args, expected):
    pool_workspace(tmp_path, ["q1"], ["d1"])
    assert cli("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl").exit_code == 0
    write_run(tmp_path / "r.trec", {"q1": [("d1", 1.0)]})
    write_run(tmp_path / "r2.trec", {"q1": [("d1", 2.0)]})
    write_qrels(tmp_path / "q.txt", {"q1": {"d1": 1}})
    (tmp_path / "j.csv").write_text("query_id,doc_id,worker_id,label\nq1,d1,w,5\n")
    r = cli(*args)
    assert r.exit_code == 2 and expected in r.output, r.output


def test_a_missing_input_names_its_near_namesake(tmp_path, cli):
    """From the new user's walk: a path whose name differs by a letter from a file that exists
    gets 'did you mean', for a misspelt file or folder, in every reader that opens inputs (the
    bulk TREC readers, trec_eval's, the line reader, sha256, export ir-metadata)."""
    from cmrkit.fileio import near_namesake

    (tmp_path / "runs" / "sample").mkdir(parents=True)
    run = write_run(tmp_path / "runs/sample/bm25.test.trec", {"q1": [("d1", 2.0), ("d2", 1.0)]})
    write_qrels(tmp_path / "qrels.txt", {"q1": {"d1": 1}})
    assert near_namesake("runs/sample/bm25.tset.trec") == run.relative_to(tmp_path)
    assert near_namesake("run/sample/bm25.test.trec") == run.relative_to(tmp_path)
    assert near_namesake(tmp_path / "run/sampel/bm25.test.trec") == run
    assert near_namesake("runs/sample/other.trec") is None and near_namesake(run) is None
    cases = [
        (("eval", "runs/sample/bm25.tset.trec", "qrels.txt"), "runs/sample/bm25.tset.trec",
         "runs/sample/bm25.test.trec"),
        (("eval", "run/sample/bm25.test.trec", "qrels.txt", "-f", "trec"),
         "run/sample/bm25.test.trec", "runs/sample/bm25.test.trec"),
        (("eval", "runs/sample/bm25.test.trec", "qrel.txt"), "qrel.txt", "qrels.txt"),
        (("compare", "qrels.txt", "runs/sample/bm25.test.trec", "runs/sample/bm26.test.trec"),
         "runs/sample/bm26.test.trec", "runs/sample/bm25.test.trec"),
        (("export", "ir-metadata", "runs/sample/bm25.tst.trec", "-o", "x.trec"),
         "runs/sample/bm25.tst.trec", "runs/sample/bm25.test.trec"),
    ]  # fmt: skip
    for args, typed, meant in cases:
        r = cli(*args)
        assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.output
        assert r.stderr == (f"error: {typed}: file not found (did you mean {meant!r}?); check "
                            "the path\n"), r.stderr  # fmt: skip
    r = cli("eval", "runs/sample/nothing.trec", "qrels.txt")
    assert r.stderr == "error: runs/sample/nothing.trec: file not found; check the path\n"
