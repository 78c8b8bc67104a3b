"""How fast a signal ends a command, at several points of a real search and a real index build.

Usage: python bench/bench_interrupts.py [--units 800] [--queries 100] [--points 5] [--smoke]

Writes (seeded) a collection of UNITS short units with a few names (for spaCy's NER) and QUERIES
topics, indexes it, and runs `cmrkit run bm25` once; each command's full duration T is timed.
Then each command is started again with --force and sent SIGINT (odd points: SIGTERM) at POINTS
evenly spaced fractions of T after its signal handlers are in place; the table shows the seconds
from the signal to the end of the process, the exit code, whether the previous output is
byte-identical afterwards, and whether anything was left behind (staging folders, lock files). A
last row times a main thread blocked for good inside one Java call (only the watchdog can end
that process).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["Alice Martin", "Bob Chen", "Paris", "Berlin", "Acme Corp", "Tokyo", "Nairobi", "Oslo"]
SYLLABLES = [a + b for a in ("ka", "lo", "mi", "su", "te", "ra") for b in ("rin", "dos", "mel")]
STUCK = """
import threading, time
from pathlib import Path
from cmrkit import interrupts
from cmrkit.fileio import StagedOutputs
from cmrkit.retrieval.java import jclass
latch = jclass("java.util.concurrent.CountDownLatch")(1)
main = jclass("java.lang.Thread").currentThread()
def ready():
    while main.getState().toString() != "WAITING":
        time.sleep(0.01)
    print("ready", flush=True)
with interrupts.handling():
    with StagedOutputs([Path("out.txt")]) as staged:
        staged.path(Path("out.txt")).write_text("half")
        threading.Thread(target=ready, daemon=True).start()
        getattr(latch, "await")()
"""


def make_collection(root: Path, units: int, queries: int) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from retrieval_collection import topic, unit, write_collection

    rng = random.Random(7)
    us, ts = [], []
    for i in range(units):
        words = " ".join(rng.choice(SYLLABLES) for _ in range(25))
        us.append(unit(f"D:{i}", f"{words} near {rng.choice(NAMES)} and {rng.choice(NAMES)}."))
    for q in range(queries):
        text = us[q]["contents"]
        ts.append(topic(f"q{q}", "test", text.split()[3], text, us[q]["id"]))
    write_collection(root, "syn", us, ts)


def _reset() -> None:
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_DFL)


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cmrkit", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_reset,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def wait_for_handlers(proc: subprocess.Popen) -> None:
    """Until cmrkit's handlers are in place (SIGTERM caught): before, Python is starting."""
    while proc.poll() is None:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
        except FileNotFoundError:
            return
        caught = int(next(x for x in status.splitlines() if x.startswith("SigCgt:")).split()[1], 16)
        if caught & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.005)


def digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")) if path.is_dir() else [path]:
        if p.is_file():
            h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


def leftovers(root: Path) -> int:
    return sum(
        1
        for p in root.rglob("*")
        if p.name.startswith(".cmrkit-staging-") or p.name.endswith(".cmrkit-lock")
    )


def timed(args: list[str], cwd: Path) -> float:
    t = time.monotonic()
    proc = start(args, cwd)
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {err}")
    return time.monotonic() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=800)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--points", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="seconds: 100 units, 10 queries, 1 point")
    a = ap.parse_args()
    if a.smoke:
        a.units, a.queries, a.points = 100, 10, 1
    table = Table(title=f"interrupts ({a.units} units, {a.queries} queries)")
    for col in ("command", "T s", "at s", "signal", "exit", "to end s", "kept", "left"):
        table.add_column(col, justify="left" if col in ("command", "signal") else "right")
    with tempfile.TemporaryDirectory(prefix="cmrkit-bench-") as tmp:
        root = Path(tmp)
        make_collection(root, a.units, a.queries)
        commands = {
            "index": (
                ["index", "collections/syn", "--quiet"],
                root / "collections" / "syn" / "index",
            ),
            "run bm25": (
                ["run", "bm25", "collections/syn", "--query", "mention", "--quiet", "--name", "r"],
                root / "runs" / "syn" / "r.test.trec",
            ),
        }
        for label, (args, output) in commands.items():
            total = timed(args, root)
            for i in range(a.points):
                sig = signal.SIGINT if i % 2 == 0 else signal.SIGTERM
                at = total * (i + 0.5) / a.points
                before = digest(output)
                proc = start([*args, "--force"], root)
                wait_for_handlers(proc)
                time.sleep(at)
                proc.send_signal(sig)
                t = time.monotonic()
                proc.communicate()
                took = time.monotonic() - t
                same = digest(output) == before
                kept = "done" if proc.returncode == 0 else "yes" if same else "NO"
                table.add_row(
                    label,
                    f"{total:.1f}",
                    f"{at:.1f}",
                    signal.Signals(sig).name,
                    str(proc.returncode),
                    f"{took:.2f}",
                    kept,
                    str(leftovers(root)),
                )
        proc = subprocess.Popen(
            [sys.executable, "-c", STUCK],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_reset,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        t = time.monotonic()
        proc.communicate()
        table.add_row(
            "in Java",
            "-",
            "-",
            "SIGINT",
            str(proc.returncode),
            f"{time.monotonic() - t:.2f}",
            "yes" if not (root / "out.txt").exists() else "NO",
            str(leftovers(root)),
        )
    Console(width=80).print(table)
    print("index: spaCy NER then Lucene; in Java: the main thread blocked for good in one call;")
    print("kept: the previous output byte-identical (done: it finished before the signal)")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
