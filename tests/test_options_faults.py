"""Option values that used to reach the math unchecked, and the shape of usage errors: each is
refused in one line naming the option before anything is read or written (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pool_fixtures import write_qrels, write_run

from cmrkit.fileio import OutputLock

ROOT = Path(__file__).parents[1]


def one_error(result, code: int = 2) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == code and len(lines) == 1, result.output
    return lines[0]


@pytest.fixture
def files(tmp_path):
    write_run(tmp_path / "a.trec", {"q1": [("d1", 2.0), ("d2", 1.0)]})
    write_run(tmp_path / "b.trec", {"q1": [("d2", 2.0), ("d1", 1.0)]})
    write_qrels(tmp_path / "q.txt", {"q1": {"d1": 1}})
    (tmp_path / "spans.jsonl").write_text(
        '{"qid": "q1", "docno": "d1", "text": "x", "score": 1.0}\n', encoding="utf-8"
    )
    return tmp_path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("cluster", "a.trec", "--threshold", "nan"), "--threshold must be a finite number"),
        (
            ("cluster", "a.trec", "--threshold", "1", "--method", "average", "--missing-score",
             "inf"),
            "--missing-score must be a finite number, got inf",
        ),
        (("run", "fuse", "a.trec", "b.trec", "-o", "f.trec", "--rrf-k", "1000001"),
         "--rrf-k must lie in 0..1e+06, got 1000001"),
        (("run", "fuse", "a.trec", "b.trec", "-o", "f.trec", "-k", "1000000000000"),
         "-k must lie in 1..1e+08"),
        (("eval-spans", "spans.jsonl", "q.txt", "-k", "1000000000000"),
         "-k must be an integer from 1 to 1,000,000,000, got 1000000000000"),
        (("eval-spans", "spans.jsonl", "q.txt", "-k", "0"), "-k must be an integer from 1"),
    ],
)  # fmt: skip
def test_option_values_beyond_their_limits_are_refused(files, cli, args, expected):
    line = one_error(cli(*args))
    assert expected in line, line
    assert not (files / "f.trec").exists() and not (files / "a.clusters.jsonl").exists()


@pytest.mark.parametrize("version", ["9", "10"])
def test_a_score_beyond_float32_is_a_note_not_a_numpy_warning(files, version):
    """trec_eval 9.0.8 keeps scores as C floats (1e308 becomes infinity), 10.0 as doubles."""
    write_run(files / "big.trec", {"q1": [("d1", 1e308), ("d2", 1.0)]})
    args = ["eval", "big.trec", "q.txt", "-m", "AP", "--trec-eval", version]
    done = subprocess.run(
        [sys.executable, "-m", "cmrkit", *args],
        cwd=files,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "RuntimeWarning" not in done.stderr and "numpy" not in done.stderr, done.stderr
    note = (
        "note: 1 score(s) lie beyond float32's range (about ±3.4e38), in which trec_eval 9.0.8 "
        "keeps scores: they rank as ±infinity, as there"
    )
    assert done.stderr.strip().splitlines() == ([] if version == "10" else [note])


def test_an_invalid_pool_plan_is_refused_before_it_takes_its_output(files, cli):
    lock = OutputLock(files / "plan.json")
    lock.acquire()  # another command writes the output: the bad option is still what is said
    try:
        line = one_error(
            cli("pool", "plan", "a.trec", "--qrels", "q.txt", "--budgets", "5", "--strategies",
                "nope", "--json", "plan.json")
        )  # fmt: skip
    finally:
        lock.release()
    assert "--strategies nope: choose from" in line, line


def _cmrkit(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cmrkit", *args],
        cwd=cwd,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("build-collection", "--quiet"),
            "error: No such option: --quiet (Possible options: --qid-tag, --queries, --unit); "
            "see `cmrkit build-collection --help`",
        ),
        (("eval",), "error: Missing argument 'RUN'; see `cmrkit eval --help`"),
        (("nosuch",), "error: No such command 'nosuch'; see `cmrkit --help`"),
        (("eval", ".", "q.txt"), "error: .: is a folder, expected a file; name a file"),
    ],
)
def test_usage_errors_and_folders_for_files_are_one_line(files, args, expected):
    done = _cmrkit(files, *args)
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == [expected]
