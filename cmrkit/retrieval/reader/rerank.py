"""``cmrkit run rerank``: the reader rescores the top of any run and extracts answer spans.

For each query of the input run, the units ranked above ``depth`` (after removing the query's
own unit and, for TAC collections, its document's units, which are never results) are read by
the reader (``scoring.score_candidates``: a unit's score is its best window's selection score,
its answer that window's best valid span). The reranked units come first, ordered as every
cmrkit run (score as written, 6 decimals, descending, ties by docno descending); the units
below the depth follow in their input order, with integer scores below every reranked one.

Outputs: ``RUNS/<collection>/<name>.<split>.trec``, its sidecar, and
``<name>.<split>.spans.jsonl`` (``{"qid", "docno", "start", "end", "score", "selection",
"span_score"}`` per reranked unit, in run order: what ``cmrkit eval-spans`` reads), staged and
put in place together. The same run, model, batch size and device give the same bytes.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cmrkit.collection.layout import (
    iter_corpus,
    read_topics,
)
from cmrkit.errors import CmrkitError
from cmrkit.fileio import sha256_file
from cmrkit.retrieval.reader.options import RerankOptions
from cmrkit.retrieval.reader.scoring import Scored
from cmrkit.retrieval.runfile import (
    Computed,
    RankedRun,
    RunResult,
    RunSpec,
    check_run_of,
    collection_of,
    own_document_units,
    produce_run,
    read_sidecar,
    recorded,
    run_paths,
    written_scores,
)

SPANS_SUFFIX = ".spans.jsonl"


def reader_weight(metadata: dict[str, Any], key: str = "interpolation") -> float:
    """A weight the reader folder records: ``interpolation`` (W, of the first stage) or
    ``span_weight`` (S, of the best span's score); 0 when none (a folder from before them)."""
    found = metadata.get(key)
    if isinstance(found, dict) and isinstance(found.get("weight"), int | float):
        return float(found["weight"])
    return 0.0


def _z(values: Sequence[float]) -> np.ndarray:
    """z-scores as ``run fuse --norm zscore`` computes them (population standard deviation; 0
    when all are equal); a value that is not finite (an empty unit) counts as the lowest
    finite one."""
    from cmrkit.retrieval.fusion import normalise

    finite = [float(x) for x in values if math.isfinite(x)]
    if not finite:
        return np.zeros(len(values), dtype=np.float64)
    low = min(finite)
    keys = [str(i) for i in range(len(values))]
    z = normalise(
        [(k, float(x) if math.isfinite(x) else low) for k, x in zip(keys, values, strict=True)],
        "zscore",
    )
    return np.array([z[k] for k in keys], dtype=np.float64)


def combine(
    selection: Sequence[float],
    span: Sequence[float],
    first: Sequence[float],
    span_weight: float,
    weight: float,
) -> np.ndarray:
    """One query's final scores: z(selection) + S * z(best span score) + W * z(first stage),
    each z-scored over the reranked units. S = W = 0 keeps the reader's own selection scores."""
    values = np.asarray(selection, dtype=np.float64)
    if (span_weight == 0 and weight == 0) or not len(values):
        return values
    out = _z(values)
    if span_weight:
        out = out + span_weight * _z(span)
    if weight:
        out = out + weight * _z(first)
    return out


def spans_path(run_path: Path) -> Path:
    """``NAME.SPLIT.spans.jsonl`` beside ``NAME.SPLIT.trec``."""
    return run_path.with_name(run_path.name.removesuffix(".trec") + SPANS_SUFFIX)


def _split_of(run: Path, sidecar: dict[str, Any] | None, split: str | None) -> str:
    check_run_of(run, sidecar, split=split)
    found = split or recorded(sidecar, "split")
    if found is not None:
        return found
    parts = run.name.split(".")
    if len(parts) >= 3:
        return parts[-2]
    raise CmrkitError(
        "cannot tell the run's split (no sidecar, name not NAME.SPLIT.trec); pass --split",
        path=run,
    )


@dataclass
class _Job:
    """A reranking, its inputs checked: what ``run_rerank`` reads and writes."""

    run_path: Path
    ref: Any  # the reader folder (ReaderRef)
    opts: RerankOptions
    weight: float  # W, of the input run's score
    span_weight: float  # S, of the best span's score
    sidecar_in: dict[str, Any] | None
    coll: Path
    split: str
    topics: list[Any]
    ranking: dict[str, dict[str, float]]
    name: str
    out_spans: Path
    parameters: dict[str, Any]
    work: Any = None  # engine.NeuralWork once connected (--engine ray)


def run_rerank(
    run: str | Path,
    model: str | Path,
    *,
    collection: str | Path | None = None,
    split: str | None = None,
    options: RerankOptions | None = None,
    name: str | None = None,
    runs_dir: str | Path = "runs",
    force: bool = False,
    progress: bool = False,
    argv: Sequence[str] | None = None,
) -> RunResult:
    """Rerank the top ``options.depth`` of ``run`` with the reader in ``model``."""
    started = time.perf_counter()
    opts = options or RerankOptions()
    opts.check()
    job = _job(Path(run), model, collection, split, opts, name, runs_dir)
    spec = RunSpec.for_collection(
        runs_dir,
        job.coll,
        system="rerank",
        name=job.name,
        split=job.split,
        parameters=job.parameters,
        index_id="",
        command=list(argv) if argv is not None else None,
        also=(job.out_spans,),
    )
    return produce_run(spec, lambda: _compute(job, progress, started), force=force, started=started)


def _job(
    run_path: Path,
    model: str | Path,
    collection: str | Path | None,
    split: str | None,
    opts: RerankOptions,
    name: str | None,
    runs_dir: str | Path,
) -> _Job:
    """Check the inputs (run, reader, collection, split, markers) before any work."""
    from cmrkit.retrieval.reader.model import resolve_reader
    from cmrkit.retrieval.reader.scoring import check_markers
    from cmrkit.trec import read_run

    if not run_path.is_file():
        raise CmrkitError("no such run file", path=run_path)
    ref = resolve_reader(model)
    check_markers(ref, opts.markers)
    params = ref.metadata["parameters"]
    weight = opts.interpolation if opts.interpolation is not None else reader_weight(ref.metadata)
    span_weight = (
        opts.span_weight
        if opts.span_weight is not None
        else reader_weight(ref.metadata, "span_weight")
    )
    sidecar_in = read_sidecar(run_path)
    coll = collection_of(run_path, sidecar_in, collection)
    split = _split_of(run_path, sidecar_in, split)
    topics = read_topics(coll, split)
    by_qid = {t.qid for t in topics}
    ranking = read_run(run_path)
    for qid in ranking:
        if qid not in by_qid:
            raise CmrkitError(
                f"query {qid!r} of the run is no topic of split {split!r} of {coll} (a run of "
                "another collection or split?); pass the run's own --collection and --split",
                path=run_path,
            )
    name = name or f"{run_path.name.split('.')[0]}-rerank"
    out_run, _ = run_paths(Path(runs_dir), coll, name, split)
    if out_run.resolve() == run_path.resolve():
        raise CmrkitError("the reranked run would replace its input; pass another --name")
    parameters = {
        "model": ref.identity(),
        "markers": list(ref.markers),
        "depth": opts.depth,
        "max_length": int(params["max_length"]),
        "query_max_length": int(params["query_max_length"]),
        "stride": opts.stride or int(params["stride"]),
        "max_span": opts.max_span or int(params["max_span"]),
        "interpolation": weight,
        "span_weight": span_weight,
        "input_run_sha256": sha256_file(run_path),
    }
    if opts.precision != "fp32":  # fp32 runs keep the identity they always had
        parameters["precision"] = opts.precision
    return _Job(
        run_path, ref, opts, weight, span_weight, sidecar_in, coll, split, topics, ranking,
        name, spans_path(out_run), parameters,
    )  # fmt: skip


def _compute(job: _Job, progress: bool, started: float) -> Computed:
    """Read the candidates, score them, and make the run, its spans file and its sidecar."""
    texts = {record["id"]: record["contents"] for _, record in iter_corpus(job.coll)}
    heads, tails = _candidates(job, texts)
    timings: dict[str, float] = {"read": round(time.perf_counter() - started, 3)}
    reader, scored = _score(job, heads, texts, progress, timings)
    run_out, span_lines = _reranked(job, heads, tails, scored)
    tag = (
        f"{job.name}:depth={job.opts.depth}"
        + (f":s={job.span_weight:g}" if job.span_weight else "")
        + (f":w={job.weight:g}" if job.weight else "")
        + (f":{reader.precision}" if reader.fast is not None else "")
    )
    spans = "".join(line + "\n" for line in span_lines)
    return Computed(
        run_out, tag.replace(" ", "_"), _sidecar(job, reader), timings, {job.out_spans: spans}
    )


def _candidates(
    job: _Job, texts: dict[str, str]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Each query's units the reader reads (the top ``depth``, never the query's own unit nor,
    for TAC collections, its document's units) and those below them."""
    from cmrkit.trec import ranked

    by_qid = {t.qid: t for t in job.topics}
    own_docs = own_document_units(job.coll, [by_qid[q] for q in job.ranking])
    depth = job.opts.depth
    heads: dict[str, list[str]] = {}
    tails: dict[str, list[str]] = {}
    for qid in sorted(job.ranking):
        ban = {by_qid[qid].unit} | set(own_docs.get(qid, frozenset()))
        docs = [d for d, _ in ranked(job.ranking[qid]) if d not in ban]
        for d in docs[:depth]:
            if d not in texts:
                raise CmrkitError(
                    f"unit {d!r} (query {qid}) is not in the corpus of {job.coll} (a run of "
                    "another collection?)",
                    path=job.run_path,
                )
        heads[qid] = docs[:depth]
        tails[qid] = docs[depth:]
    return heads, tails


def _score(
    job: _Job,
    heads: dict[str, list[str]],
    texts: dict[str, str],
    progress: bool,
    timings: dict[str, float],
) -> tuple[Any, dict[tuple[str, str], Scored]]:
    """The reader's verdict on every (query, candidate) pair, and the reader that read them."""
    from cmrkit.console import progress_bar
    from cmrkit.retrieval.distributed.engine import NeuralWork
    from cmrkit.retrieval.reader.scoring import open_reader, score_candidates

    t0 = time.perf_counter()
    opts = job.opts
    work = None
    if opts.engine is not None and opts.engine.distributed:
        work = NeuralWork(opts.engine, opts.device, opts.precision)
    reader = open_reader(
        job.ref,
        device="cpu" if work is not None else opts.device,  # on Ray, this process tokenizes
        stride=opts.stride,
        max_span=opts.max_span,
        precision=opts.precision,  # the int8 weights made once, here
    )
    if work is not None:
        work.connect()
    job.work = work
    timings["load_model"] = round(time.perf_counter() - t0, 3)
    by_qid = {t.qid: t for t in job.topics}
    qids = [q for q in sorted(heads) if heads[q]]
    with progress_bar(progress, f"rerank {job.coll.name}: sequences") as bar:
        task = bar.add_task("sequences", total=None)
        scored = score_candidates(
            reader,
            [by_qid[q] for q in qids],
            [heads[q] for q in qids],
            texts,
            batch_size=opts.batch_size,
            progress=lambda n, total: bar.update(task, total=total, advance=n),
            timings=timings,
            work=work,
        )
    timings["sequences_per_second"] = round(
        timings["sequences"] / max(timings["read_pairs"], 1e-9), 2
    )
    out = {
        (q, d): s
        for q, verdicts in zip(qids, scored, strict=True)
        for d, s in zip(heads[q], verdicts, strict=True)
    }
    return reader, out


def _reranked(
    job: _Job,
    heads: dict[str, list[str]],
    tails: dict[str, list[str]],
    scored: dict[tuple[str, str], Scored],
) -> tuple[RankedRun, list[str]]:
    """The reranked run (the reader's units first, then those below the depth in input order
    with integer scores below every reranked one) and the lines of its spans file."""
    from cmrkit.trec import ranked

    run_out: RankedRun = {}
    span_lines: list[str] = []
    for qid in sorted(job.ranking):
        docs = heads[qid]
        verdicts = [scored[(qid, d)] for d in docs]
        final = combine(
            [v.score for v in verdicts],
            [v.span_score for v in verdicts],
            [job.ranking[qid][d] for d in docs],
            job.span_weight,
            job.weight,
        )
        values = written_scores(final.astype(np.float32))
        top = ranked({d: float(s) for d, s in zip(docs, values.tolist(), strict=True)})
        by_doc = dict(zip(docs, verdicts, strict=True))
        floor = math.floor(min((s for _, s in top), default=0.0))
        run_out[qid] = top + [(d, float(floor - 1 - j)) for j, d in enumerate(tails[qid])]
        for d, s in top:
            v = by_doc[d]
            record = {
                "qid": qid,
                "docno": d,
                "start": v.start,
                "end": v.end,
                "score": s,
                "selection": round(v.score, 6),
                "span_score": round(v.span_score, 4),
            }
            span_lines.append(json.dumps(record, ensure_ascii=False))
    return run_out, span_lines


def _sidecar(job: _Job, reader: Any) -> dict[str, Any]:
    """The reranked run's own sidecar fields (``precision``: the int8 weights, when used)."""
    from cmrkit.retrieval.neural import versions

    weight, span_weight, opts = job.weight, job.span_weight, job.opts
    precision = {} if reader.fast is None else {"precision": reader.fast.record()}
    return {
        **precision,
        "spans": str(job.out_spans),
        "input_run": {
            "path": str(job.run_path),
            "sha256": job.parameters["input_run_sha256"],
            "system": recorded(job.sidecar_in, "system"),
            "name": recorded(job.sidecar_in, "name"),
        },
        "model": {**job.ref.identity(), "tag": job.ref.tag, "trained": job.ref.metadata},
        "device": reader.device if job.work is None else job.work.device_made_on("cpu"),
        "batch_size": opts.batch_size,
        **({"engine": job.work.record()} if job.work is not None else {}),
        "interpolation": {
            "weight": weight,
            "span_weight": span_weight,
            "score": "the reader's selection score"
            if weight == 0 and span_weight == 0
            else "z(selection) + span_weight * z(best span score) + weight * z(input run), "
            "z-scores over each query's reranked units",
            "from": "--interpolation" if opts.interpolation is not None else "the reader",
            "span_weight_from": "--span-weight" if opts.span_weight is not None else "the reader",
        },
        "ranking": {
            "own_unit_removed": True,
            "own_document_removed": any(t.exclude_doc for t in job.topics),
            "below_depth": "input order, integer scores below the reranked units",
            "tie_break": "score descending (as written, 6 decimals), then docno descending",
        },
        "versions": versions(),
    }
