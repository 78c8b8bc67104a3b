"""Time and memory of cmrkit's average-link clustering (cmrkit/coref/agglomerative.py) against
scikit-learn's AgglomerativeClustering(metric="cosine", linkage="average",
distance_threshold=1 - T) on the sizes a dense matrix holds, and of its sparse k-nearest-
neighbour path up to 100,000 vectors.

Vectors: synthetic clusters in 384 dimensions (MiniLM's size), clusters of 10 on average (as
WEC-Eng's mentions), each vector its cluster's centre plus noise (within-cluster cosine about
0.6). Each case runs in its own process, so its peak resident memory is its own.

    python bench/bench_cluster.py                  # 1k-5k both; cmrkit's sparse path to 100k
    python bench/bench_cluster.py --smoke          # a few seconds (tests/test_bench.py)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _vectors(n: int, dim: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(1, n // 10), dim)).astype(np.float32)
    members = rng.integers(0, len(centres), n)
    return centres[members] + rng.normal(scale=0.8, size=(n, dim)).astype(np.float32)


def _case(args: argparse.Namespace) -> None:
    """One measurement in this process: prints a JSON line."""
    x = _vectors(args.n, args.dim, args.seed)
    sys.path.insert(0, str(ROOT))
    import scipy.cluster.hierarchy  # noqa: F401  (imports outside the timing)
    from sklearn.cluster import AgglomerativeClustering

    from cmrkit.coref.agglomerative import average_link

    started = time.perf_counter()
    if args.case == "sklearn":
        labels = (
            AgglomerativeClustering(
                n_clusters=None,
                metric="cosine",
                linkage="average",
                distance_threshold=1 - args.threshold,
            )
            .fit(x)
            .labels_
        )
        extra = {}
    else:
        kw = {"exact_limit": args.exact_limit} if args.exact_limit else {}
        done = average_link(x, args.threshold, **kw)
        labels = done.labels
        extra = {"exact": done.exact, "components": done.components, "largest": done.largest}
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # MiB (Linux: KiB)
    print(json.dumps({"seconds": seconds, "peak_mib": peak, "labels": labels.tolist(), **extra}))


def _run(side: str, n: int, a: argparse.Namespace, exact_limit: int = 0) -> dict:
    cmd = [sys.executable, __file__, "--case", side, "--n", str(n), "--dim", str(a.dim),
           "--seed", str(a.seed), "--threshold", str(a.threshold),
           "--exact-limit", str(exact_limit)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        sys.exit(f"{side} n={n} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _same(a: list[int], b: list[int]) -> bool:
    pairs = set(zip(a, b, strict=True))
    return len(pairs) == len(set(a)) == len(set(b))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes, a few seconds")
    p.add_argument("--dense", default="1000,2000,5000", help="sizes both sides cluster")
    p.add_argument("--sparse", default="20000,50000,100000", help="sizes of the sparse path")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--threshold", type=float, default=0.3, help="cosine similarity")
    p.add_argument("--seed", type=int, default=13)
    p.add_argument("--case", choices=["sklearn", "cmrkit"], help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    p.add_argument("--exact-limit", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.case:
        _case(a)
        return
    if a.smoke:
        a.dense, a.sparse = "300", "1500"
    rows = []
    for n in (int(v) for v in a.dense.split(",") if v):
        theirs = _run("sklearn", n, a)
        ours = _run("cmrkit", n, a)
        sparse = _run("cmrkit", n, a, exact_limit=max(2, n // 20))
        same = _same(ours["labels"], theirs["labels"])
        rows.append((n, "scikit-learn", theirs, ""))
        rows.append((n, "cmrkit dense", ours, "same" if same else "DIFFERENT"))
        forced = "same" if _same(sparse["labels"], theirs["labels"]) else "DIFFERENT"
        rows.append((n, "cmrkit k-NN graph", sparse, forced))
        if not same:
            sys.exit(f"n={n}: cmrkit's dense clusters differ from scikit-learn's")
    for n in (int(v) for v in a.sparse.split(",") if v):
        ours = _run("cmrkit", n, a, exact_limit=2000 if a.smoke else 0)
        rows.append((n, "cmrkit k-NN graph", ours, ""))
    print(f"average link, threshold {a.threshold} (cosine), dim {a.dim}, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'vectors':>8}  {'side':<18} {'seconds':>8} {'peak MiB':>9} {'clusters':>9}  notes")
    for n, side, r, note in rows:
        how = ""
        if "exact" in r:
            how = f"exact={r['exact']} components={r['components']} largest={r['largest']}"
        print(f"{n:>8}  {side:<18} {r['seconds']:>8.2f} {r['peak_mib']:>9.0f} "
              f"{len(set(r['labels'])):>9}  {note} {how}".rstrip())  # fmt: skip


if __name__ == "__main__":
    main()
