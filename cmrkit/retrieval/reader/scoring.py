"""Scoring (query, unit) pairs with a reader: the one place where the reader reads.

A pair is read as one sequence per window of the unit (``features.items``), each against the
query's marked window (followed by its context's entities when the reader was trained so). The
pair's selection score is its best window's (ties: the earlier window); its answer is that
window's best valid span (at most ``max_span`` tokens, on passage tokens, not ending before it
starts), mapped back to characters of the unit. Pairs are scored independently of each other
(no score is normalised across pairs); the sequences of all pairs are batched by length,
longest first, so the same pairs, batch size, device and precision give the same bytes.

:func:`score_pairs` is the public entry point (``run rerank``, the dev reranking of ``train
reader`` and the reader judge call it); :func:`open_reader` loads a reader folder for it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cmrkit.errors import CmrkitError
from cmrkit.retrieval.distributed.engine import chunks, fault_point
from cmrkit.retrieval.neural import inference, longest_first
from cmrkit.retrieval.reader.features import (
    Item,
    Layout,
    items,
    passage_tokens,
    query_spacy,
    tokens_to_chars,
    topic_windows,
)


@dataclass(frozen=True)
class Scored:
    """The reader's verdict on one (query, unit) pair."""

    score: float  # selection score of the best window
    start: int  # answer span, characters of the unit, end exclusive
    end: int
    span_score: float  # start + end logits of the answer span


@dataclass
class Reader:
    """A reader ready to read: its network (eval mode, on ``device``), tokenizer, pair layout and
    reading parameters. ``ref`` is the folder it was loaded from (None: a network in training)."""

    net: Any
    tokenizer: Any
    lay: Layout
    markers: tuple[str, str]
    stride: int
    max_span: int
    spacy_model: str | None  # the query window is followed by its context's entities
    device: str
    ref: Any = None
    # what the encoder runs at another precision (``quantized.Int8Weights``,
    # ``onnxrt.OnnxModel``); None: fp32
    fast: Any = None

    @property
    def precision(self) -> str:
        return "fp32" if self.fast is None else self.fast.precision

    @property
    def pad(self) -> int:
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else 0


def open_reader(
    model: str | Path | Any,
    *,
    device: str = "auto",
    stride: int | None = None,
    max_span: int | None = None,
    markers: tuple[str, str] | None = None,
    precision: str = "fp32",
) -> Reader:
    """Load a reader folder (a path, or a ``ReaderRef``) for :func:`score_pairs`; ``stride`` and
    ``max_span`` default to the reader's own; ``markers``, when given, must be the reader's.
    ``precision`` ``int8`` (torch) or ``onnx-int8`` (ONNX Runtime) runs the encoder with int8
    linear layers on the CPU (made once and cached in the reader folder's ``.cache/``; see
    ``quantized.fast_encoder``)."""
    from cmrkit.retrieval import quantized
    from cmrkit.retrieval.neural import quiet_hub, resolve_device
    from cmrkit.retrieval.reader.features import layout
    from cmrkit.retrieval.reader.model import ReaderRef, load_reader, resolve_reader

    quiet_hub()
    quantized.check_precision(precision, device)
    ref = model if isinstance(model, ReaderRef) else resolve_reader(model)
    check_markers(ref, markers)
    dev = resolve_device(device)
    quantized.check_precision(precision, dev)
    net, tokenizer = load_reader(ref, dev)
    fast = None
    if precision != "fp32":
        folder = quantized.cache_folder(ref.path, "local", ref.tag, precision)
        net.encoder, fast = quantized.fast_encoder(net.encoder, precision, folder, ref.sha256)
    params = ref.metadata["parameters"]
    return Reader(
        net,
        tokenizer,
        layout(tokenizer, int(params["max_length"]), int(params["query_max_length"])),
        ref.markers,
        stride or int(params["stride"]),
        max_span or int(params["max_span"]),
        query_spacy(params),
        dev,
        ref,
        fast,
    )


def check_markers(ref: Any, markers: tuple[str, str] | None) -> None:
    """Refuse ``markers`` (given) other than those the reader was trained with."""
    if markers is not None and tuple(markers) != ref.markers:
        have = ref.markers
        raise CmrkitError(
            f"the reader was trained with markers {have[0]!r} {have[1]!r}, not "
            f"{markers[0]!r} {markers[1]!r}; drop --markers or train a reader with them",
            path=ref.path,
        )


