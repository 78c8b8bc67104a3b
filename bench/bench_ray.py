"""The Ray engine on this machine: 1 worker against 2, with the single machine as reference.

    python bench/bench_ray.py [N] [--no-entities] [--rounds R] [--keep DIR] [--smoke]

Collection: the ECB+ sample's dev and test mentions plus N synthetic distractor passages of about
100 words (real ECB+ train sentences, seeded; default N = 10,000). Each step is one `cmrkit`
subprocess (a fresh Ray cluster each time, as a user would start it), its wall time and peak
memory (the process and all its descendants, Ray's workers included) measured; every index step
starts from a cold entity cache, so NER is measured:

- index: local --threads 1, local --threads 2, --engine ray --workers 1, --engine ray --workers 2
  (the Ray rows also show the manifest's own split: Ray start, corpus split, shards, merge);
- run bm25 and run qe (RM3), k=1000, mention queries of the test split: local, ray --workers 1,
  ray --workers 2.

The steps run R times in turn (default 2; the load of a shared machine drifts) and each keeps
its best wall time. The Ray indexes are checked to carry the single-machine index id, and every
run file to be the same bytes as the local one (the runs search the index the last index step
wrote; tests/test_distributed.py compares the indexes term by term). Last, the size of each
index on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_end_to_end import SAMPLE, sentences, step, write_distractors  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", type=int, nargs="?", default=10_000, help="distractor passages")
    parser.add_argument("--no-entities", action="store_true", help="index without spaCy NER")
    parser.add_argument("--rounds", type=int, default=2, help="rounds (best time kept)")
    parser.add_argument("--keep", type=Path, help="work here and keep the files")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="that it runs: 200 passages, no NER, index and bm25 locally and on 1 Ray worker, once",
    )
    args = parser.parse_args()
    if args.smoke:
        args.n, args.rounds, args.no_entities = 200, 1, True

    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-ray-"))
    work.mkdir(parents=True, exist_ok=True)
    write_distractors(
        work / "distractors.txt", args.n, sentences(SAMPLE / "ecbplus.train-documents.txt.gz")
    )
    coll = "collections/ray"
    env = dict(os.environ, CMRKIT_CACHE_DIR=str(work / "cache-build"))
    step(
        "build-collection",
        [
            "build-collection",
            "-i",
            f"dev={SAMPLE / 'ecbplus.dev.json.gz'}",
            "-i",
            f"test={SAMPLE / 'ecbplus.test.json.gz'}",
            "-d",
            str(work / "distractors.txt"),
            "--name",
            "ray",
            "--force",
        ],
        work,
        env,
    )
    manifest_path = work / coll / "index" / "cmrkit-index.json"
    entities = ["--no-entities"] if args.no_entities else []
    ray1, ray2 = ["--engine", "ray", "--workers", "1"], ["--engine", "ray", "--workers", "2"]
    steps = [
        ("index", "local, 1 thread", ["--threads", "1"]),
        ("index", "local, 2 threads", ["--threads", "2"]),
        ("index", "ray, 1 worker", ray1),
        ("index", "ray, 2 workers", ray2),
    ]
    for system in ("bm25", "qe"):
        steps += [
            (f"run {system}", "local", []),
            (f"run {system}", "ray, 1 worker", ray1),
            (f"run {system}", "ray, 2 workers", ray2),
        ]
    if args.smoke:
        smoke = {"local, 2 threads", "local", "ray, 1 worker"}
        steps = [s for s in steps if s[1] in smoke and s[0] != "run qe"]
    best: dict[tuple[str, str], tuple] = {}
    index_ids, run_bytes, on_disk = set(), {}, {}
    for _ in range(args.rounds):  # rounds alternate the engines; each keeps its best time
        for what, label, extra in steps:
            folder = label.replace(", ", "-").replace(" ", "")
            if what == "index":
                cache = work / "cache" / folder
                shutil.rmtree(cache, ignore_errors=True)  # cold: NER is measured
                run_env = dict(os.environ, CMRKIT_CACHE_DIR=str(cache))
                command = ["index", coll, "--force", "--quiet", *entities, *extra]
                r = step(label, command, work, run_env)
                record = json.loads(manifest_path.read_text(encoding="utf-8"))
                index_ids.add(record["index_id"])
                size = record["n_units"]
                on_disk[label] = sum(f.stat().st_size for f in manifest_path.parent.rglob("*"))
            else:
                system = what.split()[1]
                runs = work / "runs" / folder
                command = ["run", system, coll, "--query", "mention", "--runs-dir", str(runs)]
                r = step(label, [*command, "--quiet", "--force", *extra], work, env)
                name = f"{'bm25' if system == 'bm25' else 'qe-rm3'}-mention.test"
                record = json.loads((runs / "ray" / f"{name}.json").read_text())
                run_bytes.setdefault(system, set()).add(
                    (runs / "ray" / f"{name}.trec").read_bytes()
                )
                size = record["n_queries"]
            key = (what, label)
            if key not in best or r["seconds"] < best[key][0]["seconds"]:
                peak = max(r["peak_mib"], best[key][0]["peak_mib"] if key in best else 0)
                best[key] = ({**r, "peak_mib": peak}, record["seconds"], size)
    assert len(index_ids) == 1, "the Ray indexes differ from the single-machine index"
    assert all(len(v) == 1 for v in run_bytes.values()), "a Ray run differs from the local one"
    rows = [(what, label, *best[(what, label)]) for what, label, _ in steps]

    table = Table(
        title=f"cmrkit on Ray: {rows[0][4]:,} units ({'no ' if args.no_entities else ''}NER), "
        f"{rows[-1][4]:,} queries; best of {args.rounds}; {time.strftime('%Y-%m-%d')}"
    )
    for col in ("step", "engine", "wall s", "vs 1 worker", "peak MiB", "Ray start", "work s"):
        table.add_column(col, justify="left" if col in ("step", "engine") else "right")
    one = {what: r["seconds"] for what, label, r, _, _ in rows if label == "ray, 1 worker"}
    for what, label, r, seconds, _ in rows:
        if "connect" in seconds:  # a Ray index: start, then split + shards + merge
            start = f"{seconds['connect']:.1f}"
            work_s = seconds["split"] + seconds["shards"] + seconds["merge"]
        else:
            start, work_s = "", seconds["total"] if what == "index" else seconds["search"]
        table.add_row(
            what,
            label,
            f"{r['seconds']:.1f}",
            f"{one[what] / r['seconds']:.2f}x",
            f"{r['peak_mib']:.0f}",
            start,
            f"{work_s:.1f}",
        )
    Console(width=100).print(table)
    print(
        "vs 1 worker: wall time of `--engine ray --workers 1` / this row's (above 1: faster). "
        "work s: index: the manifest's time (Ray: split + shards + merge, without the Ray "
        "start); run: the sidecar's search time (Ray: workers' start-up included)."
    )
    units = rows[0][4]
    for label, size in on_disk.items():
        mib, per_unit = size / 2**20, size / units
        print(f"index on disk, {label}: {mib:.1f} MiB ({per_unit:,.0f} bytes per unit)")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
