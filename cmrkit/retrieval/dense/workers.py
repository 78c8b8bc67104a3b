"""The dense encoders on Ray workers (``encode``, ``run dense --engine ray``).

A task encodes one piece of the work with the encoder a local run would use, loaded once per
worker process (:func:`encoders`): a shard of the corpus (its texts, tokenized in the worker as
``store`` tokenizes a shard) or a run of consecutive query batches (token ids, already in the
longest-first order of all queries, cut at batch boundaries). Each piece is read in the same
batches as on one machine, so the vectors are the same floats (on the same kind of CPU).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from cmrkit.retrieval.dense.encode import encode_ids, passage_ids
from cmrkit.retrieval.dense.models import ModelRef, load_encoders
from cmrkit.retrieval.distributed.engine import fault_point

_loaded: dict[tuple[str, str, str], Any] = {}  # this worker's encoders, by model, device, precision


def encoders(ref: ModelRef, device: str, precision: str) -> Any:
    """The model's encoders in this worker process (loaded on first use, then kept)."""
    key = (str(ref.path), device, precision)
    if key not in _loaded:
        from cmrkit.retrieval.neural import quiet_hub

        quiet_hub()
        _loaded.clear()  # one model per worker at a time
        _loaded[key] = load_encoders(ref, device, precision)
    return _loaded[key]


def encode_task(
    label: str,
    ref: ModelRef,
    device: str,
    precision: str,
    side: str,
    texts: Sequence[str] | None,
    ids: Sequence[Sequence[int]] | None,
    max_length: int,
    batch_size: int,
) -> tuple[tuple[np.ndarray, dict[str, float]], str]:
    """Ray task ``label`` (a shard's file stem, or ``queries-N``): ((the vectors, the seconds
    spent tokenizing and encoding), the device) of a shard's passage ``texts`` (cut to
    ``max_length`` tokens) or of query token ``ids`` (``side`` ``query``)."""
    fault_point(f"encode-{label}")  # the tests kill and stall workers here
    loaded = encoders(ref, device, precision)
    model = loaded.passage if side == "passage" else loaded.query
    t0 = time.perf_counter()
    if texts is not None:
        ids = passage_ids(model.tokenizer, texts, max_length)
    t1 = time.perf_counter()
    vectors = encode_ids(model, ids or [], batch_size=batch_size)
    seconds = {"tokenize": t1 - t0, "encode": time.perf_counter() - t1}
    return (vectors, seconds), loaded.device
