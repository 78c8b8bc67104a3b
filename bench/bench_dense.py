"""Time dense retrieval: corpus encoding, exact search and training steps.

Usage: python bench/bench_dense.py [--texts 256] [--lengths 128,256] [--batch-size 32]
       [--repeat 2] [--vectors 100000] [--queries 1000] [--k 100,1000] [--train-steps 8]
       [--skip encode,search,train] [--precision fp32,int8,onnx-int8] [--engine local,ray]
       [--workers 2] [--smoke]

1. Encoding: the first N passages of the embedded sample (`cmrkit build-collection` first), with
   the default model (all-MiniLM-L6-v2), per passage length: cmrkit's encoder (tokenize once,
   sort by token count, batch), fp32, with `--precision int8` (the transformer's linear
   layers dynamically quantized in torch) and with `--precision onnx-int8` (the transformer
   exported to ONNX, quantized, run on ONNX Runtime), the sides `--precision` names, against
   sentence-transformers' own `encode` on the same texts, batch size and length
   (`max_seq_length`), interleaved; min of the repeats; passages/s, the ratios, the largest
   difference between cmrkit's and sentence-transformers' fp32 vectors and the lowest cosine of
   an int8 vector with its fp32 one; and the CPU seconds' ratios (this process's), which move
   less than wall time on a shared machine.
   `--engine local,ray` also encodes the passages as 4 shards here and on Ray workers.
2. Exact search: random unit vectors (384 dims) for N passages and Q queries, top k by inner
   product: `cmrkit.retrieval.dense.search.search` (scores, ties, final ranked lists) against
   FAISS `IndexFlatIP.search` (needs faiss-cpu: pip install 'cmrkit[bench]'); queries/s, the
   ratio (cmrkit / FAISS) and the share of queries whose top k sets agree (cmrkit ranks by the
   score rounded to 6 decimals with docno tie-breaks, so a unit at the cut may differ).
3. Training: `cmrkit train dense` on the sample's dev split for a few steps (batch 16, query
   64 / passage 128 tokens, separate encoders); steps/s from its log.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

SAMPLE = Path("collections/sample")


def _table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"\n{title}")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))


def bench_encode(n: int, lengths: list[int], batch_size: int, repeat: int, precisions: list[str]):
    import tempfile

    from cmrkit.retrieval.dense.encode import encode_ids, passage_ids
    from cmrkit.retrieval.dense.models import load_encoders, resolve_model
    from cmrkit.retrieval.neural import quiet_hub
    from cmrkit.retrieval.quantized import fast_encoder

    quiet_hub()
    if not (SAMPLE / "corpus.jsonl.gz").exists():
        raise SystemExit("build the sample first: cmrkit build-collection")
    with gzip.open(SAMPLE / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["contents"] for _, line in zip(range(n), f, strict=False)]
    model = load_encoders(resolve_model("all-MiniLM-L6-v2"), "cpu").passage
    models = {"ours": model}
    for precision in (p for p in precisions if p != "fp32"):
        fast = load_encoders(resolve_model("all-MiniLM-L6-v2"), "cpu").passage
        with tempfile.TemporaryDirectory() as tmp:  # --precision P, without touching the cache
            fast[0].model, _ = fast_encoder(fast[0].model, precision, Path(tmp), "bench")
        models[precision] = fast
    fast_sides = [k for k in models if k != "ours"]
    sides = ["st", *models]
    rows = []
    for length in lengths:
        times: dict[str, list[float]] = {k: [] for k in sides}
        cpu: dict[str, list[float]] = {k: [] for k in sides}
        out: dict[str, np.ndarray] = {}
        for r in range(repeat):
            for side in sides if r % 2 == 0 else sides[::-1]:  # a load drift hits every side
                t0, c0 = time.perf_counter(), time.process_time()
                if side == "st":
                    model.max_seq_length = length
                    out[side] = model.encode(texts, batch_size=batch_size, convert_to_numpy=True)
                else:
                    m = models[side]
                    ids = passage_ids(m.tokenizer, texts, length)
                    out[side] = encode_ids(m, ids, batch_size=batch_size)
                times[side].append(time.perf_counter() - t0)
                cpu[side].append(time.process_time() - c0)
        best = {k: min(v) for k, v in times.items()}
        low = {k: min(v) for k, v in cpu.items()}
        rows.append(
            [
                str(length),
                str(batch_size),
                *(f"{len(texts) / best[k]:.1f}" for k in sides),
                *(f"{best['st'] / best[k]:.2f}" for k in sides[1:]),
                f"{float(np.abs(out['ours'] - out['st']).max()):.1e}",
                *(f"{float((out[k] * out['ours']).sum(1).min()):.4f}" for k in fast_sides),
                *(f"{low['st'] / low[k]:.2f}" for k in sides[1:]),
            ]
        )
    name = {"st": "ST", "ours": "cmrkit"}
    _table(
        f"corpus encoding, {len(texts)} sample passages, all-MiniLM-L6-v2, CPU "
        f"({os.cpu_count()} cores), min of {repeat}",
        [
            "tokens",
            "batch",
            *(f"{name.get(k, k)} p/s" for k in sides),
            *(f"{name.get(k, k)}/ST" for k in sides[1:]),
            "max |diff|",
            *(f"min cos {k}" for k in fast_sides),
            *(f"CPU s {name.get(k, k)}/ST" for k in sides[1:]),
        ],
        rows,
    )


def bench_encode_ray(n: int, length: int, batch_size: int, repeat: int, workers: int) -> None:
    """The same N passages as 4 shards: encoded shard by shard in this process, and by Ray
    workers of a local cluster (``store.RayWork.encode_shards``, what `encode --engine ray`
    runs; the cluster started once before the rounds), fp32; the vectors must be equal."""
    from cmrkit.retrieval.dense.encode import encode_ids, passage_ids
    from cmrkit.retrieval.dense.models import load_encoders, resolve_model
    from cmrkit.retrieval.dense.store import RayWork
    from cmrkit.retrieval.distributed.engine import EngineOptions

    with gzip.open(SAMPLE / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["contents"] for _, line in zip(range(n), f, strict=False)]
    ref = resolve_model("all-MiniLM-L6-v2")
    model = load_encoders(ref, "cpu").passage
    size = -(-len(texts) // 4)
    todo = [(f"vectors-{i:05d}.npy", texts[i * size : (i + 1) * size]) for i in range(4)]
    work = RayWork(EngineOptions("ray", workers=workers), "cpu", ref=ref).connect()
    times: dict[str, list[float]] = {"local": [], "ray": []}
    out: dict[str, dict[str, np.ndarray]] = {"local": {}, "ray": {}}
    for r in range(repeat):
        for side in ("local", "ray") if r % 2 == 0 else ("ray", "local"):
            t0 = time.perf_counter()
            if side == "ray":
                work.encode_shards(todo, out["ray"].__setitem__, lambda k: None, length, batch_size)
            else:
                for name, part in todo:
                    ids = passage_ids(model.tokenizer, part, length)
                    out["local"][name] = encode_ids(model, ids, batch_size=batch_size)
            times[side].append(time.perf_counter() - t0)
    same = all(np.array_equal(out["local"][k], out["ray"][k]) for k, _ in todo)
    best = {k: min(v) for k, v in times.items()}
    _table(
        f"corpus encoding on Ray: {len(texts)} passages as 4 shards, {length} tokens, "
        f"{workers} workers of a local cluster, min of {repeat}",
        ["side", "seconds", "passages/s", "x local", "same vectors"],
        [
            [
                k,
                f"{best[k]:.2f}",
                f"{len(texts) / best[k]:.1f}",
                f"{best['local'] / best[k]:.2f}",
                str(same),
            ]
            for k in ("local", "ray")
        ],  # fmt: skip
    )


def bench_search(n: int, q: int, ks: list[int], repeat: int) -> None:
    from cmrkit.retrieval.dense.search import search

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(n, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    queries = rng.normal(size=(q, 384)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    ids = [f"D{i:07d}" for i in range(n)]
    try:
        import faiss
    except ImportError:
        faiss = None
    if faiss is not None:
        index = faiss.IndexFlatIP(384)
        index.add(vectors)
    rows = []
    for k in ks:
        ours, theirs = [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            hits = search(queries, vectors, ids, k)
            ours.append(time.perf_counter() - t0)
            if faiss is not None:
                t0 = time.perf_counter()
                _, found = index.search(queries, k)
                theirs.append(time.perf_counter() - t0)
        if faiss is None:
            rows.append([str(k), "faiss-cpu not installed", f"{q / min(ours):.1f}", "", ""])
            continue
        same = np.mean([{ids[i] for i in found[j]} == {d for d, _ in hits[j]} for j in range(q)])
        rows.append(
            [
                str(k),
                f"{q / min(theirs):.1f}",
                f"{q / min(ours):.1f}",
                f"{min(theirs) / min(ours):.2f}",
                f"{same:.3f}",
            ]
        )
    threads = faiss.omp_get_max_threads() if faiss is not None else "-"
    _table(
        f"exact search, {n:,} x 384 vectors, {q:,} queries, min of {repeat} "
        f"(faiss threads: {threads})",
        ["k", "IndexFlatIP q/s", "cmrkit q/s", "ratio", "same top k"],
        rows,
    )


def bench_train(steps: int) -> None:
    from cmrkit.retrieval.dense.options import DenseOptions
    from cmrkit.retrieval.dense.train import TrainOptions, train_dense
    from cmrkit.retrieval.options import RunOptions

    with tempfile.TemporaryDirectory() as tmp:
        result = train_dense(
            SAMPLE,
            Path(tmp) / "model",
            dense=DenseOptions(device="cpu", passage_max_length=128, query_max_length=64),
            train=TrainOptions(train_split="dev", dev_split="none", max_steps=steps),
            run_options=RunOptions(progress=False),
            progress=False,
        )
    s = result.log["seconds"]
    _table(
        "training (sample dev split, batch 16, query 64 / passage 128 tokens, separate encoders)",
        ["steps", "seconds", "steps/s", "examples/s"],
        [
            [
                str(result.metadata["parameters"]["steps"]),
                f"{s['train']:.1f}",
                f"{s['steps_per_second']:.3f}",
                f"{16 * s['steps_per_second']:.2f}",
            ]
        ],
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--texts", type=int, default=256)
    p.add_argument("--lengths", default="128,256")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--vectors", type=int, default=100_000)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--k", default="100,1000")
    p.add_argument("--train-steps", type=int, default=8)
    p.add_argument("--skip", default="")
    p.add_argument(
        "--precision",
        default="fp32,int8,onnx-int8",
        help="cmrkit's encoding sides: fp32 (always), int8 (torch), onnx-int8 (ONNX Runtime)",
    )
    p.add_argument("--smoke", action="store_true", help="a few seconds: tiny sizes of each part")
    p.add_argument("--engine", default="local", help="local, or local,ray: also time Ray's side")
    p.add_argument("--workers", type=int, default=2, help="Ray workers (--engine ray)")
    a = p.parse_args()
    if a.smoke:
        a.texts, a.lengths, a.repeat, a.vectors, a.queries, a.k = 8, "64", 1, 2000, 20, "10"
        a.train_steps = 1
    skip = set(a.skip.split(","))
    if "encode" not in skip:
        lengths = [int(x) for x in a.lengths.split(",")]
        bench_encode(a.texts, lengths, a.batch_size, a.repeat, a.precision.split(","))
        if "ray" in a.engine.split(","):
            bench_encode_ray(
                a.texts, int(a.lengths.split(",")[-1]), a.batch_size, a.repeat, a.workers
            )
    if "search" not in skip:
        bench_search(a.vectors, a.queries, [int(x) for x in a.k.split(",")], a.repeat)
    if "train" not in skip:
        bench_train(a.train_steps)


if __name__ == "__main__":
    main()
