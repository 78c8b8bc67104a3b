"""Signals at random points of real runs (Lucene search, spaCy and Lucene indexing), a main
thread stuck in Java, signals the caller ignores (cmrkit.interrupts).

The real components run: the CLI as its own process, real signals and file systems (see
fault_tools)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fault_tools import (
    ROOT,
    _child_signals,
    cmrkit,
    digest_tree,
    leftovers,
    start,
)
from retrieval_collection import topic, unit
from retrieval_collection import write_collection as write_retrieval_collection

# === 4. interrupts ==========================================================================

NAMES = ["Alice Martin", "Bob Chen", "Paris", "Berlin", "Acme Corp", "Tokyo", "Nairobi", "Oslo"]
SYLLABLES = [
    a + b for a in ("ka", "lo", "mi", "su", "te", "ra") for b in ("rin", "dos", "mel", "tak")
]
SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}


def synthetic_collection(root: Path, n_units: int = 800, n_queries: int = 100) -> Path:
    """collections/syn: sentences of made-up words and a few names (for spaCy's NER)."""
    rng = random.Random(7)
    units, topics = [], []
    for i in range(n_units):
        words = " ".join(rng.choice(SYLLABLES) for _ in range(25))
        text = f"{words} near {rng.choice(NAMES)} and {rng.choice(NAMES)}."
        units.append(unit(f"D:{i}", text, doc_id=f"d{i}"))
    for q in range(n_queries):
        text = units[q]["contents"]
        topics.append(topic(f"q{q}", "test", text.split()[3], text, units[q]["id"]))
    qrels = {"test": {t["qid"]: [units[n_queries + i]["id"]] for i, t in enumerate(topics)}}
    return write_retrieval_collection(root, "syn", units, topics, qrels)


@pytest.fixture(scope="module")
def searchable(tmp_path_factory):
    """An indexed synthetic collection with a first run, and how long each step took."""
    root = tmp_path_factory.mktemp("syn")
    synthetic_collection(root)
    t = time.monotonic()
    r = cmrkit("index", "collections/syn", "--quiet", cwd=root)
    assert r.returncode == 0, r.stderr
    index_seconds = time.monotonic() - t
    t = time.monotonic()
    r = cmrkit(*SEARCH, "-k", "20", cwd=root)
    assert r.returncode == 0, r.stderr
    return root, index_seconds, time.monotonic() - t


SEARCH = ("run", "bm25", "collections/syn", "--query", "mention", "--name", "r", "--quiet")


def wait_for_handlers(proc: subprocess.Popen) -> None:
    """Wait until cmrkit's signal handlers are in place (SIGTERM caught, per /proc): before
    that, Python itself is still starting and a signal has its default effect (nothing is
    written yet)."""
    while proc.poll() is None:
        with contextlib.suppress(FileNotFoundError):
            status = Path(f"/proc/{proc.pid}/status").read_text()
            caught = int(
                next(x for x in status.splitlines() if x.startswith("SigCgt:")).split()[1], 16
            )
            if caught & (1 << (signal.SIGTERM - 1)):
                return
        time.sleep(0.005)


def interrupt(args, cwd: Path, delay: float, sig: int) -> tuple[int, str]:
    """Start ``cmrkit ARGS``, send ``sig`` ``delay`` seconds after its handlers are in place,
    wait for the end."""
    proc = start(*args, cwd=cwd)
    wait_for_handlers(proc)
    time.sleep(delay)
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"hung after {signal.Signals(sig).name} at {delay:.2f} s") from None
    return proc.returncode, err


def check_interrupted(rc: int, err: str, sig: int) -> bool:
    """One true line for a signalled command; True when the outputs were already in place.

    A signal that lands after the new outputs were renamed into place ends the command with
    the signal's exit code, and the line says what it wrote (the caller checks they are whole).
    """
    assert "Traceback" not in err, err
    assert rc == 128 + sig, (rc, err)
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"interrupted by {SIGNAL_NAMES[sig]}: "), err
    if last.startswith(f"interrupted by {SIGNAL_NAMES[sig]}: wrote "):
        return True
    assert "kept" in last or "nothing was written" in last, last
    return False