def score_pairs(
    reader: Reader,
    queries: Sequence[Any],
    units: Sequence[str],
    pairs: Sequence[tuple[int, int]],
    *,
    batch_size: int = 32,
    progress: Callable[[int, int], None] | None = None,
    timings: dict[str, float] | None = None,
    work: Any = None,
) -> list[Scored]:
    """The reader's verdict on each pair ``(query index, unit index)``, in pair order (read on
    the Ray workers of ``work``, an ``engine.NeuralWork``, when given).

    ``queries`` are marked mentions in context (anything with ``context`` and ``span``, such as
    a collection's topics), ``units`` the texts of the candidate units; each is tokenized once
    however many pairs name it. ``progress(sequences done now, sequences in all)`` is called once
    before the first batch (with 0) and after each; ``timings``, when given, gets ``tokenize``,
    ``read_pairs`` (seconds) and ``sequences``."""
    if batch_size < 1:
        raise CmrkitError(f"--batch-size must be at least 1, got {batch_size}")
    t0 = time.perf_counter()
    used_q = sorted({q for q, _ in pairs})
    used_u = sorted({u for _, u in pairs})
    qwin = dict(
        zip(
            used_q,
            topic_windows(
                reader.tokenizer,
                [queries[q] for q in used_q],
                reader.markers,
                reader.lay.query_budget,
                reader.spacy_model,
            ),
            strict=True,
        )
    )
    ptoks = dict(
        zip(used_u, passage_tokens(reader.tokenizer, [units[u] for u in used_u]), strict=True)
    )
    seqs: list[Item] = []
    owner: list[int] = []
    for p, (q, u) in enumerate(pairs):
        for x in items(reader.lay, qwin[q], ptoks[u], reader.stride):
            seqs.append(x)
            owner.append(p)
    t1 = time.perf_counter()
    if work is not None:
        sel, span_pos, span_val = read_on_ray(work, reader, seqs, batch_size, progress)
    else:
        sel, span_pos, span_val = read_sequences(reader, seqs, batch_size, progress)
    out = _best_windows(seqs, owner, sel, span_pos, span_val, [ptoks[u].offsets for _, u in pairs])
    if timings is not None:
        timings["tokenize"] = round(t1 - t0, 3)
        timings["read_pairs"] = round(time.perf_counter() - t1, 3)
        timings["sequences"] = len(seqs)
    return out


def score_candidates(
    reader: Reader,
    topics: Sequence[Any],
    heads: Sequence[Sequence[str]],
    texts: Mapping[str, str],
    *,
    batch_size: int = 32,
    progress: Callable[[int, int], None] | None = None,
    timings: dict[str, float] | None = None,
    work: Any = None,
) -> list[list[Scored]]:
    """:func:`score_pairs` of each topic against its candidate units ``heads`` (docnos, in
    ``texts``): one list of verdicts per topic, in the order of its candidates."""
    docnos = sorted({d for h in heads for d in h})
    where = {d: i for i, d in enumerate(docnos)}
    pairs = [(qi, where[d]) for qi, h in enumerate(heads) for d in h]
    scored = score_pairs(
        reader,
        topics,
        [texts[d] for d in docnos],
        pairs,
        batch_size=batch_size,
        progress=progress,
        timings=timings,
        work=work,
    )
    out: list[list[Scored]] = []
    at = 0
    for h in heads:
        out.append(scored[at : at + len(h)])
        at += len(h)
    return out


