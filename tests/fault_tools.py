"""What the fault tests share: the real CLI run as its own process, one-line error checks,
file digests and leftovers, tmpfs and read-only mounts (root), and small pipelines."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from pool_fixtures import write_collection, write_run

from cmrkit.fileio import LOCK_SUFFIX, STAGING_PREFIX

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


def start(*args, cwd: Path, **popen) -> subprocess.Popen:
    """``cmrkit ARGS`` as a child with a terminal's signal dispositions (``popen``: more of
    Popen's arguments, e.g. ``start_new_session``)."""
    return subprocess.Popen(
        [sys.executable, "-m", "cmrkit", *map(str, args)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_child_signals,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        **popen,
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


# --- processes a command left behind (Ray's) -----------------------------------------------


def processes_marked(mark: str) -> list[str]:
    """Command lines of the live processes whose environment holds ``CMRKIT_TEST_MARK=mark``
    (Ray's processes inherit the environment of the command that started them)."""
    found = []
    needle = f"CMRKIT_TEST_MARK={mark}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120])
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def left_behind(mark: str, wait: float = 20.0) -> list[str]:
    """The marked processes still alive after up to ``wait`` seconds."""
    import time

    deadline = time.monotonic() + wait
    while (found := processes_marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return found