def test_signals_at_random_points_of_a_lucene_search_keep_the_old_run(searchable):
    root, _, run_seconds = searchable
    outputs = [root / "runs" / "syn" / f"r.test.{ext}" for ext in ("trec", "json")]
    current = {p: p.read_bytes() for p in outputs}
    rng = random.Random(14)
    interrupted = 0
    for i in range(6):
        sig = (signal.SIGINT, signal.SIGTERM)[i % 2]
        delay = rng.uniform(0.02, 1.0) * run_seconds
        rc, err = interrupt((*SEARCH, "-k", "30", "--force"), root, delay, sig)
        if rc == 0 or check_interrupted(rc, err, sig):  # the new run was in place: complete
            lines = outputs[0].read_text().splitlines()
            assert len(lines) == 100 * 30 and json.loads(outputs[1].read_text())["n_queries"] == 100
            current = {p: p.read_bytes() for p in outputs}
        else:
            assert {p: p.read_bytes() for p in outputs} == current
            interrupted += 1
        assert leftovers(root) == []
    assert interrupted  # the signals landed inside the runs, not after them


def index_signalled(root: Path, point: str, sig: int, *args, group: bool = False, **env):
    """`cmrkit index --force` that sends itself ``sig`` (its process group with ``group``, as
    a terminal's Ctrl-C) when the build reaches ``point`` (cmrkit.retrieval.signal_points):
    (returncode, stderr)."""
    from cmrkit.retrieval.signal_points import ENV

    spec = f"{point},{signal.Signals(sig).name}" + (",group" if group else "")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cmrkit", "index", "collections/syn", "--force", "--quiet", *args],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_child_signals,
        env={**os.environ, "PYTHONPATH": str(ROOT), ENV: spec, **env},
        start_new_session=group,  # the group is the command and its workers alone
    )
    try:
        _, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"hung after {signal.Signals(sig).name} at {point}") from None
    return proc.returncode, err


def test_signals_at_random_points_of_spacy_and_lucene_indexing_keep_the_old_index(searchable):
    """Each round's signal is sent from inside the build, at a point drawn at random (spaCy's
    first batch, the units written, Lucene indexing, the manifest written): every round is
    interrupted, however fast indexing is, and the old index stays as it was."""
    from cmrkit.retrieval.signal_points import POINTS

    root, _, _ = searchable
    index = root / "collections" / "syn" / "index"
    before = digest_tree(index)
    rng = random.Random(3)
    points = list(POINTS) + [rng.choice(POINTS)]
    rng.shuffle(points)
    for i, point in enumerate(points):
        sig = (signal.SIGTERM, signal.SIGINT)[i % 2]
        rc, err = index_signalled(root, point, sig)
        assert not check_interrupted(rc, err, sig), (point, err)  # nothing was put in place
        assert digest_tree(index) == before, point
        assert leftovers(root) == []
    r = cmrkit(*SEARCH, "-k", "5", "--name", "after", cwd=root)
    assert r.returncode == 0, r.stderr


def test_ctrl_c_while_spacy_workers_recognise_is_one_line_and_leaks_nothing(tmp_path):
    """A terminal's Ctrl-C reaches every process of the group, the NER workers too. Seen: a
    second line `resource_tracker: There appear to be 5 leaked semaphore objects`: the command
    waited for the workers' tasks past the interrupt deadline, the watchdog ended it, and the
    worker pool's semaphores were never released. Now the workers ignore SIGINT and are
    terminated at once: the one interrupt line, 130, well within the deadline."""
    synthetic_collection(tmp_path, n_units=1500, n_queries=10)  # ~280k characters: 2 workers
    t0 = time.monotonic()
    rc, err = index_signalled(
        tmp_path, "ner", signal.SIGINT, "--threads", "2", group=True, CMRKIT_CACHE_DIR=""
    )
    assert rc == 130, err
    assert "leaked" not in err and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err == (
        "interrupted by Ctrl-C (SIGINT): nothing written: did not write collections/syn/index\n"
    ), err
    assert leftovers(tmp_path) == []
    assert time.monotonic() - t0 < 120


