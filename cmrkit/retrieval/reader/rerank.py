"""``cmrkit run rerank``: the reader rescores the top of any run and extracts answer spans.

For each query of the input run, the units ranked above ``depth`` (after removing the query's
own unit and, for TAC collections, its document's units, which are never results) are read by
the reader, one sequence per window of each unit. A unit's score is its best window's selection
score; its answer is that window's best valid span (at most ``max_span`` tokens, on passage
tokens, not ending before it starts), mapped back to characters of the unit. The reranked units
come first, ordered as every cmrkit run (score as written, 6 decimals, descending, ties by docno
descending); the units below the depth follow in their input order, with integer scores below
every reranked one.

Outputs: ``RUNS/<collection>/<name>.<split>.trec``, its sidecar, and
``<name>.<split>.spans.jsonl`` (``{"qid", "docno", "start", "end", "score", "selection",
"span_score"}`` per reranked unit, in run order: what ``cmrkit eval-spans`` reads), staged and
put in place together. Inference is batched by length (longest first), so the same run, model,
batch size and device give the same bytes.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cmrkit.collection.layout import (
    collection_dir,
    iter_corpus,
    read_topics,
)
from cmrkit.errors import CmrkitError
from cmrkit.fileio import sha256_file
from cmrkit.retrieval.dense.encode import inference, longest_first
from cmrkit.retrieval.reader.features import (
    Item,
    Layout,
    PassageTokens,
    QueryWindow,
    items,
    tokens_to_chars,
)
from cmrkit.retrieval.runfile import (
    Computed,
    RankedRun,
    RunResult,
    RunSpec,
    check_run_of,
    own_document_units,
    produce_run,
    read_sidecar,
    recorded,
    run_paths,
    written_scores,
)

DEFAULT_DEPTH = 50
SPANS_SUFFIX = ".spans.jsonl"


def check_weights(interpolation: float | None, span_weight: float | None) -> None:
    """--interpolation and --span-weight: numbers >= 0 (None: not given)."""
    for flag, value in (("--interpolation", interpolation), ("--span-weight", span_weight)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise CmrkitError(
                f"{flag} must be a number >= 0 (0 for both: the reader's selection score "
                f"alone), got {value}"
            )


@dataclass(frozen=True)
class RerankOptions:
    """How the reader reads the candidates (None: what the model was trained with)."""

    depth: int = DEFAULT_DEPTH
    batch_size: int = 32
    device: str = "auto"
    stride: int | None = None
    max_span: int | None = None
    markers: tuple[str, str] | None = None
    interpolation: float | None = None  # None: the reader's own weight
    span_weight: float | None = None  # None: the reader's own weight

    def check(self) -> None:
        check_weights(self.interpolation, self.span_weight)
        if self.depth < 1:
            raise CmrkitError(f"--depth must be at least 1, got {self.depth}")
        if self.batch_size < 1:
            raise CmrkitError(f"--batch-size must be at least 1, got {self.batch_size}")
        if self.stride is not None and self.stride < 1:
            raise CmrkitError(f"--stride must be at least 1, got {self.stride}")
        if self.max_span is not None and self.max_span < 1:
            raise CmrkitError(f"--max-span must be at least 1, got {self.max_span}")


@dataclass(frozen=True)
class Scored:
    """The reader's verdict on one (query, unit) pair."""

    score: float  # selection score of the best window
    start: int  # answer span, characters of the unit, end exclusive
    end: int
    span_score: float


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


