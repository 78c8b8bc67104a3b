"""Ctrl-C at the last moments of a command: while `build-collection --force` deletes the
collection it replaced, and while a finished command tells its outcome. Real processes, real
signals; the outcome is one true line and nothing left behind, never a traceback."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fault_tools import _child_signals
from pool_fixtures import write_qrels, write_run

ROOT = Path(__file__).parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _cmrkit(cwd: Path, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cmrkit", *args],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_child_signals,  # SIGINT as a terminal's child has it, whatever pytest has
        **kw,
    )


def test_sigint_while_force_deletes_the_replaced_collection(tmp_path):
    """The swap is done when the old collection is being deleted: the command finishes that,
    says it wrote the collection (and nothing else), and leaves no staging folder or lock."""
    first = _cmrkit(tmp_path, "build-collection")
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    junk = tmp_path / "collections" / "sample" / "junk"  # makes the old one slow to delete
    junk.mkdir()
    for i in range(20000):
        (junk / f"{i}.txt").write_bytes(b"x" * 64)
    proc = _cmrkit(tmp_path, "build-collection", "--force")
    deadline = time.monotonic() + 300
    signalled = False
    while proc.poll() is None:
        assert time.monotonic() < deadline
        if list((tmp_path / "collections").glob(".cmrkit-staging-*/old")):
            proc.send_signal(signal.SIGINT)  # the renames are done; the old one is going
            signalled = True
            break
        time.sleep(0.001)
    out, err = proc.communicate(timeout=60)
    if not signalled:
        pytest.skip("the old collection was deleted before the signal could be sent")
    assert "Traceback" not in err
    lines = [x for x in err.strip().splitlines() if not x.startswith(("dropped:", "note:"))]
    assert proc.returncode == 130, (out, err)
    assert len(lines) == 1, err
    assert lines[0].startswith("interrupted by Ctrl-C (SIGINT): wrote collections/sample, qrels/")
    assert "kept" not in err
    assert not junk.exists()  # the new collection is in place
    assert (tmp_path / "collections" / "sample" / "corpus.jsonl.gz").is_file()
    for folder in (tmp_path / "collections", tmp_path / "qrels"):
        leftovers = [p.name for p in folder.iterdir() if p.name.startswith(".")]
        assert leftovers == [], leftovers


# the instant a finished command's outcome is told: a signal raised from inside the handling
# of its exit (SystemExit.code read), of an internal error (its text built), of a CmrkitError
# (its line printed), and while stdout is flushed
OUTCOMES = {
    "exit": """
        class Done(SystemExit):
            @property
            def code(self):
                signal.raise_signal(signal.SIGINT)
                return 0
        def app():
            raise Done()
    """,
    "internal": """
        class Boom(Exception):
            def __str__(self):
                signal.raise_signal(signal.SIGINT)
                return "boom"
        def app():
            raise Boom()
    """,
    "string": """
        class Text(str):
            pass
        class Done(SystemExit):
            @property
            def code(self):
                return Later("bad usage")
        class Later(str):
            def __new__(cls, text):
                return str.__new__(cls, text)
            def __str__(self):
                signal.raise_signal(signal.SIGINT)
                return str.__str__(self)
        def app():
            raise Done()
    """,
    "flush": """
        class Out:
            def write(self, text):
                return len(text)
            def flush(self):
                signal.raise_signal(signal.SIGINT)
        def app():
            sys.stdout = Out()
    """,
}


@pytest.mark.parametrize("where", list(OUTCOMES))
def test_a_signal_while_the_outcome_is_told_never_prints_a_traceback(tmp_path, where):
    script = "import signal, sys\nfrom cmrkit import console\n" + textwrap.dedent(OUTCOMES[where])
    script += "console.run(app)\n"
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_child_signals,
    )
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert done.returncode in (0, 130), done
    if done.returncode == 130:
        assert lines[-1].startswith("interrupted by Ctrl-C (SIGINT)"), lines
    assert len(lines) <= 2, lines


def test_ctrl_c_near_the_end_of_eval_is_one_line(tmp_path):
    """Real `cmrkit eval` processes, Ctrl-C at seeded random moments around their end."""
    write_run(
        tmp_path / "r.trec", {f"q{i}": [(f"d{j}", 10.0 - j) for j in range(50)] for i in range(200)}
    )
    write_qrels(tmp_path / "q.txt", {f"q{i}": {f"d{i % 50}": 1} for i in range(200)})
    t0 = time.monotonic()
    probe = _cmrkit(tmp_path, "eval", "r.trec", "q.txt")
    probe.communicate(timeout=120)
    took = time.monotonic() - t0
    rng = random.Random(23)
    for _ in range(8):
        proc = _cmrkit(tmp_path, "eval", "r.trec", "q.txt")
        time.sleep(rng.uniform(0.6, 1.0) * took)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert "Traceback" not in err, err
        assert proc.returncode in (0, 130), (proc.returncode, err)
        if proc.returncode == 130:
            assert err.strip().splitlines()[-1].startswith("interrupted by Ctrl-C"), err
