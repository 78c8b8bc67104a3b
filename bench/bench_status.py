"""Time `cmrkit status` reading runs the first time (scoring each) and again (figures kept in the
runs' sidecars).

Usage: python bench/bench_status.py [--runs 11] [--depth 300] [--repeat 2] [--smoke]

Builds the embedded sample in a temporary folder (no index: status does not need one) and writes
RUNS seeded runs of its test split (1,127 queries x DEPTH units each: 11 x 300 is 3.7M lines,
the size of the working folder issue 22 measured), each with a sidecar as `cmrkit run` writes
one. Then, REPEAT times: drops the kept figures and times `cmrkit status` (cold: every run read
and scored), then times it again (warm: read from the sidecars). Prints the minimum wall time of
each and the ratio.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cmrkit(root: Path, *args: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "cmrkit", *args],
        cwd=root,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "100"},
    )
    return time.perf_counter() - start


def write_runs(root: Path, n_runs: int, depth: int) -> int:
    coll = root / "collections" / "sample"
    with gzip.open(coll / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        units = [json.loads(line)["id"] for line in f]
    topics = [json.loads(line) for line in (coll / "topics.jsonl").read_text().splitlines()]
    qids = [t["qid"] for t in topics if t["split"] == "test"]
    folder = root / "runs" / "sample"
    folder.mkdir(parents=True)
    lines = 0
    for n in range(n_runs):
        rng = random.Random(n)
        name = f"sys{n:02d}"
        with open(folder / f"{name}.test.trec", "w", encoding="utf-8") as f:
            for q in qids[: len(qids) - n]:  # runs answer different numbers of queries
                for rank, doc in enumerate(rng.sample(units, min(depth, len(units))), 1):
                    f.write(f"{q} Q0 {doc} {rank} {100 - rank * 0.01:.6f} {name}\n")
                    lines += 1
        sidecar = {"name": name, "system": "bm25", "split": "test", "identity": {"n": n}}
        (folder / f"{name}.test.json").write_text(json.dumps(sidecar, indent=2) + "\n")
    return lines


def drop_kept(root: Path) -> None:
    for path in (root / "runs" / "sample").glob("*.json"):
        sidecar = json.loads(path.read_text())
        sidecar.pop("headline", None)
        path.write_text(json.dumps(sidecar, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--depth", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--smoke", action="store_true", help="seconds: 2 runs of depth 20, once")
    a = ap.parse_args()
    if a.smoke:
        a.runs, a.depth, a.repeat = 2, 20, 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cmrkit(root, "build-collection")
        lines = write_runs(root, a.runs, a.depth)
        cold, warm = [], []
        for _ in range(a.repeat):
            drop_kept(root)
            cold.append(cmrkit(root, "status", "sample"))
            warm.append(cmrkit(root, "status", "sample"))
        print(f"{a.runs} runs, {lines:,} lines; load average {os.getloadavg()[0]:.1f}")
        print("| status | min s |")
        print("|---|---:|")
        print(f"| first (every run read and scored) | {min(cold):.2f} |")
        print(f"| again (figures from the sidecars) | {min(warm):.2f} |")
        print(f"| ratio | {min(cold) / min(warm):.1f}x |")


if __name__ == "__main__":
    main()
