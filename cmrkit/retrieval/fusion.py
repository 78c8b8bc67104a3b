"""Fusing runs: reciprocal rank fusion and CombSUM / CombMNZ over run files.

Each input run is read in trec_eval's order (score descending, ties by docno descending; the
rank column is ignored), so a unit's rank is its place in that order, from 1.

- ``rrf``: score(d) = sum over runs of weight / (rrf_k + rank(d)), ``rrf_k`` = 60.
- ``combsum``: sum over runs of weight * normalised score; ``combmnz``: the same times the
  number of runs that retrieved d. Scores are normalised per query and run, ``minmax``:
  (s - min) / (max - min) (1 for every unit when all scores are equal), or ``zscore``:
  (s - mean) / standard deviation (population; 0 when all are equal).

A query missing from a run gets no contribution from it: the fused run covers the union of the
runs' queries. The fused scores are written with 6 decimals and ranked like every cmrkit run
(score as written descending, ties by docno descending), the top ``k`` per query.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cmrkit.errors import CmrkitError, check_range
from cmrkit.fileio import sha256_file
from cmrkit.retrieval.options import MAX_K
from cmrkit.retrieval.runfile import (
    Computed,
    RankedRun,
    RunResult,
    RunSpec,
    check_name,
    produce_run,
    read_sidecar,
    recorded,
    run_paths,
    sidecar_of,
)
from cmrkit.trec import format_score, ranked, read_run

METHODS = ("rrf", "combsum", "combmnz")
NORMS = ("minmax", "zscore")
RRF_K = 60


def normalise(docs: list[tuple[str, float]], norm: str) -> dict[str, float]:
    """Scores of one query's ``(docno, score)`` list, ``minmax`` ((s - min) / (max - min), 1 when
    all are equal) or ``zscore`` (population standard deviation, 0 when all are equal)."""
    scores = [s for _, s in docs]
    if norm == "minmax":
        lo, hi = min(scores), max(scores)
        if hi == lo:
            return {d: 1.0 for d, _ in docs}
        return {d: (s - lo) / (hi - lo) for d, s in docs}
    mean = sum(scores) / len(scores)
    sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
    if sd == 0:
        return {d: 0.0 for d, _ in docs}
    return {d: (s - mean) / sd for d, s in docs}


def _check(
    method: str, norm: str, weights: Sequence[float] | None, n: int, rrf_k: int, k: int
) -> list[float]:
    """The weights (all 1 when None) after checking every fusion parameter."""
    if method not in METHODS:
        raise CmrkitError(f"unknown fusion method {method!r}; choose {', '.join(METHODS)}")
    if norm not in NORMS:
        raise CmrkitError(f"unknown normalisation {norm!r}; choose {', '.join(NORMS)}")
    if n == 0:
        raise CmrkitError("no runs to fuse")
    weights = list(weights) if weights is not None else [1.0] * n
    if len(weights) != n:
        raise CmrkitError(f"{len(weights)} weights for {n} runs; give one weight per run")
    if any(not math.isfinite(w) or w < 0 for w in weights):
        raise CmrkitError("run weights must be numbers >= 0")
    check_range(rrf_k, 0, 1_000_000, "--rrf-k")
    check_range(k, 1, MAX_K, "-k")
    return weights


def fuse(
    runs: Sequence[Mapping[str, Sequence[tuple[str, float]]]],
    *,
    method: str = "rrf",
    weights: Sequence[float] | None = None,
    norm: str = "minmax",
    rrf_k: int = RRF_K,
    k: int = 1000,
) -> RankedRun:
    """Fuse ranked runs ({qid: [(docno, score)] in trec_eval order}) into one ranked run."""
    weights = _check(method, norm, weights, len(runs), rrf_k, k)
    qids: list[str] = []
    seen: set[str] = set()
    for run in runs:
        for qid in run:
            if qid not in seen:
                seen.add(qid)
                qids.append(qid)
    fused: RankedRun = {}
    for qid in sorted(qids):
        total: dict[str, float] = {}
        hits: dict[str, int] = {}
        for run, weight in zip(runs, weights, strict=True):
            docs = list(run.get(qid, ()))
            if not docs:
                continue
            if method == "rrf":
                contrib = {d: weight / (rrf_k + rank) for rank, (d, _) in enumerate(docs, 1)}
            else:
                contrib = {d: weight * s for d, s in normalise(docs, norm).items()}
            for d, value in contrib.items():
                total[d] = total.get(d, 0.0) + value
                hits[d] = hits.get(d, 0) + 1
        if method == "combmnz":
            total = {d: s * hits[d] for d, s in total.items()}
        fused[qid] = ranked({d: float(format_score(s)) for d, s in total.items()})[:k]
    return fused


def parse_weights(text: str | None, n: int) -> list[float]:
    """``0.7,0.3`` -> one weight per run (all 1 when None)."""
    if text is None:
        return [1.0] * n
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CmrkitError(
            f"--weights {text!r} must be numbers separated by commas, one per run"
        ) from None
    if len(values) != n:
        raise CmrkitError(f"--weights gives {len(values)} numbers for {n} runs; give one per run")
    return values


def _common(paths: Sequence[Path], sidecars: Sequence[dict[str, Any] | None], key: str) -> Any:
    """The one value of ``key`` the runs' sidecars agree on (None when none says); runs that
    disagree are refused."""
    values: dict[str, Path] = {}
    for path, side in zip(paths, sidecars, strict=True):
        if side is None:
            continue
        index = side.get("index")
        corpus = index.get("corpus_sha256") if isinstance(index, dict) else None
        value = corpus if key == "corpus" else recorded(side, key)
        if value is not None:
            values.setdefault(str(value), path)
    if len(values) > 1:
        (a, pa), (b, pb) = list(values.items())[:2]
        what = "collection (corpus)" if key == "corpus" else key
        raise CmrkitError(
            f"the runs come from different {what}s: {pa} ({a[:16]}) and {pb} ({b[:16]}); fuse "
            "runs of one collection and split"
        )
    return next(iter(values), None)


def run_fuse(
    runs: Sequence[str | Path],
    *,
    output: str | Path | None = None,
    method: str = "rrf",
    weights: Sequence[float] | None = None,
    norm: str = "minmax",
    rrf_k: int = RRF_K,
    k: int = 1000,
    name: str | None = None,
    runs_dir: str | Path = "runs",
    force: bool = False,
    argv: Sequence[str] | None = None,
) -> RunResult:
    """Fuse run files into ``output`` (default ``RUNS/<collection>/<name>.<split>.trec``, the
    collection and split taken from the runs' sidecars) with a sidecar beside it."""
    started = time.perf_counter()
    paths = [Path(p) for p in runs]
    if len(paths) < 2:
        raise CmrkitError("give at least two runs to fuse")
    for p in paths:
        if not p.is_file():
            raise CmrkitError("no such run file", path=p)
    if len({p.resolve() for p in paths}) != len(paths):
        raise CmrkitError("the same run file is given twice; use --weights to weigh a run")
    weights = _check(method, norm, weights, len(paths), rrf_k, k)
    sidecars = [read_sidecar(p) for p in paths]
    corpus = _common(paths, sidecars, "corpus")
    split = _common(paths, sidecars, "split")
    collection = _common(paths, sidecars, "collection")
    name = check_name(name or method)
    if output is None:
        if collection is None or split is None:
            raise CmrkitError(
                "the runs have no cmrkit sidecars naming their collection and split; name the "
                "fused run file with -o"
            )
        run_path, _ = run_paths(Path(runs_dir), Path(collection), name, split)
    else:
        run_path = Path(output)
        if run_path.suffix == ".json":
            raise CmrkitError(
                "-o names the run file; its sidecar is written beside it", path=run_path
            )
    sidecar_path = sidecar_of(run_path)
    if run_path.resolve() in {p.resolve() for p in paths}:
        raise CmrkitError("-o would overwrite one of the input runs", path=run_path)
    inputs = [{"run": str(p), "sha256": sha256_file(p)} for p in paths]
    parameters = {
        "method": method,
        "weights": weights,
        "norm": norm if method != "rrf" else None,
        "rrf_k": rrf_k if method == "rrf" else None,
        "k": k,
        "inputs": [i["sha256"] for i in inputs],
    }
    spec = RunSpec(
        "fuse",
        name,
        split,
        parameters,
        run_path,
        sidecar_path,
        index_id=corpus or "",
        collection=collection,
        command=list(argv) if argv is not None else None,
    )

    def compute() -> Computed:
        loaded = [{q: ranked(docs) for q, docs in read_run(p).items()} for p in paths]
        fused = fuse(loaded, method=method, weights=weights, norm=norm, rrf_k=rrf_k, k=k)
        sidecar = {
            "inputs": [
                {**i, "system": (s or {}).get("system"), "n_queries": len(r)}
                for i, s, r in zip(inputs, sidecars, loaded, strict=True)
            ],
            "index": {"corpus_sha256": corpus},
            "ranking": {
                "input_order": "score descending, ties by docno descending (rank column ignored)",
                "tie_break": "score descending (as written, 6 decimals), then docno descending",
                "queries": "union of the inputs' queries",
            },
        }
        seconds = {"total": round(time.perf_counter() - started, 3)}
        return Computed(fused, _tag(name, method, weights, norm, rrf_k), sidecar, seconds)

    return produce_run(spec, compute, force=force)


def _tag(name: str, method: str, weights: Sequence[float], norm: str, rrf_k: int) -> str:
    parts = [name, method]
    parts.append(f"k={rrf_k}" if method == "rrf" else norm)
    if any(w != 1.0 for w in weights):
        parts.append("w=" + ",".join(f"{w:g}" for w in weights))
    return ":".join(parts)