def score_pairs(
    net: Any,
    lay: Layout,
    pad: int,
    queries: Sequence[QueryWindow],
    passages: Sequence[PassageTokens],
    pairs: Sequence[tuple[int, int]],
    *,
    stride: int,
    max_span: int,
    batch_size: int,
    device: str,
    progress: Callable[[int], None] | None = None,
) -> list[Scored]:
    """Score (query index, passage index) pairs: every window, batched longest first."""
    import torch

    from cmrkit.retrieval.reader.model import best_spans, collate, passage_mask

    seqs: list[Item] = []
    owner: list[int] = []
    for p, (qi, pi) in enumerate(pairs):
        for x in items(lay, queries[qi], passages[pi], stride):
            seqs.append(x)
            owner.append(p)
    n = len(seqs)
    sel = np.full(n, -np.inf, dtype=np.float32)
    span_pos = np.zeros((n, 2), dtype=np.int64)
    span_val = np.zeros(n, dtype=np.float32)
    if n:
        order = longest_first([len(x.ids) for x in seqs])
        with inference(net):
            for b in range(0, n, batch_size):
                chosen = order[b : b + batch_size]
                batch_items = [seqs[i] for i in chosen]
                batch = collate(batch_items, lay, pad, device)
                hidden = net.hidden(batch)
                start, end = net.span_logits(hidden)
                valid = passage_mask(batch_items, hidden.shape[1], device)
                spans, values = best_spans(start, end, valid, max_span)
                if net.select == "cls":
                    scores = net.cls_scores(hidden)
                else:
                    query = torch.tensor(
                        [x.query_mention for x in batch_items], dtype=torch.long, device=device
                    )
                    scores = net.coref_scores(hidden, query, spans)
                sel[chosen] = scores.float().cpu().numpy()
                span_pos[chosen] = spans.cpu().numpy()
                span_val[chosen] = values.float().cpu().numpy()
                if progress:
                    progress(len(chosen))
    best: list[int | None] = [None] * len(pairs)
    for i in range(n):  # the best window; ties go to the earlier window
        p = owner[i]
        if best[p] is None or sel[i] > sel[best[p]]:  # type: ignore[index]
            best[p] = i
    out: list[Scored] = []
    for p, i in enumerate(best):
        if i is None:  # an empty unit: no window holds a token
            out.append(Scored(-math.inf, 0, 0, -math.inf))
            continue
        x = seqs[i]
        offsets = passages[pairs[p][1]].offsets
        first = x.window + int(span_pos[i, 0]) - x.passage_at
        last = x.window + int(span_pos[i, 1]) - x.passage_at
        s, e = tokens_to_chars(offsets, first, last)
        out.append(Scored(float(sel[i]), s, e, float(span_val[i])))
    return out


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


