"""The whole chain at CoreSearch scale: each step's wall time and peak memory.

    python bench/bench_end_to_end.py N [--no-entities] [--data DIR] [--keep DIR]
    python bench/bench_end_to_end.py --smoke

Annotated mentions: the ECB+ dev and test mentions (``--data DIR`` with ``dev.json.gz`` and
``test.json.gz`` in WEC-Eng shape, e.g. ../shared/data/ecbplus-wec; default: the sample shipped
inside cmrkit). Distractors: N synthetic passages of about 100 words, each made of random real
sentences of the ECB+ train documents (seeded), one per line. Steps, each one `cmrkit`
subprocess in a fresh working folder and a fresh (cold) entity cache:

build-collection, index (entities on, unless --no-entities), run bm25, run fields --preset doc,
run qe, pool create (depth 30), judgments simulate (3 assessors), judgments aggregate, eval of
the three runs on the aggregated qrels; then index --force again (the entity cache warm).

Peak memory is the largest sum of the resident memory of the step's process and its children
(the NER workers), sampled every 0.1 s.
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

SAMPLE = Path(__file__).resolve().parent.parent / "cmrkit" / "data" / "sample"


def sentences(path: Path) -> list[str]:
    """The sentences of the ECB+ train documents (tokenised text, one document a line)."""
    out: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            out.extend(s.strip() + " ." for s in line.split(" . ") if len(s.split()) > 3)
    return out


def write_distractors(path: Path, n: int, pool: list[str], seed: int = 11) -> int:
    """N passages of about 100 words of random sentences; returns the number of words."""
    rng = random.Random(seed)
    words = 0
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            parts: list[str] = []
            count = 0
            while count < 100:
                s = pool[rng.randrange(len(pool))]
                parts.append(s)
                count += len(s.split())
            words += count
            f.write(" ".join(parts) + "\n")
    return words


def _tree_rss(pid: int) -> int:
    """Resident bytes of a process and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{entry}/statm", "rb") as f:
                rss[int(entry)] = int(f.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, []))
    return total


def step(name: str, args: list[str], cwd: Path, env: dict[str, str]) -> dict:
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cmrkit", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss(proc.pid))
        time.sleep(0.1)
    out = proc.stdout.read() if proc.stdout else ""
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed ({proc.returncode}):\n{out[-3000:]}")
    return {"step": name, "seconds": seconds, "peak_mib": peak / 2**20, "output": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, nargs="?", help="synthetic distractor passages")
    parser.add_argument("--no-entities", action="store_true", help="index without spaCy NER")
    parser.add_argument("--data", type=Path, help="folder with dev.json.gz and test.json.gz")
    parser.add_argument("--keep", type=Path, help="work here and keep the files")
    parser.add_argument("--smoke", action="store_true", help="that it runs: 100 passages, no NER")
    args = parser.parse_args()
    if args.smoke:
        args.n, args.no_entities = 100, True
    elif args.n is None:
        parser.error("give N, the synthetic distractor passages (or --smoke)")

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-e2e-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CMRKIT_CACHE_DIR=str(work / "cache"))
    if args.data:
        inputs = [f"dev={args.data / 'dev.json.gz'}", f"test={args.data / 'test.json.gz'}"]
    else:
        inputs = [
            f"dev={SAMPLE / 'ecbplus.dev.json.gz'}",
            f"test={SAMPLE / 'ecbplus.test.json.gz'}",
        ]
    t = time.perf_counter()
    n_words = write_distractors(
        work / "distractors.txt", args.n, sentences(SAMPLE / "ecbplus.train-documents.txt.gz")
    )
    setup_s = time.perf_counter() - t

    name = "e2e"
    coll = f"collections/{name}"
    runs = [f"runs/{name}/{r}.test.trec" for r in ("bm25", "fields-doc", "qe-rm3")]
    index = ["index", coll, "--threads", "2", "--quiet"]
    if args.no_entities:
        index.append("--no-entities")
    plan = [
        (
            "build-collection",
            ["build-collection", *sum((["-i", i] for i in inputs), [])]
            + ["-d", str(work / "distractors.txt"), "--name", name, "--force"],
        ),
        ("index" + (" (no entities)" if args.no_entities else " (entities)"), index),
        ("run bm25", ["run", "bm25", coll, "--quiet"]),
        ("run fields --preset doc", ["run", "fields", coll, "--preset", "doc", "--quiet"]),
        ("run qe (rm3)", ["run", "qe", coll, "--quiet"]),
        (
            "pool create --depth 30",
            ["pool", "create", *runs, "--depth", "30", "-o", f"pools/{name}.pool.jsonl"],
        ),
        (
            "judgments simulate",
            [
                "judgments",
                "simulate",
                "--qrels",
                f"qrels/{name}.test.txt",
                "--pool",
                f"pools/{name}.pool.jsonl",
                "--assessors",
                "3",
                "--noise",
                "0.1",
                "-o",
                "pools/round1.csv",
            ],
        ),
        (
            "judgments aggregate",
            [
                "judgments",
                "aggregate",
                "pools/round1.csv",
                "--pool",
                f"pools/{name}.pool.jsonl",
                "-o",
                f"qrels/{name}.pooled.txt",
            ],
        ),
        *(
            (
                f"eval {Path(r).stem.split('.')[0]}",
                ["eval", r, f"qrels/{name}.pooled.txt", "-m", "infAP", "-m", "AP"],
            )
            for r in runs
        ),
    ]
    if not args.no_entities:
        plan.append(("index --force (cache warm)", [*index, "--force"]))
    results = []
    for label, argv in plan:
        results.append(step(label, argv, work, env))
        print(
            f"{label}: {results[-1]['seconds']:.1f} s, peak {results[-1]['peak_mib']:,.0f} MiB",
            flush=True,
        )

    chain = [r for r in results if not r["step"].startswith("index --force")]
    table = Table(
        title=f"end to end: ECB+ mentions + {args.n:,} distractors ({n_words:,} words)",
        title_justify="left",
    )
    for col in ("step", "seconds", "peak MiB"):
        table.add_column(col, justify="left" if col == "step" else "right")
    for r in results:
        table.add_row(r["step"], f"{r['seconds']:.1f}", f"{r['peak_mib']:,.0f}")
    table.add_row(
        "whole chain",
        f"{sum(r['seconds'] for r in chain):.1f}",
        f"{max(r['peak_mib'] for r in chain):,.0f}",
    )
    console = Console(width=100)
    console.print(table)
    console.print(
        f"distractor text written in {setup_s:.1f} s (not counted); work folder {work}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
