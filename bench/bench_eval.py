"""Time `cmrkit eval` (default measures) against the trec_eval C binary on the same files.

Usage: python bench/bench_eval.py [--queries 1000] [--docs 1000] [--repeat 5] [--trec-eval PATH]
       python bench/bench_eval.py --smoke   (seconds: 20 queries x 50 documents, once)
       python bench/bench_eval.py --all-trec --trec-eval PATH/10.0/trec_eval [--repeat 3]
       python bench/bench_eval.py --against /tmp/base [--repeat 9]   (this tree against another)

Writes a seeded run (queries x docs lines, with ties) and qrels (300 judgments per query, grades
-1..2) to a temporary folder, then runs, interleaved, `cmrkit eval RUN QRELS` (default measures,
table output) and `trec_eval` computing the trec_eval counterparts of the same measures in one
call (RR@10 -> recip_rank; Judged@10 has none), each as a subprocess. Prints the minimum and
median wall time of each and the ratio, and checks that the shared measures agree.
By default trec_eval is the linux-amd64 binary shipped in the Anserini jar inside Pyserini.

With --against DIR: also `cmrkit eval` from another source tree (DIR on PYTHONPATH, e.g. a
`git worktree add DIR COMMIT` of an earlier commit), interleaved with this tree's, after checking
that the two write the same bytes; the last line gives this tree's time over DIR's (min wall,
min CPU), measured in the same session, so that a change's cost is read against the same load.

With --all-trec: `trec_eval -q -m all_trec QRELS RUN` (give a 10.0 binary built from
../shared/tools/trec_eval/10.0 with `make`) against `cmrkit eval RUN QRELS -q -m all_trec -f trec
--trec-eval 10`, after checking that the two outputs are byte-identical.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import resource
import stat
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

TREC_EVAL_MEASURES = [
    "infAP", "map", "map_cut.10,50", "recip_rank", "recall.10,50,100,500", "P.10", "ndcg_cut.10",
]  # fmt: skip
SHARED = {"infAP": "infAP", "AP": "map", "AP@10": "map_cut_10", "AP@50": "map_cut_50",
          "R@10": "recall_10", "R@50": "recall_50", "R@100": "recall_100",
          "R@500": "recall_500", "P@10": "P_10", "nDCG@10": "ndcg_cut_10"}  # fmt: skip


def write_files(folder: Path, queries: int, docs: int, seed: int = 0) -> tuple[Path, Path]:
    r = random.Random(seed)
    run, qrels = folder / "run.trec", folder / "qrels.txt"
    with open(run, "w") as f, open(qrels, "w") as g:
        for q in range(queries):
            qid = f"q{q}"
            ranked = r.sample(range(docs * 20), docs)
            for i, d in enumerate(ranked):
                score = round(30 - i * 0.02 + r.random() * 0.01, 4)
                f.write(f"{qid} Q0 D{d} {i + 1} {score} bench\n")
            judged = r.sample(ranked, docs // 10) + r.sample(range(docs * 20), docs // 5)
            for d in dict.fromkeys(judged):
                g.write(f"{qid} 0 D{d} {r.choice([1, 0, 0, -1, 2])}\n")
    return run, qrels


def trec_eval_binary(folder: Path) -> Path:
    spec = importlib.util.find_spec("pyserini")
    if spec is None or spec.origin is None:
        sys.exit("pyserini is not installed; pass --trec-eval PATH to a trec_eval binary")
    jar = sorted((Path(spec.origin).parent / "resources" / "jars").glob("anserini-*.jar"))[-1]
    target = folder / "trec_eval"
    with zipfile.ZipFile(jar) as zf:
        target.write_bytes(zf.read("trec_eval/trec_eval-linux-amd64"))
    target.chmod(target.stat().st_mode | stat.S_IEXEC)
    return target


CPU: dict[str, list[float]] = {}


def timed(cmd: list[str], label: str | None = None, env: dict | None = None) -> float:
    """Wall seconds of one run; the child's CPU seconds (user + sys) go to CPU[label]."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    CPU.setdefault(label or cmd[0], []).append(cpu)
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--trec-eval", type=Path, default=None)
    parser.add_argument("--all-trec", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="seconds: 20 x 50, once")
    parser.add_argument("--against", type=Path, default=None, metavar="DIR",
                        help="also time `cmrkit eval` of the source tree DIR")  # fmt: skip
    args = parser.parse_args()
    if args.smoke:
        args.queries, args.docs, args.repeat = 20, 50, 1
    if args.all_trec:
        all_trec(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        run, qrels = write_files(folder, args.queries, args.docs)
        binary = args.trec_eval or trec_eval_binary(folder)
        cmrkit = [sys.executable, "-m", "cmrkit", "eval", str(run), str(qrels)]
        trec = [str(binary)] + [a for m in TREC_EVAL_MEASURES for a in ("-m", m)]
        trec += [str(qrels), str(run)]

        # the same numbers first
        ours = json.loads(subprocess.run([*cmrkit, "-f", "json"], check=True,
                                         capture_output=True, text=True).stdout)  # fmt: skip
        theirs = {}
        for line in subprocess.run(trec, check=True, capture_output=True, text=True).stdout.split(
            "\n"
        ):
            if line.strip():
                name, _, value = line.split()
                theirs[name] = value
        same = all(f"{ours['measures'][m]:.4f}" == theirs[t] for m, t in SHARED.items())

        times: dict[str, list[float]] = {"trec_eval": [], "cmrkit eval": []}
        other = _other_tree(args.against, cmrkit, times)
        for _ in range(args.repeat):
            times["trec_eval"].append(timed(trec, "trec_eval"))
            times["cmrkit eval"].append(timed(cmrkit, "cmrkit eval"))
            if other is not None:
                times[other[0]].append(timed(cmrkit, other[0], other[1]))
        lines = sum(1 for _ in open(run))
        judgments = sum(1 for _ in open(qrels))
    _table(
        times,
        f"run: {lines:,} lines ({args.queries:,} queries x {args.docs:,} docs); "
        f"qrels: {judgments:,} lines; {args.repeat} interleaved repeats",
        f"shared measures identical to trec_eval (4 decimals): {'yes' if same else 'NO'}",
    )
    if other is not None:
        name = other[0]
        wall = min(times["cmrkit eval"]) / min(times[name])
        median = statistics.median(times["cmrkit eval"]) / statistics.median(times[name])
        cpu = min(CPU["cmrkit eval"]) / min(CPU[name])
        print(f"\nthis tree / {args.against}: {wall:.3f} (min wall), {median:.3f} (median "
              f"wall), {cpu:.3f} (min CPU); the same bytes: {other[2]}; "
              f"load {os.getloadavg()[0]:.2f}")  # fmt: skip


def _other_tree(folder: Path | None, cmrkit: list[str], times: dict) -> tuple | None:
    """(its label, its environment, whether it writes this tree's bytes) for --against."""
    if folder is None:
        return None
    env = dict(os.environ, PYTHONPATH=str(folder))
    label = "cmrkit eval (against)"
    times[label] = []
    mine = subprocess.run([*cmrkit, "-f", "json"], check=True, capture_output=True).stdout
    theirs = subprocess.run([*cmrkit, "-f", "json"], check=True, capture_output=True,
                            env=env).stdout  # fmt: skip
    return label, env, "yes" if mine == theirs else "NO"


def all_trec(args) -> None:
    if args.trec_eval is None:
        sys.exit("--all-trec needs --trec-eval PATH (trec_eval 10.0 built from source)")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        run, qrels = write_files(folder, args.queries, args.docs)
        trec = [str(args.trec_eval), "-q", "-m", "all_trec", str(qrels), str(run)]
        cmrkit = [sys.executable, "-m", "cmrkit", "eval", str(run), str(qrels), "-q", "-m",
                  "all_trec", "-f", "trec", "--trec-eval", "10"]  # fmt: skip
        ours = subprocess.run(cmrkit, check=True, capture_output=True, text=True).stdout
        theirs = subprocess.run(trec, check=True, capture_output=True, text=True).stdout
        times: dict[str, list[float]] = {"trec_eval": [], "cmrkit eval": []}
        for _ in range(args.repeat):
            times["trec_eval"].append(timed(trec, "trec_eval"))
            times["cmrkit eval"].append(timed(cmrkit, "cmrkit eval"))
    _table(
        times,
        f"-q -m all_trec; {args.queries:,} queries x {args.docs:,} docs; "
        f"{args.repeat} interleaved repeats",
        f"output byte-identical to trec_eval 10.0: {'yes' if ours == theirs else 'NO'}",
    )


def _table(times: dict[str, list[float]], *head: str) -> None:
    """Wall and CPU (user + sys) seconds; on a loaded machine CPU time is the steadier."""
    base = min(times["trec_eval"])
    cpu_base = min(CPU["trec_eval"])
    for line in head:
        print(line)
    print()
    print(f"| {'command':<21} | {'min s':>6} | {'median s':>8} | {'min / trec_eval':>15} | "
          f"{'CPU s':>6} | {'CPU / trec_eval':>15} |")  # fmt: skip
    print(f"|{'-' * 23}|{'-' * 7}:|{'-' * 9}:|{'-' * 16}:|{'-' * 7}:|{'-' * 16}:|")
    for name, values in times.items():
        cpu = min(CPU[name])
        print(f"| {name:<21} | {min(values):6.2f} | {statistics.median(values):8.2f} | "
              f"{min(values) / base:15.2f} | {cpu:6.2f} | {cpu / cpu_base:15.2f} |")  # fmt: skip


if __name__ == "__main__":
    main()