def _collection_of(
    run: Path, sidecar: dict[str, Any] | None, collection: str | Path | None
) -> Path:
    if collection is not None:
        coll = collection_dir(collection)
        check_run_of(run, sidecar, collection=coll)
        return coll
    made_on = recorded(sidecar, "collection")
    if made_on is None:
        raise CmrkitError(
            "the run has no sidecar naming its collection; pass --collection", path=run
        )
    return collection_dir(made_on)


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
    from cmrkit.retrieval.reader.model import resolve_reader
    from cmrkit.trec import ranked, read_run

    started = time.perf_counter()
    opts = options or RerankOptions()
    opts.check()
    run_path_in = Path(run)
    if not run_path_in.is_file():
        raise CmrkitError("no such run file", path=run_path_in)
    ref = resolve_reader(model)
    markers = ref.markers
    if opts.markers is not None and tuple(opts.markers) != markers:
        raise CmrkitError(
            f"the reader was trained with markers {markers[0]!r} {markers[1]!r}, not "
            f"{opts.markers[0]!r} {opts.markers[1]!r}; drop --markers or train a reader with them",
            path=ref.path,
        )
    params = ref.metadata["parameters"]
    weight = opts.interpolation if opts.interpolation is not None else reader_weight(ref.metadata)
    span_weight = (
        opts.span_weight
        if opts.span_weight is not None
        else reader_weight(ref.metadata, "span_weight")
    )
    stride = opts.stride or int(params["stride"])
    max_span = opts.max_span or int(params["max_span"])
    sidecar_in = read_sidecar(run_path_in)
    coll = _collection_of(run_path_in, sidecar_in, collection)
    split = _split_of(run_path_in, sidecar_in, split)
    topics = read_topics(coll, split)
    by_qid = {t.qid: t for t in topics}
    ranking = read_run(run_path_in)
    for qid in ranking:
        if qid not in by_qid:
            raise CmrkitError(
                f"query {qid!r} of the run is no topic of split {split!r} of {coll} (a run of "
                "another collection or split?); pass the run's own --collection and --split",
                path=run_path_in,
            )
    name = name or f"{run_path_in.name.split('.')[0]}-rerank"
    out_run, _ = run_paths(Path(runs_dir), coll, name, split)
    out_spans = spans_path(out_run)
    if out_run.resolve() == run_path_in.resolve():
        raise CmrkitError("the reranked run would replace its input; pass another --name")
    parameters = {
        "model": ref.identity(),
        "markers": list(markers),
        "depth": opts.depth,
        "max_length": int(params["max_length"]),
        "query_max_length": int(params["query_max_length"]),
        "stride": stride,
        "max_span": max_span,
        "interpolation": weight,
        "span_weight": span_weight,
        "input_run_sha256": sha256_file(run_path_in),
    }
    spec = RunSpec.for_collection(
        runs_dir,
        coll,
        system="rerank",
        name=name,
        split=split,
        parameters=parameters,
        index_id="",
        command=list(argv) if argv is not None else None,
        also=(out_spans,),
    )

    def compute() -> Computed:
        texts: dict[str, str] = {}
        for _, record in iter_corpus(coll):
            texts[record["id"]] = record["contents"]
        own_docs = own_document_units(coll, [by_qid[q] for q in ranking])
        heads: dict[str, list[str]] = {}
        tails: dict[str, list[str]] = {}
        for qid in sorted(ranking):
            ban = {by_qid[qid].unit} | set(own_docs.get(qid, frozenset()))
            docs = [d for d, _ in ranked(ranking[qid]) if d not in ban]
            for d in docs[: opts.depth]:
                if d not in texts:
                    raise CmrkitError(
                        f"unit {d!r} (query {qid}) is not in the corpus of {coll} (a run of "
                        "another collection?)",
                        path=run_path_in,
                    )
            heads[qid] = docs[: opts.depth]
            tails[qid] = docs[opts.depth :]
        timings: dict[str, float] = {"read": round(time.perf_counter() - started, 3)}
        result = _score(
            ref, coll, by_qid, heads, texts, markers, stride, max_span, opts, progress, timings
        )
        device, scored = result
        run_out: RankedRun = {}
        span_lines: list[str] = []
        for qid in sorted(ranking):
            docs = heads[qid]
            verdicts = [scored[(qid, d)] for d in docs]
            final = combine(
                [v.score for v in verdicts],
                [v.span_score for v in verdicts],
                [ranking[qid][d] for d in docs],
                span_weight,
                weight,
            )
            values = written_scores(final.astype(np.float32))
            top = ranked({d: float(s) for d, s in zip(docs, values.tolist(), strict=True)})
            by_doc = dict(zip(docs, verdicts, strict=True))
            floor = math.floor(min((s for _, s in top), default=0.0))
            rest = [(d, float(floor - 1 - j)) for j, d in enumerate(tails[qid])]
            run_out[qid] = top + rest
            for d, s in top:
                v = by_doc[d]
                span_lines.append(
                    json.dumps(
                        {
                            "qid": qid,
                            "docno": d,
                            "start": v.start,
                            "end": v.end,
                            "score": s,
                            "selection": round(v.score, 6),
                            "span_score": round(v.span_score, 4),
                        },
                        ensure_ascii=False,
                    )
                )
        from cmrkit.retrieval.dense.store import versions

        tag = (
            f"{name}:depth={opts.depth}"
            + (f":s={span_weight:g}" if span_weight else "")
            + (f":w={weight:g}" if weight else "")
        )
        tag = tag.replace(" ", "_")
        sidecar = {
            "spans": str(out_spans),
            "input_run": {
                "path": str(run_path_in),
                "sha256": parameters["input_run_sha256"],
                "system": recorded(sidecar_in, "system"),
                "name": recorded(sidecar_in, "name"),
            },
            "model": {
                **ref.identity(),
                "tag": ref.tag,
                "trained": ref.metadata,
            },
            "device": device,
            "batch_size": opts.batch_size,
            "interpolation": {
                "weight": weight,
                "span_weight": span_weight,
                "score": "the reader's selection score"
                if weight == 0 and span_weight == 0
                else "z(selection) + span_weight * z(best span score) + weight * z(input run), "
                "z-scores over each query's reranked units",
                "from": "--interpolation" if opts.interpolation is not None else "the reader",
                "span_weight_from": "--span-weight"
                if opts.span_weight is not None
                else "the reader",
            },
            "ranking": {
                "own_unit_removed": True,
                "own_document_removed": any(t.exclude_doc for t in topics),
                "below_depth": "input order, integer scores below the reranked units",
                "tie_break": "score descending (as written, 6 decimals), then docno descending",
            },
            "versions": versions(),
        }
        spans = "".join(line + "\n" for line in span_lines)
        return Computed(run_out, tag, sidecar, timings, {out_spans: spans})

    return produce_run(spec, compute, force=force, started=started)


