"""Time `cmrkit pool plan` on the embedded sample: three runs, 1,127 queries.

Usage: python bench/bench_plan.py [--budgets 5,10,20,30,50]
       python bench/bench_plan.py --smoke   (seconds: 3 seeded runs of 40 sample queries, made here)

Needs the sample's test runs (from the repository root):
    cmrkit build-collection && cmrkit index && cmrkit run bm25 && cmrkit run fields --preset doc
    && cmrkit run qe --method rocchio --base fields --preset doc

Each step is one `cmrkit` subprocess (start-up included); wall and CPU seconds (the child's
user + system time, which other jobs on a shared machine disturb less than the wall clock) are
printed with the load average. Reference in the same run: `cmrkit pool create --depth 100` of
the same runs (reading and pooling them once, what every plan starts with).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

RUNS = [
    Path("runs/sample/bm25.test.trec"),
    Path("runs/sample/fields-doc.test.trec"),
    Path("runs/sample/qe-rocchio-fields-doc.test.trec"),
]
FIVE = "depth,rbp,rrf,mtf,maxmean"
SIX = FIVE + ",strata"


def timed(args: list[str]) -> tuple[float, float]:
    """(wall, cpu) seconds of one cmrkit subprocess."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "cmrkit", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wall = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"cmrkit {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def write_smoke_inputs(root: Path, queries: int = 40, docs: int = 60) -> list[str]:
    """The sample collection and its qrels (`cmrkit build-collection`), and three seeded runs of
    RUNS' names over its first ``queries`` test queries (the qrels kept to them), each ranking
    ``docs`` of its units with the relevant ones nearer the top; returns the options that name
    the collection."""
    import random

    from cmrkit.collection.layout import iter_corpus, read_topics

    subprocess.run(
        [sys.executable, "-m", "cmrkit", "build-collection"],
        cwd=root,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    coll = root / "collections" / "sample"
    units = sorted(u["id"] for _, u in iter_corpus(coll))
    qids = [t.qid for t in read_topics(coll, "test")][:queries]
    qrels = root / "qrels" / "sample.test.txt"  # kept to the runs' queries
    kept = [
        line for line in qrels.read_text(encoding="utf-8").splitlines() if line.split()[0] in qids
    ]
    qrels.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
    relevant: dict[str, set[str]] = {}
    for qid, _, docno, grade in map(str.split, kept):
        if int(grade) > 0:
            relevant.setdefault(qid, set()).add(docno)
    rng = random.Random(0)
    for n, run in enumerate(RUNS):
        (root / run).parent.mkdir(parents=True, exist_ok=True)
        lines = []
        for q in qids:
            picked = sorted(set(rng.sample(units, docs)) | relevant.get(q, set()))
            order = sorted(picked, key=lambda d: rng.random() - 0.3 * (d in relevant.get(q, ())))
            lines += [f"{q} Q0 {d} {r} {len(order) - r} s{n}\n" for r, d in enumerate(order, 1)]
        (root / run).write_text("".join(lines), encoding="utf-8")
    return ["--collection", "collections/sample"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", default="5,10,20,30,50", help="per-query budgets")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="seconds: 3 seeded runs of 40 sample queries, budgets 5,10",
    )
    args = parser.parse_args()
    if args.smoke:
        args.budgets = "5,10"
        os.chdir(tempfile.mkdtemp(prefix="cmrkit-bench-plan-"))
        collection = write_smoke_inputs(Path.cwd())
    else:
        collection = []
    missing = [str(r) for r in RUNS if not r.is_file()]
    if missing:
        sys.exit(f"missing {', '.join(missing)}: build the sample's runs first (see --help)")
    with open("qrels/sample.test.txt", encoding="utf-8") as f:
        queries = len({line.split()[0] for line in f if line.strip()})
    per_query = [int(b) for b in args.budgets.split(",")]
    total = ",".join(str(b * queries) for b in per_query)
    runs = [str(r) for r in RUNS]
    plan = ["pool", "plan", *runs, "--qrels", "qrels/sample.test.txt", *collection]
    with tempfile.TemporaryDirectory() as tmp:
        steps = [
            ("reference: pool create --depth 100", ["pool", "create", *runs, "--depth", "100",
                                                    "-o", f"{tmp}/p.jsonl", *collection]),
            (f"plan: 5 strategies x {len(per_query)} budgets per query",
             [*plan, "--budgets", args.budgets, "--per-query", "--strategies", FIVE]),
            (f"plan: 6 strategies (+strata) x {len(per_query)} per query",
             [*plan, "--budgets", args.budgets, "--per-query", "--strategies", SIX]),
            (f"plan: 5 strategies x {len(per_query)} budgets in total",
             [*plan, "--budgets", total, "--strategies", FIVE]),
        ]  # fmt: skip
        rows = []
        for label, cmd in steps:
            load = os.getloadavg()[0]
            wall, cpu = timed(cmd)
            rows.append((label, wall, cpu, load))
    ref_cpu = rows[0][2]
    table = Table(title=f"pool plan on the sample ({queries} queries, 3 runs)")
    for c in ("step", "wall s", "cpu s", "cpu / reference", "load avg"):
        table.add_column(c, justify="left" if c == "step" else "right")
    for label, wall, cpu, load in rows:
        table.add_row(label, f"{wall:.1f}", f"{cpu:.1f}", f"{cpu / ref_cpu:.1f}", f"{load:.1f}")
    Console().print(table)


if __name__ == "__main__":
    main()
