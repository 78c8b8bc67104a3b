"""Fault injection: signals at random points of real runs, racing processes, a read-only folder,
a full disk, symbolic links, stale leftovers of killed runs, hostile text in every exported
format (parsed back), and inputs that used to end in a traceback.

Everything here runs the real components: the CLI as a separate process (``python -m cmrkit``),
Lucene through Pyserini, spaCy, real signals and real file systems (a tiny tmpfs and a read-only
mount where the tests run as root; an equivalent file-size limit or permission bits elsewhere).
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import hashlib
import html
import html.parser
import io
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from browser import needs_chromium, wait_for
from pool_fixtures import read_qrels_lines, write_collection, write_qrels, write_run
from retrieval_collection import topic, unit
from retrieval_collection import write_collection as write_retrieval_collection

from cmrkit.assess.key import read_key
from cmrkit.errors import CmrkitError
from cmrkit.escaping import csv_cell, csv_value, fill, html_cell
from cmrkit.fileio import LOCK_SUFFIX, STAGING_PREFIX, StagedOutputs, reading, safe_name

ROOT = Path(__file__).resolve().parents[1]
IS_ROOT = os.geteuid() == 0
HOSTILE = [
    '=HYPERLINK("http://x","y")',
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "'=already",
    "''",
    "\t=tab",
]


# --- running the real CLI as its own process -----------------------------------------------


def _child_signals() -> None:
    # a test runner in the background may ignore SIGINT; a terminal's child does not
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


def _drop_file_permission_override() -> None:
    """Make a root child obey file permission bits: drop CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH from the bounding set, so the program it execs does not get them."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def cmrkit(*args, cwd: Path, limit_bytes: int | None = None, obey_modes: bool = False, timeout=600):
    """Run ``python -m cmrkit ARGS`` in ``cwd``; returns the CompletedProcess. ``limit_bytes``
    caps the size of any file it writes; ``obey_modes`` makes a root child obey permission
    bits."""

    def setup() -> None:
        _child_signals()
        if limit_bytes is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
        if obey_modes:
            _drop_file_permission_override()

    return subprocess.run(
        [sys.executable, "-m", "cmrkit", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=setup,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def start(*args, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cmrkit", *map(str, args)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_child_signals,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def one_error_line(proc, code: int) -> str:
    """The single ``error:`` line of a failed command (no traceback, nothing else wrong)."""
    err = proc.stderr
    assert proc.returncode == code, (proc.returncode, err)
    assert "Traceback" not in err and "internal error" not in err, err
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


def digest_tree(path: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under ``path`` (or of ``path`` itself)."""
    if path.is_file():
        return {".": hashlib.sha256(path.read_bytes()).hexdigest()}
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def leftovers(folder: Path) -> list[str]:
    """Staging folders and lock files under ``folder``."""
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.name.startswith((STAGING_PREFIX, ".cmrkit-tmp-")) or p.name.endswith(LOCK_SUFFIX)
    )


# --- mounts (root) ---------------------------------------------------------------------------


def _mountable() -> bool:
    if not IS_ROOT:
        return False
    probe = Path(tempfile.mkdtemp(prefix="cmrkit-mount-"))
    try:
        ok = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(probe)]
        ).returncode
        if ok != 0:
            return False
        subprocess.run(["umount", str(probe)], check=True)
        return True
    except (OSError, subprocess.CalledProcessError):
        return False
    finally:
        probe.rmdir()


MOUNTABLE = _mountable()


@contextlib.contextmanager
def tmpfs(path: Path, size: str, read_only: bool = False):
    """A tmpfs of ``size`` mounted at ``path`` (read-only if asked)."""
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if read_only else "")
    subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


@contextlib.contextmanager
def read_only_folder(path: Path):
    """A folder cmrkit may not write to: a read-only mount (root), else mode 0555 (run the
    command with ``obey_modes``)."""
    if MOUNTABLE:
        with tmpfs(path, "64k", read_only=True):
            yield path
        return
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o555)
    try:
        yield path
    finally:
        path.chmod(0o755)


# --- small pipelines ------------------------------------------------------------------------


def pool_workspace(root: Path, queries, docnos, texts: dict[str, str] | None = None) -> Path:
    """collections/tiny, a run over it and pools/p.jsonl; returns ``root``."""
    write_collection(root / "collections", queries, docnos)
    if texts:
        path = root / "collections" / "tiny" / "corpus.jsonl.gz"
        lines = gzip.decompress(path.read_bytes()).decode().splitlines()
        records = [json.loads(x) for x in lines]
        for r in records:
            r["contents"] = texts.get(r["id"], r["contents"])
        path.write_bytes(
            gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode(), mtime=0)
        )
    (root / "runs" / "tiny").mkdir(parents=True)
    write_run(
        root / "runs" / "tiny" / "r.trec",
        {q: [(d, 10.0 - i) for i, d in enumerate(docnos)] for q in queries},
    )
    return root


# === 1. atomic replacement and --force ======================================================


def test_force_never_deletes_a_folder_cmrkit_did_not_write(tmp_path, cli):
    ws = pool_workspace(tmp_path, ["q1"], ["d1", "d2"])
    assert cli("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl").exit_code == 0
    mine = tmp_path / "my-notes"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    for fmt in ("html", "jsonl"):
        r = cli("pool", "export", "p.jsonl", "-f", fmt, "-o", mine, "--force")
        assert r.exit_code == 2
        assert "folder that cmrkit did not write" in r.output and str(mine) in r.output
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert leftovers(ws) == []


def test_force_replaces_cmrkit_own_collection_and_leaves_nothing_behind(tmp_path):
    first = cmrkit("build-collection", "--queries", "longest", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = digest_tree(tmp_path / "collections" / "sample")
    again = cmrkit("build-collection", "--force", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    after = digest_tree(tmp_path / "collections" / "sample")
    assert after != before and ".cmrkit" in after
    assert leftovers(tmp_path) == []


def test_a_failed_write_keeps_the_old_outputs_whole(tmp_path):
    a, b = tmp_path / "out" / "a.txt", tmp_path / "other" / "b"
    a.parent.mkdir()
    a.write_text("old a")
    with pytest.raises(RuntimeError), StagedOutputs([a, b], force=True) as staged:
        staged.path(a).write_text("new a")
        staged.path(b).mkdir()
        raise RuntimeError("the writer failed half way")
    assert a.read_text() == "old a" and not b.exists()
    assert not (tmp_path / "other").exists()  # the folder it created for b is gone again
    assert leftovers(tmp_path) == []


def test_symbolic_link_in_the_way_is_refused(tmp_path, cli):
    pool_workspace(tmp_path, ["q1"], ["d1"])
    assert cli("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl").exit_code == 0
    precious = tmp_path / "precious.html"
    precious.write_text("keep me")
    (tmp_path / "link.html").symlink_to(precious)
    (tmp_path / "dangling.html").symlink_to(tmp_path / "nowhere")
    for target in ("link.html", "dangling.html"):
        r = cli("pool", "export", "p.jsonl", "-f", "html", "-o", target, "--force")
        assert r.exit_code == 2 and "is a symbolic link" in r.output, r.output
    assert precious.read_text() == "keep me" and not (tmp_path / "nowhere").exists()


_KILL_MID_COMMIT = """
import os, signal, sys
from pathlib import Path
from cmrkit.fileio import StagedOutputs
a, b = Path(sys.argv[1]), Path(sys.argv[2])
real = os.rename
calls = []
def rename(src, dst):
    real(src, dst)
    calls.append(dst)
    if len(calls) == int(sys.argv[3]):
        os.kill(os.getpid(), signal.SIGKILL)
os.rename = rename
with StagedOutputs([a, b], force=True) as staged:
    staged.path(a).write_text("new a")
    staged.path(b).mkdir()
    (staged.path(b) / "f").write_text("new b")
"""


@pytest.mark.parametrize("renames", [1, 2, 3])
def test_killed_mid_replacement_is_finished_by_the_next_command(tmp_path, renames):
    """SIGKILL between the renames of a commit: the next writer in that folder finishes the
    replacement (the outputs were complete), so the folder holds all new outputs."""
    out = tmp_path / "out"
    out.mkdir()
    a, b = out / "a.txt", out / "b"
    a.write_text("old a")
    b.mkdir()
    (b / ".cmrkit").write_text("{}")
    (b / "f").write_text("old b")
    proc = subprocess.run(
        [sys.executable, "-c", _KILL_MID_COMMIT, str(a), str(b), str(renames)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == -signal.SIGKILL
    assert [p.name for p in out.iterdir() if p.name.startswith(STAGING_PREFIX)]
    r = cmrkit("judgments", "simulate", "--help", cwd=tmp_path)  # writes nothing: no clean-up
    assert r.returncode == 0
    with StagedOutputs([out / "c.txt"]) as staged:  # the next writer in that folder
        staged.path(out / "c.txt").write_text("c")
    assert a.read_text() == "new a" and (b / "f").read_text() == "new b"
    assert leftovers(tmp_path) == []


def test_stale_staging_of_a_killed_run_is_removed_and_reported(tmp_path):
    pool_workspace(tmp_path, ["q1", "q2"], ["d1", "d2", "d3"])
    held = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom pathlib import Path\nfrom cmrkit.fileio import StagedOutputs\n"
            "s = StagedOutputs([Path('p.jsonl')])\ns.path(Path('p.jsonl')).write_text('x' * 5000)\n"
            "print('ready', flush=True)\ntime.sleep(600)\n",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert held.stdout.readline().strip() == "ready"
    busy = cmrkit("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl", cwd=tmp_path)
    line = one_error_line(busy, 1)
    assert f"being written by process {held.pid}" in line and "p.jsonl" in line
    held.kill()
    held.wait()
    (tmp_path / ".cmrkit-tmp-old").mkdir()  # left by an earlier cmrkit version
    r = cmrkit("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"took over the lock left by process {held.pid}" in r.stderr
    assert "removed .cmrkit-staging-" in r.stderr and f"process {held.pid}" in r.stderr
    assert ".cmrkit-tmp-old: staging folder of an interrupted run of an earlier cmrkit" in r.stderr
    assert leftovers(tmp_path) == [".cmrkit-tmp-old"]


# === 2. concurrency =========================================================================


def test_racing_commands_one_wins_the_others_name_the_holder(tmp_path):
    """Four processes pool to one file at once, each with another depth: one writes it, the
    others fail naming the holder (or, later, finding other content there); none is lost."""
    queries = [f"q{i}" for i in range(40)]
    docs = [f"d{i}" for i in range(200)]
    pool_workspace(tmp_path, queries, docs)
    depths = [10, 20, 30, 40]
    procs = [
        start("pool", "create", "runs/tiny/r.trec", "--depth", d, "-o", "p.jsonl", cwd=tmp_path)
        for d in depths
    ]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    winners = [d for d, (rc, _) in zip(depths, results, strict=True) if rc == 0]
    assert len(winners) == 1, results
    for rc, err in results:
        if rc != 0:
            assert "Traceback" not in err, err
            busy = rc == 1 and "p.jsonl: being written by process" in err
            assert busy or (rc == 2 and "already exists with other content" in err), err
    header = json.loads((tmp_path / "p.jsonl").read_text().splitlines()[0])
    assert header["depth"] == winners[0]
    assert leftovers(tmp_path) == []


_SWAPPER = """
import sys
from pathlib import Path
from cmrkit.fileio import StagedOutputs
target = Path(sys.argv[1])
for generation in range(int(sys.argv[2])):
    with StagedOutputs([target], force=True) as staged:
        d = staged.path(target)
        d.mkdir()
        for name in "abcdefgh":
            (d / name).write_text(str(generation) * 1000)
"""


def test_readers_see_the_old_or_the_new_output_never_a_mix(tmp_path):
    """A writer replaces a multi-file output 300 times while this process reads it whole,
    under :func:`reading` (as ``open_index`` does): every read sees one generation."""
    target = tmp_path / "out" / "index"
    writer = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(target), "300"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    reads = 0
    while writer.poll() is None or reads == 0:
        with reading(target):
            try:
                seen = {(target / name).read_text()[:1] for name in "abcdefgh"}
            except FileNotFoundError:
                assert not target.exists() or reads == 0
                continue
        assert len(seen) == 1, seen
        reads += 1
    assert writer.wait() == 0 and reads > 0


# === 3. the file system says no =============================================================


def test_read_only_output_folder_is_one_line_and_nothing_is_written(tmp_path):
    with read_only_folder(tmp_path / "ro") as ro:
        r = cmrkit("build-collection", "--qrels-dir", ro / "qrels", cwd=tmp_path, obey_modes=True)
        line = one_error_line(r, 2)
        assert str(ro) in line and ("read-only" in line or "permission denied" in line), line
        assert not (tmp_path / "collections" / "sample").exists()
        assert (
            leftovers(tmp_path / "collections") == []
            if (tmp_path / "collections").exists()
            else True
        )


def test_full_disk_is_one_line_exit_1_and_the_old_output_survives(tmp_path):
    if not MOUNTABLE:
        # the equivalent without a mount: a file-size limit makes the big write fail
        r = cmrkit("build-collection", cwd=tmp_path, limit_bytes=1_000_000)
        line = one_error_line(r, 1)
        assert "file too large" in line and "nothing was written" in line, line
        assert list((tmp_path / "collections").iterdir()) == []
        return
    with tmpfs(tmp_path / "disk", "400k") as disk:
        r = cmrkit("build-collection", "--collections-dir", disk, cwd=tmp_path)
        line = one_error_line(r, 1)
        assert "no space left" in line and "nothing was written" in line, line
        assert list(disk.iterdir()) == []
    # room for one sample collection (about 5.7 MB), not for a second one beside it
    with tmpfs(tmp_path / "disk", "8m") as disk:
        assert cmrkit("build-collection", "--collections-dir", disk, cwd=tmp_path).returncode == 0
        before = digest_tree(disk / "sample")
        r = cmrkit(
            "build-collection",
            "--collections-dir",
            disk,
            "--min-relevant",
            "2",
            "--force",
            cwd=tmp_path,
        )
        line = one_error_line(r, 1)
        assert "no space left" in line and str(disk / "sample") in line, line
        assert digest_tree(disk / "sample") == before
        assert leftovers(disk) == []


def test_missing_parent_and_file_in_the_way_are_one_line(tmp_path):
    (tmp_path / "afile").write_text("x")
    r = cmrkit("build-collection", "--collections-dir", "afile/sub", cwd=tmp_path)
    line = one_error_line(r, 2)
    assert "afile" in line and "not a folder" in line, line
    r = cmrkit("build-collection", "-i", "no/such/file.json", cwd=tmp_path)
    assert "no/such/file.json" in one_error_line(r, 2)


def test_permission_denied_is_one_line(tmp_path):
    assert cmrkit("build-collection", cwd=tmp_path).returncode == 0
    locked = tmp_path / "locked"
    locked.mkdir()
    secret = tmp_path / "secret.json"
    secret.write_text("[]")
    locked.chmod(0o555)
    secret.chmod(0o000)
    try:
        r = cmrkit(
            "build-collection",
            "--name",
            "other",
            "--qrels-dir",
            locked,
            cwd=tmp_path,
            obey_modes=True,
        )
        line = one_error_line(r, 2)
        assert "permission denied" in line and str(locked) in line, line
        r = cmrkit("build-collection", "-i", secret, "--name", "s", cwd=tmp_path, obey_modes=True)
        line = one_error_line(r, 2)
        assert "permission denied" in line and "secret.json" in line, line
    finally:
        locked.chmod(0o755)
        secret.chmod(0o644)
    assert leftovers(tmp_path) == []


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


def check_interrupted(rc: int, err: str, sig: int) -> None:
    assert "Traceback" not in err, err
    assert rc == 128 + sig, (rc, err)
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"interrupted by {SIGNAL_NAMES[sig]}: "), err
    assert "kept" in last or "nothing was written" in last, last


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
        if rc == 0:  # it ended before the signal: the new run is complete
            lines = outputs[0].read_text().splitlines()
            assert len(lines) == 100 * 30 and json.loads(outputs[1].read_text())["n_queries"] == 100
            current = {p: p.read_bytes() for p in outputs}
        else:
            check_interrupted(rc, err, sig)
            assert {p: p.read_bytes() for p in outputs} == current
            interrupted += 1
        assert leftovers(root) == []
    assert interrupted  # the signals landed inside the runs, not after them


def test_signals_at_random_points_of_spacy_and_lucene_indexing_keep_the_old_index(searchable):
    root, index_seconds, _ = searchable
    index = root / "collections" / "syn" / "index"
    before = digest_tree(index)
    rng = random.Random(3)
    interrupted = 0
    for i in range(4):
        sig = (signal.SIGTERM, signal.SIGINT)[i % 2]
        delay = rng.uniform(0.05, 0.9) * index_seconds
        rc, err = interrupt(("index", "collections/syn", "--force", "--quiet"), root, delay, sig)
        if rc == 0:
            assert json.loads((index / "cmrkit-index.json").read_text())["n_units"] == 800
            before = digest_tree(index)
        else:
            check_interrupted(rc, err, sig)
            assert digest_tree(index) == before
            interrupted += 1
        assert leftovers(root) == []
    assert interrupted
    r = cmrkit(*SEARCH, "-k", "5", "--name", "after", cwd=root)
    assert r.returncode == 0, r.stderr


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


# === 5. hostile text into formats ===========================================================

HOSTILE_TEXT = (
    '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> {{TITLE}} '
    '{{TASKS}} {{SCRIPT}} ${p1_query} </script><!-- "quoted", comma'
)
HOSTILE_QIDS = ["=1+1", "@SUM(A1)", "+x", "-y", "'=q", "plain"]
HOSTILE_DOCS = ["=d1", "-d2", "@d3", "d4"]
PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
HOSTILE_TITLE = '{{SCRIPT}} <img src=x onerror="window.pwned = 3"> & {{TASKS}}'


def _inert(cell: str) -> bool:
    """No spreadsheet evaluates this cell."""
    return csv_cell(cell) == cell or cell[:1] == "'"


def _formula_free(rows) -> None:
    for row in rows:
        for cell in row:
            assert not cell or cell[0] not in "=+-@\t\r" or PLAIN_NUMBER.fullmatch(cell), cell


@pytest.fixture
def hostile(tmp_path, cli):
    ws = pool_workspace(
        tmp_path, HOSTILE_QIDS, HOSTILE_DOCS, {d: HOSTILE_TEXT for d in HOSTILE_DOCS}
    )
    r = cli("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl")
    assert r.exit_code == 0, r.output
    return ws


def _key_pairs(path: Path) -> dict[str, tuple[str, str]]:
    """pair id -> (qid, docno) of a key file, after checking that its cells are inert."""
    with open(path, newline="", encoding="utf-8") as f:
        _formula_free(csv.reader(f, delimiter="\t"))
    return {pid: (e.qid, e.docno) for pid, e in read_key(path).items()}


ALL_PAIRS = {(q, d) for q in HOSTILE_QIDS for d in HOSTILE_DOCS}


def test_mturk_batch_and_key_are_formula_free_and_results_read_back_exactly(hostile, cli):
    for blind in ("--blind", "--no-blind"):
        r = cli("pool", "export", "p.jsonl", "-f", "mturk", blind, "-o", "mt", "--force")
        assert r.exit_code == 0, r.output
        with open(hostile / "mt" / "batch-input.csv", newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        _formula_free(rows)
        layout = (hostile / "mt" / "hit-layout.html").read_text()
        assert "{{" not in layout and "pwned" not in layout
    key = _key_pairs(hostile / "mt.key.tsv")
    assert set(key.values()) == ALL_PAIRS
    header, body = rows[0], rows[1:]
    slots = [c[: -len("_pair_id")] for c in header if c.endswith("_pair_id")]
    results = io.StringIO()
    w = csv.writer(results)
    w.writerow(
        ["HITId", "WorkerId", "AssignmentStatus"]
        + [f"Input.{c}" for c in header]
        + [f"Answer.{s}_label" for s in slots]
    )
    seen = set()
    for row in body:
        cells = dict(zip(header, row, strict=True))
        n = int(cells["n_pairs"])
        for s in slots[:n]:
            seen.add(key[csv_value(cells[f"{s}_pair_id"])])
            assert "<script>" not in cells[f"{s}_candidate"]  # escaped HTML only
        # MTurk copies the batch cells into Input.* verbatim; the worker id is hostile too
        answers = ["5" if i < n else "" for i in range(len(slots))]
        w.writerow([cells["hit_id"], "=cmd|' /C calc'!A0", "Approved", *row, *answers])
    assert seen == ALL_PAIRS
    (hostile / "results.csv").write_text(results.getvalue(), encoding="utf-8")
    r = cli(
        "judgments",
        "aggregate",
        "results.csv",
        "--pool",
        "p.jsonl",
        "--key",
        "mt.key.tsv",
        "--min-agree",
        "1",
        "--min-relevant",
        "0",
        "--report",
        "rep.json",
        "-o",
        "q.txt",
    )
    assert r.exit_code == 0, r.output
    assert set(read_qrels_lines(hostile / "q.txt")) == ALL_PAIRS
    report = json.loads((hostile / "rep.json").read_text())
    assert list(report["workers"]) == ["=cmd|' /C calc'!A0"] and report["ignored_not_in_pool"] == 0


def test_jsonl_tasks_keep_the_text_as_data(hostile, cli):
    r = cli("pool", "export", "p.jsonl", "-f", "jsonl", "--no-blind", "-o", "t.jsonl")
    assert r.exit_code == 0, r.output
    tasks = [json.loads(x) for x in (hostile / "t.jsonl").read_text().splitlines()]
    assert {(t["query_id"], t["doc_id"]) for t in tasks} == ALL_PAIRS
    assert {t["candidate"]["unit"]["text"] for t in tasks} == {HOSTILE_TEXT}


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.title = ""
        self._in: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in.append(tag)

    def handle_endtag(self, tag):
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data):
        if self._in and self._in[-1] == "title":
            self.title += data


def test_html_page_escapes_text_and_never_expands_placeholders_from_data(hostile, cli):
    r = cli("pool", "export", "p.jsonl", "-f", "html", "--title", HOSTILE_TITLE, "-o", "a.html")
    assert r.exit_code == 0, r.output
    page = (hostile / "a.html").read_text()
    parser = _Page()
    parser.feed(page)
    assert [t for t, _ in parser.tags if t in ("script", "img", "iframe")] == ["script", "script"]
    assert parser.title == HOSTILE_TITLE  # shown literally, not expanded
    assert page.count('"use strict"') == 1  # the page script once: {{SCRIPT}} was not expanded
    data = page.split('<script type="application/json" id="tasks">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data  # nothing in the data can end the script element
    pairs = _key_pairs(hostile / "a.key.tsv")
    assert {pairs[t["pair"]] for t in json.loads(data)["tasks"]} == ALL_PAIRS


@needs_chromium
def test_html_page_in_the_browser_runs_no_data_and_exports_inert_csv(hostile, cli, browser):
    from selenium.webdriver.common.by import By

    r = cli("pool", "export", "p.jsonl", "-f", "html", "--title", HOSTILE_TITLE, "-o", "a.html")
    assert r.exit_code == 0, r.output
    browser.get((hostile / "a.html").as_uri())
    assert browser.title == HOSTILE_TITLE
    n = len(ALL_PAIRS)
    assert browser.find_element(By.ID, "counter").text.startswith(f"Pair 1 of {n}")
    assert "<script>" in browser.find_element(By.ID, "candidate").text  # shown as text
    worker = '=HYPERLINK("http://evil","x")'
    browser.find_element(By.ID, "worker").send_keys(worker)
    body = browser.find_element(By.TAG_NAME, "body")
    for _ in range(n):
        body.send_keys("4")
    assert browser.execute_script("return typeof window.pwned") == "undefined"
    browser.find_element(By.ID, "show-csv").click()
    text = wait_for(lambda: browser.find_element(By.ID, "csv").get_attribute("value"))
    rows = list(csv.reader(io.StringIO(text)))
    _formula_free(rows)
    column = rows[0].index("worker_id")
    assert {csv_value(r[column]) for r in rows[1:]} == {worker}
    (hostile / "page.csv").write_text(text, encoding="utf-8")
    r = cli(
        "judgments",
        "aggregate",
        "page.csv",
        "--pool",
        "p.jsonl",
        "--key",
        "a.key.tsv",
        "--min-agree",
        "1",
        "--min-relevant",
        "0",
        "--hard-threshold",
        "1",
        "--report",
        "rep.json",
        "-o",
        "q.txt",
    )
    assert r.exit_code == 0, r.output
    assert set(read_qrels_lines(hostile / "q.txt")) == ALL_PAIRS
    assert list(json.loads((hostile / "rep.json").read_text())["workers"]) == [worker]
    assert browser.execute_script("return typeof window.pwned") == "undefined"


def test_simulated_judgments_and_evaluation_tables_are_formula_free(hostile, cli):
    write_qrels(hostile / "gold.txt", {q: {d: 1 for d in HOSTILE_DOCS[:2]} for q in HOSTILE_QIDS})
    r = cli(
        "judgments",
        "simulate",
        "--qrels",
        "gold.txt",
        "--pool",
        "p.jsonl",
        "--worker-prefix",
        "=w",
        "-o",
        "sim.csv",
    )
    assert r.exit_code == 0, r.output
    with open(hostile / "sim.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    _formula_free(rows)
    assert {csv_value(r[0]) for r in rows[1:]} == set(HOSTILE_QIDS)
    r = cli(
        "judgments",
        "aggregate",
        "sim.csv",
        "--pool",
        "p.jsonl",
        "--min-agree",
        "3",
        "--min-relevant",
        "0",
        "--hard-threshold",
        "1",
        "--report",
        "rep.json",
        "-o",
        "q.txt",
    )
    assert r.exit_code == 0, r.output
    assert sorted(json.loads((hostile / "rep.json").read_text())["workers"]) == [
        "=w01",
        "=w02",
        "=w03",
    ]
    run = hostile / "runs" / "tiny" / "r.trec"
    r = cli("eval", run, "gold.txt", "-m", "AP", "-q", "-f", "csv")
    assert r.exit_code == 0, r.output
    rows = list(csv.reader(io.StringIO(r.stdout)))
    _formula_free(rows)
    assert {csv_value(r[0]) for r in rows[1:]} == {*HOSTILE_QIDS, "all"}
    other = hostile / "=a$x^{$.trec"
    other.write_bytes(run.read_bytes())
    r = cli("compare", "gold.txt", run, other, "-m", "AP", "-f", "csv", "--plot", "d.png")
    assert r.exit_code == 0, r.output
    rows = list(csv.reader(io.StringIO(r.stdout)))
    _formula_free(rows)
    assert (hostile / "d.png").read_bytes()[:4] == b"\x89PNG"


def test_escaping_round_trips_and_templates_fill_in_one_pass():
    texts = [*HOSTILE, "", "'", "'a", "-0.5", "+3", "1e-5", "-inf", "'-1", "=", "a=b", "\r\n"]
    for text in texts:
        cell = csv_cell(text)
        assert csv_value(cell) == text and _inert(cell)
    assert html_cell("=x") == "&#61;x" and html.unescape(html_cell("=x")) == "=x"
    assert fill("{{A}}-{{B}}", {"A": "{{B}}", "B": "b"}) == "{{B}}-b"
    with pytest.raises(KeyError):
        fill("{{A}}", {})


def test_file_names_from_data_are_a_safe_alphabet(tmp_path, cli):
    for bad in ("../evil", "a/b", ".hidden", "-opt", "x" * 200, "a b", "..", "é"):
        with pytest.raises(CmrkitError):
            safe_name(bad, "split name")
    record = {
        "mention_id": "m1",
        "cluster": "c1",
        "doc_id": "d1",
        "context": "Alice met Bob.",
        "start": 0,
        "end": 5,
        "split": "../../escaped",
    }
    lines = [dict(record), {**record, "mention_id": "m2", "doc_id": "d2", "context": "Alice ran."}]
    src = tmp_path / "m.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = cli("build-collection", "--source", "jsonl", "-i", src, "--name", "x")
    assert r.exit_code == 2 and "cannot be part of a file name" in r.output, r.output
    assert not list(tmp_path.rglob("*escaped*"))
    r = cli("build-collection", "--name", "../up")
    assert r.exit_code == 2 and not (tmp_path / "up").exists()


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
    from cmrkit.judgments import read_judgments

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