_STUCK_IN_JAVA = """
import os, threading, time
from pathlib import Path
from cmrkit import interrupts
from cmrkit.fileio import StagedOutputs
from cmrkit.retrieval.java import jclass
latch = jclass("java.util.concurrent.CountDownLatch")(1)
main = jclass("java.lang.Thread").currentThread()
def ready():  # once the main thread waits inside Java
    while main.getState().toString() != "WAITING":
        time.sleep(0.01)
    print("ready", flush=True)
with interrupts.handling():
    with StagedOutputs([Path("out.txt")]) as staged:
        staged.path(Path("out.txt")).write_text("half")
        threading.Thread(target=ready, daemon=True).start()
        getattr(latch, "await")()  # never returns: only the watchdog can end this process
"""


def test_a_main_thread_stuck_in_java_still_ends_on_ctrl_c(tmp_path):
    """The main thread waits forever inside one Java call: the watchdog ends the process (exit
    130, the line, the staging folder removed)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _STUCK_IN_JAVA],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_child_signals,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().endswith(
        "interrupted by Ctrl-C (SIGINT): nothing written: did not write out.txt"
    )
    assert not (tmp_path / "out.txt").exists() and leftovers(tmp_path) == []


_SWALLOWED = """
import os, signal, sys, time, weakref
from cmrkit import interrupts
class Thing:
    pass
def gone(_):  # a weakref callback, as importlib's module-lock cleanup is one
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(100000):  # the handler runs here: Python prints and drops what it raises
        pass
with interrupts.handling():
    thing = Thing()
    ref = weakref.ref(thing, gone)
    del thing
    print("went on", flush=True)
    time.sleep(float(sys.argv[1]))
    print("finished", flush=True)
"""


@pytest.mark.parametrize("left", [0.0, 30.0])
def test_ctrl_c_taken_inside_a_weakref_callback_prints_no_traceback(tmp_path, left):
    """A signal whose handler runs inside code that drops exceptions (a weakref callback: seen
    in CI as `Exception ignored in: <function _get_module_lock.<locals>.cb>` and a traceback
    when Ctrl-C met the end of `cmrkit eval`): no traceback; a command with work left ends
    within the deadline with the one line and 130, one about to finish finishes (exit 0)."""
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _SWALLOWED, str(left)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_child_signals,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    took = time.monotonic() - t0
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
    assert done.stdout.startswith("went on\n"), done.stdout
    if left:
        assert done.returncode == 130, done
        assert done.stderr == "interrupted by Ctrl-C (SIGINT): nothing was written\n"
        assert "finished" not in done.stdout and took < left
    else:
        assert done.returncode == 0, done
        assert done.stdout == "went on\nfinished\n" and done.stderr == ""


def test_a_signal_ignored_by_the_caller_stays_ignored(tmp_path):
    """nohup and background jobs ignore some signals: cmrkit does not take them back."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from cmrkit import interrupts\nimport signal, time\n"
            "with interrupts.handling():\n"
            "    print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN, flush=True)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    out, _ = proc.communicate(timeout=60)
    assert out.strip() == "True"


def test_an_interrupt_that_compiled_code_hands_on_wrapped_is_still_one_line(capsys):
    """Ray's CoreWorker.wait (Cython) hands a signal's exception on as "SystemError: ...
    returned a result with an exception set" (seen in CI on `index --engine ray`): the command
    still ends as interrupted (exit 130, the one interrupt line), not as an internal error."""
    from cmrkit import console, interrupts

    def wrapped() -> None:
        try:
            raise interrupts.Interrupted(signal.SIGINT)
        except interrupts.Interrupted:
            # implicit chaining, as the compiled code leaves it
            raise SystemError(  # noqa: B904
                "<cyfunction CoreWorker.wait> returned a result with an exception set"
            )

    def unrelated() -> None:
        raise SystemError("a real internal error")

    assert console._outcome(wrapped) == 130
    err = capsys.readouterr().err
    assert err.startswith("interrupted by Ctrl-C (SIGINT): ") and "internal error" not in err
    assert len(err.strip().splitlines()) == 1
    assert console._outcome(unrelated) == console.INTERNAL_ERROR
    assert "internal error (SystemError: a real internal error)" in capsys.readouterr().err