def _unread(
    n: int, progress: Callable[[int, int], None] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arrays of :func:`read_sequences` for ``n`` sequences not read yet (selection -inf,
    spans 0), the progress told 0 of ``n``."""
    if progress:
        progress(0, n)
    return (
        np.full(n, -np.inf, dtype=np.float32),
        np.zeros((n, 2), dtype=np.int64),
        np.zeros(n, dtype=np.float32),
    )


def read_sequences(
    reader: Reader,
    seqs: Sequence[Item],
    batch_size: int,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each sequence's selection score, best span (token positions in the sequence) and that
    span's score, batched longest first."""
    import torch

    from cmrkit.retrieval.reader.model import best_spans, collate, passage_mask

    n = len(seqs)
    sel, span_pos, span_val = _unread(n, progress)
    if not n:
        return sel, span_pos, span_val
    net, device = reader.net, reader.device
    order = longest_first([len(x.ids) for x in seqs])
    with inference(net):
        for b in range(0, n, batch_size):
            chosen = order[b : b + batch_size]
            batch_items = [seqs[i] for i in chosen]
            hidden = net.hidden(collate(batch_items, reader.lay, reader.pad, device))
            start, end = net.span_logits(hidden)
            valid = passage_mask(batch_items, hidden.shape[1], device)
            spans, values = best_spans(start, end, valid, reader.max_span)
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
                progress(len(chosen), n)
    return sel, span_pos, span_val


SHARD_SEQUENCES = 4096  # sequences a Ray task reads at most (a few minutes of one CPU core)

_opened: dict[tuple[Any, ...], Reader] = {}  # this worker's reader, kept between its tasks


def read_shard(
    label: str,
    ref: Any,
    device: str,
    stride: int,
    max_span: int,
    precision: str,
    seqs: Sequence[Item],
    batch_size: int,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], str]:
    """Ray task ``label`` (or any process): :func:`read_sequences` of a shard of sequences with the
    reader folder ``ref`` (opened once per process, then kept) on ``device``; with the device
    it ran on. A shard that is a run of whole batches of the length-sorted sequences (as
    :func:`read_on_ray` cuts them) is read in the batches one process reads."""
    fault_point(f"read-{label}")  # the tests kill and stall workers here
    key = (str(ref.path), ref.sha256, device, stride, max_span, precision)
    if key not in _opened:
        _opened.clear()
        _opened[key] = open_reader(
            ref, device=device, stride=stride, max_span=max_span, precision=precision
        )
    reader = _opened[key]
    return read_sequences(reader, seqs, batch_size), reader.device


def read_on_ray(
    work: Any,
    reader: Reader,
    seqs: Sequence[Item],
    batch_size: int,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`read_sequences` on the Ray workers of ``work`` (``engine.NeuralWork``,
    connected): the same arrays, shard by shard (a shard whose worker dies is read again)."""
    n = len(seqs)
    sel, span_pos, span_val = _unread(n, progress)
    if not n:
        return sel, span_pos, span_val
    order = longest_first([len(x.ids) for x in seqs])
    pieces = chunks(n, work.workers * 4, batch_size, SHARD_SEQUENCES)
    common = (reader.ref, work.device, reader.stride, reader.max_span, reader.precision)
    tasks = [
        (str(i), *common, [seqs[order[j]] for j in piece], batch_size)
        for i, piece in enumerate(pieces)
    ]
    found = work.run(
        read_shard,
        tasks,
        what=lambda i: f"reading sequences {pieces[i].start}..{pieces[i].stop - 1}",
        done=(lambda i, _: progress(len(pieces[i]), n)) if progress else None,
    )
    for piece, (s, pos, val) in zip(pieces, found, strict=True):
        chosen = [order[j] for j in piece]
        sel[chosen], span_pos[chosen], span_val[chosen] = s, pos, val
    return sel, span_pos, span_val


def _best_windows(
    seqs: Sequence[Item],
    owner: Sequence[int],
    sel: np.ndarray,
    span_pos: np.ndarray,
    span_val: np.ndarray,
    offsets: Sequence[Sequence[tuple[int, int]]],
) -> list[Scored]:
    """Each pair's verdict from its best window (ties: the earlier window); ``offsets`` are the
    character offsets of each pair's unit tokens."""
    best: list[int | None] = [None] * len(offsets)
    for i, p in enumerate(owner):
        if best[p] is None or sel[i] > sel[best[p]]:  # type: ignore[index]
            best[p] = i
    out: list[Scored] = []
    for p, i in enumerate(best):
        if i is None:  # an empty unit: no window holds a token
            out.append(Scored(-math.inf, 0, 0, -math.inf))
            continue
        x = seqs[i]
        first = x.window + int(span_pos[i, 0]) - x.passage_at
        last = x.window + int(span_pos[i, 1]) - x.passage_at
        s, e = tokens_to_chars(offsets[p], first, last)
        out.append(Scored(float(sel[i]), s, e, float(span_val[i])))
    return out