def _score(
    ref: Any,
    coll: Path,
    by_qid: dict[str, Any],
    heads: dict[str, list[str]],
    texts: dict[str, str],
    markers: tuple[str, str],
    stride: int,
    max_span: int,
    opts: RerankOptions,
    progress: bool,
    timings: dict[str, float],
) -> tuple[str, dict[tuple[str, str], Scored]]:
    from cmrkit.console import progress_bar
    from cmrkit.retrieval.dense.models import quiet_hub, resolve_device
    from cmrkit.retrieval.reader.features import (
        layout,
        passage_tokens,
        query_spacy,
        topic_windows,
    )
    from cmrkit.retrieval.reader.model import load_reader

    quiet_hub()
    t0 = time.perf_counter()
    device = resolve_device(opts.device)
    net, tokenizer = load_reader(ref, device)
    params = ref.metadata["parameters"]
    lay = layout(tokenizer, int(params["max_length"]), int(params["query_max_length"]))
    timings["load_model"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    qids = [q for q in sorted(heads) if heads[q]]
    qwin = topic_windows(
        tokenizer, [by_qid[q] for q in qids], markers, lay.query_budget, query_spacy(params)
    )
    docnos = sorted({d for q in qids for d in heads[q]})
    where = {d: i for i, d in enumerate(docnos)}
    ptoks = passage_tokens(tokenizer, [texts[d] for d in docnos])
    pairs = [(qi, where[d]) for qi, q in enumerate(qids) for d in heads[q]]
    timings["tokenize"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    n_seq = sum(len(items(lay, qwin[qi], ptoks[pi], stride)) for qi, pi in pairs)  # cheap: ids only
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    with progress_bar(progress, f"rerank {coll.name}: sequences") as bar:
        task = bar.add_task("sequences", total=n_seq)
        scored = score_pairs(
            net,
            lay,
            pad,
            qwin,
            ptoks,
            pairs,
            stride=stride,
            max_span=max_span,
            batch_size=opts.batch_size,
            device=device,
            progress=lambda n: bar.advance(task, n),
        )
    timings["read_pairs"] = round(time.perf_counter() - t0, 3)
    timings["sequences"] = n_seq
    timings["sequences_per_second"] = round(n_seq / max(timings["read_pairs"], 1e-9), 2)
    out = {(qids[qi], docnos[pi]): s for (qi, pi), s in zip(pairs, scored, strict=True)}
    return device, out
