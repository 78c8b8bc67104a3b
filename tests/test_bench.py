"""Every benchmark runs (issue 32 item 7): each bench/*.py answers --help (argparse) and runs its
--smoke size, a few seconds of the real pipeline step it times, to the end with exit 0. The
figures are not checked here (docs/benchmarks.md holds them); that each script still works is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHES = sorted(p.name for p in (ROOT / "bench").glob("bench_*.py"))
ON_THE_SAMPLE = {
    "bench_dense.py",
    "bench_judge.py",
    "bench_rerank.py",
}  # read collections/sample of the folder


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "100"}


def _bench(name: str, *args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / name), *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_benches_are_the_ones_listed():
    assert len(BENCHES) >= 16, BENCHES


@pytest.mark.parametrize("name", BENCHES)
def test_help_names_the_smoke_size(name, tmp_path):
    done = _bench(name, "--help", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: ") and "--smoke" in done.stdout


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    """A folder holding the sample collection, as the README's first command makes it, and its
    index without entities (the benches' own runs would build one with spaCy's NER: minutes)."""
    root = tmp_path_factory.mktemp("bench-sample")
    for args in (["build-collection"], ["index", "--no-entities", "--quiet"]):
        done = subprocess.run(
            [sys.executable, "-m", "cmrkit", *args],
            cwd=root,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
    return root


@pytest.mark.parametrize("name", BENCHES)
def test_smoke_runs_to_the_end(name, tmp_path, request):
    cwd = request.getfixturevalue("sample") if name in ON_THE_SAMPLE else tmp_path
    done = _bench(name, "--smoke", cwd=cwd, timeout=900)
    assert done.returncode == 0, f"{name} --smoke: {done.stderr[-3000:]}"
    assert done.stdout.strip(), name
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
