"""Time `cmrkit compare` of many runs with bootstrap intervals (issue 31: 10 runs x 1,000
queries with 10,000 bootstrap resamples in under 5 s).

Usage: python bench/bench_compare.py [--runs 10] [--queries 1000] [--docs 100]
       [--bootstrap 10000] [--repeat 3] [--smoke]

Writes seeded runs (queries x docs lines each, the systems a little apart) and qrels to a
temporary folder, then runs, interleaved, as subprocesses: `cmrkit compare QRELS RUN...
-m AP -m RR@10 -f json` with `--bootstrap 0` (the reference: scoring and the t-test, no
intervals), with `--bootstrap N` (every mean and difference with its interval), with
`--bootstrap N --test bootstrap`, and with `--bootstrap 0 --all-pairs` (Tukey's HSD). Prints
the minimum and median wall time of each, its median minus the reference's, and the median CPU
seconds the subprocess used (user + system: what the command costs, which a loaded machine does
not stretch as it stretches wall time), with the CPU seconds of starting Python with numpy and
with scipy.stats (the start-up every command pays); checks that two runs of the same command
print the same JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_files(folder: Path, runs: int, queries: int, docs: int, seed: int = 0):
    r = random.Random(seed)
    qrels = folder / "qrels.txt"
    relevant = {}
    with open(qrels, "w") as g:
        for q in range(queries):
            rel = r.sample(range(docs * 5), 8)
            relevant[q] = set(rel)
            for d in rel:
                g.write(f"q{q} 0 D{d} 1\n")
    paths = []
    for s in range(runs):
        path = folder / f"sys{s}.trec"
        with open(path, "w") as f:
            for q in range(queries):
                scored = [
                    (r.random() + (0.02 * s + 0.3 if d in relevant[q] else 0.0), d)
                    for d in r.sample(range(docs * 5), docs)
                ]
                for i, (score, d) in enumerate(sorted(scored, reverse=True)):
                    f.write(f"q{q} Q0 D{d} {i + 1} {score:.6f} sys{s}\n")
        paths.append(path)
    return qrels, paths


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """Wall and CPU (user + system) seconds of a subprocess, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{done.stderr}")
    return seconds, cpu, done.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--bootstrap", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="3 runs x 50 queries, 500 resamples")
    args = ap.parse_args()
    if args.smoke:
        args.runs, args.queries, args.docs, args.bootstrap, args.repeat = 3, 50, 20, 500, 1
    cmrkit = [sys.executable, "-m", "cmrkit"]
    with tempfile.TemporaryDirectory() as tmp:
        qrels, runs = write_files(Path(tmp), args.runs, args.queries, args.docs)
        base = [*cmrkit, "compare", str(qrels), *map(str, runs), "-m", "AP", "-m", "RR@10"]
        variants = {
            "reference (--bootstrap 0)": [*base, "--bootstrap", "0", "-f", "json"],
            f"--bootstrap {args.bootstrap}": [*base, "--bootstrap", str(args.bootstrap),
                                              "-f", "json"],
            f"--bootstrap {args.bootstrap} --test bootstrap": [
                *base, "--bootstrap", str(args.bootstrap), "--test", "bootstrap", "-f", "json"],
            "--bootstrap 0 --all-pairs (Tukey's HSD)": [
                *base, "--bootstrap", "0", "--all-pairs", "-f", "json"],
        }  # fmt: skip
        variants |= {
            "start-up: python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
            "start-up: python -c 'import scipy.stats'": [
                sys.executable, "-c", "import scipy.stats"],
        }  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in variants}
        cpus: dict[str, list[float]] = {name: [] for name in variants}
        outputs: dict[str, set[str]] = {name: set() for name in variants}
        for _ in range(args.repeat):
            for name, cmd in variants.items():
                seconds, cpu, out = timed(cmd)
                times[name].append(seconds)
                cpus[name].append(cpu)
                outputs[name].add(out)
        for name, seen in outputs.items():
            if len(seen) != 1:
                sys.exit(f"{name}: two runs of the same command printed different JSON")
        some = json.loads(next(iter(outputs[f"--bootstrap {args.bootstrap}"])))
        assert some["systems"]["sys1"]["against_baseline"]["AP"]["delta_ci"] is not None
    reference = statistics.median(times["reference (--bootstrap 0)"])
    print(
        f"compare of {args.runs} runs x {args.queries} queries ({args.docs} documents each), "
        f"2 measures; wall seconds over {args.repeat} interleaved runs"
    )
    print(f"{'command':<58} {'min':>7} {'median':>7} {'- ref':>7} {'CPU':>7}")
    for name, values in times.items():
        median = statistics.median(values)
        cpu = statistics.median(cpus[name])
        delta = "" if name.startswith("start-up") else f"{median - reference:.2f}"
        print(f"{name:<58} {min(values):7.2f} {median:7.2f} {delta:>7} {cpu:7.2f}")


if __name__ == "__main__":
    main()
