"""Inputs that used to give a wrong answer with exit 0, or an error pointing elsewhere: broken
sidecars beside fused runs, a quote left open in a judgments CSV, labels in other scripts'
digits, an empty corpus exported to BEIR, deeply nested JSON, FIFOs among run files, and
paths of the wrong kind. Every case runs the real command (in-process) on real files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pool_fixtures import write_collection, write_run
from retrieval_collection import topic
from retrieval_collection import write_collection as write_retrieval_collection

from cmrkit.errors import CmrkitError


def pool_workspace(root: Path, queries, docnos) -> Path:
    """collections/tiny and a run over it (runs/tiny/r.trec); returns ``root``."""
    write_collection(root / "collections", queries, docnos)
    (root / "runs" / "tiny").mkdir(parents=True)
    write_run(
        root / "runs" / "tiny" / "r.trec",
        {q: [(d, 10.0 - i) for i, d in enumerate(docnos)] for q in queries},
    )
    return root


def one_error(result, code: int = 2) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == code and len(lines) == 1, result.output
    assert lines[0].startswith("error: "), lines
    return lines[0]


# --- 2. sidecars ---------------------------------------------------------------------------


def _two_runs(root: Path) -> tuple[str, str]:
    write_run(root / "a.trec", {"q1": [("d1", 2.0), ("d2", 1.0)]})
    write_run(root / "b.trec", {"q1": [("d2", 2.0), ("d1", 1.0)]})
    return "a.trec", "b.trec"


def test_fuse_refuses_a_broken_sidecar_and_names_it(tmp_path, cli):
    a, b = _two_runs(tmp_path)
    # no sidecars at all: fused (the output named)
    assert cli("run", "fuse", a, b, "-o", "f.trec").exit_code == 0
    (tmp_path / "a.json").write_text('{"collection": ', encoding="utf-8")
    line = one_error(cli("run", "fuse", a, b, "-o", "g.trec"))
    assert line.startswith("error: a.json: malformed JSON"), line
    assert "the run's cmrkit sidecar" in line
    assert not (tmp_path / "g.trec").exists() and not (tmp_path / "g.json").exists()
    # a JSON file that is not a sidecar is ignored, with a note saying so
    (tmp_path / "a.json").write_text('{"notes": "mine"}', encoding="utf-8")
    r = cli("run", "fuse", a, b, "-o", "g.trec")
    assert r.exit_code == 0, r.output
    assert "note: a.json: not a cmrkit sidecar (none of identity" in r.stderr


# --- 3 and 18. judgments CSV ---------------------------------------------------------------


def _judgments(n: int, bad_line: int, bad: str) -> str:
    rows = ["query_id,doc_id,worker_id,label"]
    for i in range(2, n + 1):
        rows.append(bad if i == bad_line else f"q1,d{1 + i % 2},w{i},{1 + i % 5}")
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        (
            'q1,"d1,w0,5',
            "j.csv: line 37: malformed CSV: a quoted field opened on this line is never closed "
            "(it runs to the end of the file); check the quoting",
        ),
        ("q1,d1,w0,\u0665", "j.csv: line 37: label '\u0665' in column label is not one of 1..5"),
        ("q1,d1,w0,\uff15", "j.csv: line 37: label '\uff15' in column label is not one of 1..5"),
    ],
)
def test_a_bad_judgments_line_is_named_where_it_is(tmp_path, cli, bad, expected):
    pool_workspace(tmp_path, ["q1"], ["d1", "d2"])
    assert cli("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl").exit_code == 0
    (tmp_path / "j.csv").write_text(_judgments(80, 37, bad), encoding="utf-8")
    r = cli("judgments", "aggregate", "j.csv", "--pool", "p.jsonl", "-o", "q.txt")
    line = one_error(r)
    assert line.startswith(f"error: {expected}"), line
    assert not (tmp_path / "q.txt").exists()
    # `pool next -j` reads judgments through the same reader
    from cmrkit.judgments.human import read_feedback

    with pytest.raises(CmrkitError) as caught:
        read_feedback([tmp_path / "j.csv"], {}, None)
    assert f"j.csv: {expected.split('j.csv: ', 1)[1]}" in str(caught.value)


def test_a_quoted_field_spanning_lines_reports_its_first_line(tmp_path):
    from cmrkit.judgments.human import read_judgments

    text = 'query_id,doc_id,worker_id,label\nq1,d1,w1,5\nq1,"d\n2",w2,\nq1,d1,w3,4\n'
    (tmp_path / "j.csv").write_text(text, encoding="utf-8")
    with pytest.raises(CmrkitError, match=r"j.csv: line 3: label '' in column label"):
        read_judgments(tmp_path / "j.csv")


# --- 4. export beir --------------------------------------------------------------------------


def test_export_beir_refuses_an_empty_corpus(tmp_path, cli):
    context = "An earthquake struck the coast."
    topics = [topic("q1", "test", "earthquake", context, "P:a1")]
    write_retrieval_collection(tmp_path, "empty", [], topics, {"test": {"q1": ["P:a1"]}})
    r = cli("export", "beir", "collections/empty", "-o", "beir")
    line = one_error(r)
    assert line.startswith("error: collections/empty/corpus.jsonl.gz: the corpus holds no units")
    assert not (tmp_path / "beir").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# --- 19. deep JSON -----------------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


def test_deep_json_is_refused_naming_the_file(tmp_path, cli):
    (tmp_path / "deep.json").write_text(DEEP, encoding="utf-8")
    line = one_error(cli("eval-coref", "deep.json", "deep.json"))
    assert line.startswith("error: deep.json: JSON nested more than about"), line
    # `cluster --key` reads its key through the same reader
    from cmrkit.collection.clusters import read_clustering

    with pytest.raises(CmrkitError, match=r"deep.json: JSON nested more than about"):
        read_clustering(tmp_path / "deep.json")


def test_status_reads_past_a_deep_manifest(tmp_path, cli):
    pool_workspace(tmp_path, ["q1"], ["d1"])
    (tmp_path / "collections" / "tiny" / "manifest.json").write_text(DEEP, encoding="utf-8")
    r = cli("status")
    assert r.exit_code == 0, r.output
    assert "nested too deeply" not in r.output


# --- 20. FIFOs where a folder scan looks ----------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_status_never_opens_a_fifo(tmp_path):
    pool_workspace(tmp_path, ["q1"], ["d1"])
    runs = tmp_path / "runs" / "tiny"
    os.mkfifo(runs / "fifo.test.trec")  # a run file's name, and a sidecar's
    os.mkfifo(runs / "r.json")
    (tmp_path / "pools").mkdir()
    os.mkfifo(tmp_path / "pools" / "p.jsonl")
    os.mkfifo(tmp_path / "pools" / "j.csv")
    done = subprocess.run(
        [sys.executable, "-m", "cmrkit", "status"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
        capture_output=True,
        text=True,
        timeout=60,  # it used to wait for a writer for ever
    )
    assert done.returncode == 0, done.stderr
    assert "fifo" not in done.stdout
    assert "r.trec" in done.stdout or " r " in done.stdout or "r\n" in done.stdout
