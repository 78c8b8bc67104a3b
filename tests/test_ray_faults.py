"""The Ray engine interrupted and misdirected, for real: `cmrkit run bm25 --engine ray` and
`cmrkit index --engine ray` on a local Ray cluster of 2 workers, Ctrl-C at several points
(while the cluster starts, while a worker searches, while a shard is indexed); afterwards no
process of that cluster may be left (checked as tests/test_distributed.py does for a normal
exit). An --address where nothing listens ends in one line after a bounded wait."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from distributed_collection import write as write_dist
from fault_tools import _child_signals, left_behind, processes_marked

pytest.importorskip("ray")

from cmrkit.retrieval import build_index  # noqa: E402
from cmrkit.retrieval.distributed.engine import REACH_WAIT  # noqa: E402

ROOT = Path(__file__).parents[1]
pytestmark = pytest.mark.skipif(
    not Path("/proc/self/environ").exists(), reason="needs /proc to find Ray's processes"
)


@pytest.fixture(scope="module")
def coll(tmp_path_factory):
    folder = write_dist(tmp_path_factory.mktemp("rayfaults"))
    build_index(folder, entities=False, progress=False)
    return folder


def _start(args: list[str], faults: Path, mark: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CMRKIT_FAULTS": str(faults),
        "CMRKIT_TEST_MARK": mark,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "cmrkit", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        preexec_fn=_child_signals,  # SIGINT as a terminal's child has it, whatever pytest has
    )


def _wait_for(proc: subprocess.Popen, ready, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _ray_started(mark: str) -> bool:
    return any("raylet" in c or "gcs_server" in c for c in processes_marked(mark))


@pytest.mark.parametrize("point", ["starting", "searching", "searching-group", "indexing"])
def test_ctrl_c_on_ray_ends_in_one_line_and_leaves_no_process(coll, tmp_path, point):
    faults = tmp_path / "faults"
    faults.mkdir()
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    runs = tmp_path / "runs"
    if point == "indexing":
        args = ["index", str(coll), "--engine", "ray", "--workers", "2", "--force"]
        args += ["--no-entities", "--quiet"]
        stall = "shard-0"
    else:
        args = ["run", "bm25", str(coll), "--engine", "ray", "--workers", "2", "--force"]
        args += ["--query", "mention", "--runs-dir", str(runs), "--quiet"]
        stall = "search"
    (faults / f"stall-{stall}").write_text("")
    before = {p.name: p.read_bytes() for p in (coll / "index").iterdir()}
    proc = _start(args, faults, mark)
    try:
        if point == "starting":
            _wait_for(proc, lambda: _ray_started(mark))
        else:
            _wait_for(proc, lambda: (faults / f"reached-{stall}").exists())
        t0 = time.monotonic()
        if point.endswith("-group"):  # Ctrl-C in a terminal: the whole group, Ray's too
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
        (faults / f"stall-{stall}").unlink()
    assert "Traceback" not in err and "internal error" not in err, err
    assert proc.returncode == 130, (proc.returncode, err)
    assert err.strip().splitlines()[-1].startswith("interrupted by Ctrl-C (SIGINT): "), err
    assert took < 5, took
    assert left_behind(mark) == [], point
    # nothing half-made: the index as it was, no run, no staging
    assert {p.name: p.read_bytes() for p in (coll / "index").iterdir()} == before
    assert not list(coll.glob(".cmrkit-staging-*"))
    assert not runs.exists() or not [p for p in runs.rglob("*") if p.is_file()]


def test_an_address_where_nothing_listens_gives_up_in_one_line(coll, tmp_path):
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    t0 = time.monotonic()
    proc = _start(
        ["run", "bm25", str(coll), "--engine", "ray", "--address", "127.0.0.1:1"]
        + ["--runs-dir", str(tmp_path / "runs"), "--quiet"],
        tmp_path,
        mark,
    )
    out, err = proc.communicate(timeout=REACH_WAIT + 120)
    took = time.monotonic() - t0
    assert proc.returncode == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(
        "error: cannot reach the Ray cluster at 127.0.0.1:1: nothing answers there after"
    ), lines
    assert took < REACH_WAIT + 60
    assert left_behind(mark, wait=5) == []
    assert not (tmp_path / "runs").exists()


def test_an_address_that_never_answers_as_ray_gives_up_after_the_bound(coll, tmp_path):
    """Something listens there, but no Ray cluster: Ray itself would retry for ever."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    mark = f"{os.getpid()}-{time.monotonic_ns()}"
    os.environ["CMRKIT_RAY_CONNECT_WAIT"] = "8"
    try:
        t0 = time.monotonic()
        proc = _start(
            ["run", "bm25", str(coll), "--engine", "ray", "--address", f"127.0.0.1:{port}"]
            + ["--runs-dir", str(tmp_path / "runs"), "--quiet"],
            tmp_path,
            mark,
        )
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - t0
    finally:
        del os.environ["CMRKIT_RAY_CONNECT_WAIT"]
        server.close()
    assert proc.returncode == 1, (out, err)
    assert err.strip().splitlines() == [
        f"error: cannot reach the Ray cluster at 127.0.0.1:{port}: no answer within 8 s; check "
        "--address, or start one with `ray start --head` ($CMRKIT_RAY_CONNECT_WAIT sets how long "
        "to wait)"
    ], err
    assert took < 60
    assert left_behind(mark, wait=5) == []
    assert not (tmp_path / "runs").exists()
