"""Time `cmrkit build-collection` with N synthetic distractor passages.

Annotated data: the ECB+ train mentions (WEC-Eng shape), from ../shared/data/ecbplus-wec when
present, else the embedded sample's test file. Distractors: N deterministic 100-word passages
(plain text, one per line) drawn from a fixed vocabulary with a seeded generator.

For each N the script reports passages/s and the peak RSS of the build process, and, as a
reference measured in the same run on the same file, the time of the I/O floor: reading the
lines and writing them gzip-compressed (level 6) in one Python loop. The ratio build/floor is
the figure to compare across machines; passages/s is the absolute target (>= 30,000/s) and the
peak RSS must stay under 1 GB at 1M.

    python bench/bench_build.py            # N = 100k and 1M
    python bench/bench_build.py 20000      # a quick check
    python bench/bench_build.py --smoke    # seconds: that it runs (N = 500)
"""

from __future__ import annotations

import argparse
import gzip
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "ecbplus-wec" / "train.json.gz"
FALLBACK = ROOT / "cmrkit" / "data" / "sample" / "ecbplus.test.json.gz"


def make_distractors(path: Path, n: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(5000)] + "the a of to in and said was for on".split() * 50
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            words = rng.choices(vocab, k=99)
            f.write(f"p{i} " + " ".join(words) + "\n")


def io_floor(path: Path, out: Path) -> float:
    t = time.perf_counter()
    with open(path, encoding="utf-8") as src, gzip.open(out, "wt", compresslevel=6) as dst:
        for line in src:
            dst.write(line)
    return time.perf_counter() - t


def run_build(annotated: Path, distractors: Path, workdir: Path) -> tuple[float, float]:
    cmd = [
        sys.executable,
        "-m",
        "cmrkit",
        "build-collection",
        "-i",
        f"train={annotated}",
        "-d",
        str(distractors),
        "--name",
        "bench",
        "--force",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    subprocess.run(cmd, cwd=workdir, check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(peak, before) / 1024  # KiB -> MiB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", type=int, nargs="*", help="distractors N [default: 100000 1000000]")
    ap.add_argument("--smoke", action="store_true", help="seconds: N = 500")
    a = ap.parse_args()
    sizes = [500] if a.smoke else a.sizes or [100_000, 1_000_000]
    annotated = SHARED if SHARED.exists() else FALLBACK
    console = Console()
    table = Table(title=f"build-collection, annotated: {annotated.name}")
    for col in ("N", "build s", "passages/s", "peak RSS MiB", "I/O floor s", "build / floor"):
        table.add_column(col, justify="right")
    work = Path(tempfile.mkdtemp(prefix="cmrkit-bench-"))
    try:
        for n in sizes:
            dpath = work / f"distractors-{n}.txt"
            make_distractors(dpath, n)
            floor = io_floor(dpath, work / "floor.gz")
            elapsed, peak = run_build(annotated, dpath, work)
            table.add_row(
                f"{n:,}",
                f"{elapsed:.1f}",
                f"{n / elapsed:,.0f}",
                f"{peak:,.0f}",
                f"{floor:.1f}",
                f"{elapsed / floor:.2f}",
            )
            dpath.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    console.print(table)


if __name__ == "__main__":
    main()
