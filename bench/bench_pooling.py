"""Time the pooling and judgments pipeline on a synthetic collection, command by command.

Usage: python bench/bench_pooling.py [--queries 500] [--docs 20000] [--runs 5] [--run-depth 1000]
       python bench/bench_pooling.py --smoke   # seconds: that it runs

Writes (seeded) a collection of DOCS passage units of about 60 words, QUERIES topics, RUNS runs of
RUN-DEPTH documents per query, and complete qrels (20 relevant per query); then times, each as a
`cmrkit` subprocess (start-up included): pool create (depth 30), pool export to html, mturk and
jsonl, judgments simulate (3 assessors), judgments aggregate, and pool bias. Prints one table.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from cmrkit.fileio import gzip_writer

WORDS = [f"w{i}" for i in range(2000)]


def make_inputs(root: Path, queries: int, docs: int, runs: int, depth: int) -> list[Path]:
    rng = random.Random(0)
    coll = root / "collections" / "bench"
    coll.mkdir(parents=True)
    with gzip_writer(coll / "corpus.jsonl.gz") as f:
        for d in range(docs):
            text = " ".join(rng.choice(WORDS) for _ in range(60))
            rec = {
                "id": f"D:{d}",
                "contents": text,
                "doc_id": f"doc{d}",
                "title": f"Doc {d}",
                "kind": "annotated",
                "mentions": [{"mention_id": f"m{d}", "cluster": "c", "start": 0, "end": 4}],
            }
            f.write(json.dumps(rec) + "\n")
    with open(coll / "topics.jsonl", "w", encoding="utf-8") as f:
        for q in range(queries):
            ctx = " ".join(rng.choice(WORDS) for _ in range(40))
            f.write(
                json.dumps(
                    {
                        "qid": f"q{q}",
                        "split": "test",
                        "context": ctx,
                        "span": [0, 4],
                        "unit": f"U:{q}",
                        "mention": ctx[:4],
                    }
                )
                + "\n"
            )
    (root / "qrels").mkdir()
    relevant = {q: rng.sample(range(docs), 20) for q in range(queries)}
    with open(root / "qrels" / "truth.txt", "w", encoding="utf-8") as f:
        for q, ds in relevant.items():
            for d in sorted(ds):
                f.write(f"q{q} 0 D:{d} 1\n")
    paths = []
    (root / "runs" / "bench").mkdir(parents=True)
    for r in range(runs):
        path = root / "runs" / "bench" / f"sys{r}.trec"
        with open(path, "w", encoding="utf-8") as f:
            for q in range(queries):
                hits = set(rng.sample(relevant[q], 10))
                while len(hits) < depth:
                    hits.add(rng.randrange(docs))
                order = sorted(hits, key=lambda d: (d not in relevant[q], rng.random()))
                for rank, d in enumerate(order, 1):
                    f.write(f"q{q} Q0 D:{d} {rank} {depth - rank + 1} sys{r}\n")
        paths.append(path)
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--docs", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--run-depth", type=int, default=1000)
    ap.add_argument("--smoke", action="store_true", help="a few seconds: 5 x 300, 2 runs x 50")
    a = ap.parse_args()
    if a.smoke:
        a.queries, a.docs, a.runs, a.run_depth = 5, 300, 2, 50
    cmrkit = str(Path(sys.executable).with_name("cmrkit"))
    root = Path(tempfile.mkdtemp(prefix="cmrkit-bench-pool-"))
    try:
        t = time.perf_counter()
        runs = make_inputs(root, a.queries, a.docs, a.runs, a.run_depth)
        console = Console(stderr=True)
        console.print(f"inputs written in {time.perf_counter() - t:.1f} s under {root}")
        run_args = [str(p.relative_to(root)) for p in runs]
        steps = [
            ("pool create --depth 30", ["pool", "create", *run_args, "-o", "pool.jsonl"]),
            ("pool export html", ["pool", "export", "pool.jsonl", "-f", "html", "-o", "a.html"]),
            (
                "pool export mturk",
                [
                    "pool",
                    "export",
                    "pool.jsonl",
                    "-f",
                    "mturk",
                    "--gold",
                    "qrels/truth.txt",
                    "--gold-per-hit",
                    "1",
                    "-o",
                    "mturk",
                ],
            ),
            ("pool export jsonl", ["pool", "export", "pool.jsonl", "-f", "jsonl", "-o", "t.jsonl"]),
            (
                "judgments simulate -a 3",
                [
                    "judgments",
                    "simulate",
                    "--qrels",
                    "qrels/truth.txt",
                    "--pool",
                    "pool.jsonl",
                    "--assessors",
                    "3",
                    "-o",
                    "sim.csv",
                ],
            ),
            (
                "judgments aggregate",
                [
                    "judgments",
                    "aggregate",
                    "sim.csv",
                    "--pool",
                    "pool.jsonl",
                    "--min-agree",
                    "3",
                    "-o",
                    "qrels/pooled.txt",
                ],
            ),
            (
                "pool bias (infAP)",
                ["pool", "bias", "pool.jsonl", *run_args, "--qrels", "qrels/pooled.txt"],
            ),
        ]
        table = Table(
            title=f"pooling pipeline: {a.queries} queries, {a.runs} runs x "
            f"{a.run_depth}, {a.docs} units"
        )
        for c in ("step", "seconds", "output"):
            table.add_column(c, justify="left" if c != "seconds" else "right")
        pairs = None
        for name, args in steps:
            t = time.perf_counter()
            done = subprocess.run(
                [cmrkit, *args],
                cwd=root,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            dt = time.perf_counter() - t
            if done.returncode:
                sys.exit(
                    f"cmrkit {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}"
                )
            out = root / args[args.index("-o") + 1] if "-o" in args else None
            size = ""
            if out is not None:
                nbytes = (
                    sum(p.stat().st_size for p in out.rglob("*"))
                    if out.is_dir()
                    else out.stat().st_size
                )
                size = f"{nbytes / 1e6:.1f} MB"
            if pairs is None:
                pairs = sum(1 for _ in open(root / "pool.jsonl")) - 1
                size += f", {pairs} pairs"
            table.add_row(name, f"{dt:.2f}", size)
        Console().print(table)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
