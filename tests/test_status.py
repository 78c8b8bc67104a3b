"""`cmrkit status`: what a working folder holds, read without the JVM or spaCy."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import wec_record, write_json
from typer.testing import CliRunner

from cmrkit.cli import app


def _cli(root: Path, *args):
    cwd = os.getcwd()
    os.chdir(root)
    try:
        return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A collection with an index, two runs, a pool, simulated judgments and pooled qrels."""
    root = tmp_path_factory.mktemp("status")
    storm = "The storm hit the coast on Monday .".split()
    track = "Weather experts tracked the storm for days .".split()
    homes = "The storm left thousands homeless .".split()
    vote = "Voters went to the polls in the election .".split()
    count = "The election count took a week .".split()
    test = write_json(
        root / "Test_x.json",
        [
            wec_record("h1", 3, "d1", storm, [1]),
            wec_record("h2", 3, "d2", track, [4]),
            wec_record("h3", 3, "d3", homes, [1]),
            wec_record("e1", 9, "d4", vote, [7]),
            wec_record("e2", 9, "d5", count, [1]),
        ],
    )
    text = root / "d.txt"
    text.write_text("The storm season starts in June .\nA quiet election day .\n")
    for args in (
        ("build-collection", "-i", test, "-d", text, "-n", "w"),
        ("index", "collections/w", "--no-entities"),
        ("run", "bm25", "collections/w", "--query", "mention", "--name", "bm25"),
        ("run", "bm25", "collections/w", "--query", "mention", "--name", "bm25-b", "--b", "0.3"),
        ("pool", "create", "runs/w/bm25.test.trec", "runs/w/bm25-b.test.trec", "--depth", "3",
         "-o", "pools/w.pool.jsonl"),
        ("judgments", "simulate", "--qrels", "qrels/w.test.txt", "--pool", "pools/w.pool.jsonl",
         "-o", "pools/round1.csv"),
        ("judgments", "aggregate", "pools/round1.csv", "--pool", "pools/w.pool.jsonl",
         "--min-agree", "2", "-o", "qrels/w.pooled.txt"),
    ):  # fmt: skip
        r = _cli(root, *args)
        assert r.exit_code == 0, (args, r.output)
    return root


def test_status_shows_everything_at_80_columns(workdir):
    r = _cli(workdir, "status")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    text = r.stdout
    row = next(line for line in lines if line.startswith("│ w "))
    assert row.split("│")[2].strip() == "test" and "current" in row
    assert "5" in row.split("│")[3]  # queries
    runs = {line.split("│")[1].strip(): line for line in lines if "│ bm25" in line}
    assert set(runs) == {"bm25", "bm25-b"}
    ap = _cli(workdir, "eval", "runs/w/bm25.test.trec", "qrels/w.test.txt", "-m", "AP", "-f",
              "json")  # fmt: skip
    value = json.loads(ap.stdout)["measures"]["AP"]
    cells = [c.strip() for c in runs["bm25"].split("│")]
    assert cells[2:6] == ["bm25", "test", cells[4], "AP"]
    assert cells[6] == f"{value:.4f}" and cells[7] == "5"
    assert "pools/w.pool.jsonl" in text and "pools/round1.csv" in text
    assert "simple" in text
    other = next(line for line in lines if line.startswith("other qrels: "))
    assert "qrels/w.pooled.txt" in other and "w.test.txt" not in other


def test_status_of_one_collection_and_a_stale_index(workdir, tmp_path):
    copy = tmp_path / "collections" / "w"
    copy.mkdir(parents=True)
    for p in (workdir / "collections" / "w").iterdir():
        if p.is_file():
            (copy / p.name).write_bytes(p.read_bytes())
    (copy / "index").symlink_to(workdir / "collections" / "w" / "index")
    with gzip.open(copy / "corpus.jsonl.gz", "at") as f:
        f.write(json.dumps({"id": "D:new", "contents": "x", "kind": "distractor"}) + "\n")
    r = _cli(tmp_path, "status", "w")
    assert r.exit_code == 0, r.output
    assert "stale" in r.stdout and "no runs under runs/w/" in r.stdout
    assert "no pools or judgments under pools/" in r.stdout


def test_status_loads_no_jvm_nor_spacy(workdir):
    code = (
        "import sys; from cmrkit.cli import app; sys.argv = ['cmrkit', 'status']\n"
        "try:\n    app()\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('jnius', 'pyserini', 'spacy', 'torch') if m in sys.modules]\n"
        "print('HEAVY', heavy, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=workdir, capture_output=True, text=True, timeout=120
    )
    assert "HEAVY []" in done.stderr, done.stderr
    assert "current" in done.stdout


def test_status_errors(workdir, tmp_path):
    r = _cli(tmp_path, "status", "nope")
    assert r.exit_code == 2 and r.stderr.startswith("error: ") and "collections/nope" in r.stderr
    empty = _cli(tmp_path, "status")
    assert empty.exit_code == 0 and "no collections under collections/" in empty.stdout
    bad = _cli(workdir, "status", "-m", "AP@x")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1


def _copy(workdir: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(workdir, to, symlinks=True)
    return to


def _runs_rows(stdout: str) -> dict[str, list[str]]:
    rows = [line.split("│") for line in stdout.splitlines() if line.startswith("│ bm25")]
    return {cells[1].strip(): [c.strip() for c in cells[1:-1]] for cells in rows}


def test_headline_over_the_qrels_queries_and_cached_in_the_sidecar(workdir, tmp_path):
    """status averaged each run over the queries it shares with the qrels (runs of one split
    over different sets, unsaid) and read every run again each time, silently."""
    import hashlib

    root = _copy(workdir, tmp_path / "w")
    # a run that lacks query e2: averaged over the 5 qrels queries (0 for e2), and said so
    lines = (root / "runs/w/bm25-b.test.trec").read_text().splitlines(keepends=True)
    (root / "runs/w/bm25-b.test.trec").write_text("".join(x for x in lines if x[:3] != "e2 "))
    r = _cli(root, "status", "w")
    assert r.exit_code == 0, r.output
    rows = _runs_rows(r.stdout)
    for name, answered in (("bm25", 5), ("bm25-b", 4)):
        ev = _cli(root, "eval", f"runs/w/{name}.test.trec", "qrels/w.test.txt", "-m", "AP",
                  "--all-queries", "-f", "json")  # fmt: skip
        assert rows[name][4:7] == [
            "AP",
            f"{json.loads(ev.stdout)['measures']['AP']:.4f}",
            "5" if answered == 5 else "5*",
        ]
    assert "bm25-b ranks 4 of 5" in r.stdout and "bm25 ranks" not in r.stdout
    # the figures are kept in the sidecar, keyed by the qrels' sha256 and the run file
    sidecar = root / "runs/w/bm25.test.json"
    kept = json.loads(sidecar.read_text())["headline"]
    digest = hashlib.sha256((root / "qrels/w.test.txt").read_bytes()).hexdigest()
    assert kept["qrels_sha256"] == digest
    assert kept["trec_eval"] == "10.0"  # the version whose numbers these are
    assert kept["scores"]["AP"][1:] == [5, 5]
    assert json.loads(sidecar.read_text())["identity"]  # the rest of the sidecar is kept
    # read back, not computed: a planted figure shows (nothing else could produce it)
    planted = json.loads(sidecar.read_text())
    planted["headline"]["scores"]["AP"][0] = 0.123456
    sidecar.write_text(json.dumps(planted))
    assert _runs_rows(_cli(root, "status", "w").stdout)["bm25"][5] == "0.1235"
    # other measures join the cache; other qrels, or a run file written again, recompute
    assert _cli(root, "status", "w", "-m", "RR@10").exit_code == 0
    assert set(json.loads(sidecar.read_text())["headline"]["scores"]) == {"AP", "RR@10"}
    run = root / "runs/w/bm25.test.trec"
    run.write_bytes(run.read_bytes())
    os.utime(run, ns=(run.stat().st_atime_ns, run.stat().st_mtime_ns + 10**9))
    assert _runs_rows(_cli(root, "status", "w").stdout)["bm25"][5] == rows["bm25"][5]
    with open(root / "qrels/w.test.txt", "a") as f:
        f.write("h1 0 D:none 0\n")
    _cli(root, "status", "w")
    assert json.loads(sidecar.read_text())["headline"]["qrels_sha256"] != digest


def test_status_shows_progress_while_scoring_runs(workdir, tmp_path):
    root = _copy(workdir, tmp_path / "w")
    env = {**os.environ, "FORCE_COLOR": "1", "COLUMNS": "100"}
    done = subprocess.run(
        [sys.executable, "-m", "cmrkit", "status", "w"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "scoring runs" in done.stderr and "runs/w/bm25-b.test.trec" in done.stderr
    assert "bm25-b" in done.stdout


def test_a_broken_sidecar_is_named_and_the_other_runs_listed(workdir, tmp_path):
    """Sidecars are read by runfile.read_sidecar, as every other command reads them: one that
    cannot be read is named in a note (it was passed over silently), its run listed without
    what it would say, and the other runs as usual."""
    root = _copy(workdir, tmp_path / "w")
    (root / "runs/w/bm25-b.test.json").write_text('{"identity": ', encoding="utf-8")
    r = _cli(root, "status", "w")
    assert r.exit_code == 0, r.output
    assert "note: runs/w/bm25-b.test.json: malformed JSON" in r.stderr
    assert "the run is listed without it" in r.stderr
    rows = _runs_rows(r.stdout)
    assert rows["bm25"][1] == "bm25" and rows["bm25-b"][1] == "?"


def test_blind_answers_and_runs_written_anywhere_are_listed_by_file(workdir, tmp_path):
    """Issue 32 trip 8: the offline page's answers and `assess export`'s CSV
    (pair_id,worker_id,label) were not listed, and `run fuse -o runs/w/fused.trec` was listed
    as its method (rrf)."""
    root = _copy(workdir, tmp_path / "w")
    fuse = ("run", "fuse", "runs/w/bm25.test.trec", "runs/w/bm25-b.test.trec")
    assert _cli(root, *fuse, "-o", "runs/w/fused.trec").exit_code == 0
    assert _cli(root, *fuse).exit_code == 0  # runs/w/rrf.test.trec, named by the method
    r = _cli(root, "pool", "export", "pools/w.pool.jsonl", "--format", "html", "-o", "pools/w.html")
    assert r.exit_code == 0, r.output
    key = (root / "pools/w.key.tsv").read_text().splitlines()
    pairs = [line.split("\t")[0] for line in key if line and not line.startswith("#")][1:]
    answers = ["pair_id,worker_id,label", *(f"{p},ann,5" for p in pairs)]
    (root / "pools/answers.csv").write_text("\n".join(answers) + "\n")
    agg = ("judgments", "aggregate", "pools/answers.csv", "--key", "pools/w.key.tsv",
           "--pool", "pools/w.pool.jsonl", "--min-unanimous", "1",
           "-o", "qrels/w.answers.txt")  # fmt: skip
    assert _cli(root, *agg).exit_code == 0  # what the page writes (one assessor)
    r = _cli(root, "status", "w")
    assert r.exit_code == 0, r.output
    rows = {line.split("│")[1].strip(): line for line in r.stdout.splitlines() if "│" in line}
    assert "fused.trec" in rows and "rrf" in rows
    fused = [c.strip() for c in rows["fused.trec"].split("│")]
    assert fused[2:4] == ["fuse", "test"]  # system and split from the sidecar
    answers_row = next(line for line in r.stdout.splitlines() if "pools/answers.csv" in line)
    assert "blind" in answers_row and f"{len(pairs)}" in answers_row
    assert "pools/round1.csv" in r.stdout


def test_a_run_exported_with_its_ir_metadata_block_shows_its_system(workdir):
    """From the new user's walk: docs/evaluation.md's `export ir-metadata
    runs/sample/bm25.test.trec -o runs/sample/bm25-ir_metadata.test.trec` writes a run without
    a sidecar beside the others, and status listed its system as '?': the block says it."""
    exported = workdir / "runs/w/bm25-ir_metadata.test.trec"
    try:
        r = _cli(workdir, "export", "ir-metadata", "runs/w/bm25.test.trec", "-o", exported)
        assert r.exit_code == 0, r.output
        assert not exported.with_suffix(".json").exists()
        r = _cli(workdir, "status", "w")
        assert r.exit_code == 0, r.output
        rows: dict[str, list[list[str]]] = {}  # a run's row in each part of the table
        for line in r.stdout.splitlines():
            if line.startswith("│ bm25"):
                cells = [c.strip() for c in line.split("│")[1:-1]]
                rows.setdefault(cells[0], []).append(cells)
        assert rows["bm25-ir_metadata"][0][1:3] == ["bm25 (ir_metadata)", "test"], rows
        # the same AP as the run it was exported from
        values = {n: [c for c in sum(rows[n], []) if re.fullmatch(r"\d\.\d{4}", c)]
                  for n in ("bm25", "bm25-ir_metadata")}  # fmt: skip
        assert values["bm25"] == values["bm25-ir_metadata"] != []
        # a block that never ends says nothing: '?'
        text = exported.read_text().replace("# ir_metadata.end\n", "")
        exported.write_text(text)
        r = _cli(workdir, "status", "w")
        row = next(line for line in r.stdout.splitlines() if line.startswith("│ bm25-ir_meta"))
        assert row.split("│")[2].strip() == "?"
    finally:
        exported.unlink(missing_ok=True)
