"""Texts to vectors: mention markers, query windows, and the batched encoder.

A query is its unit's text with the mention wrapped in the markers (``... the <S>quake</S> hit
...``), cut to ``max_length`` tokens around the mention: the mention and both markers are always
kept, and the rest of the window is shared between the left and right context (what one side
lacks goes to the other). A passage is its text cut to ``max_length`` tokens from the start.

Encoding tokenizes once, sorts the inputs by token count (longest first, ties by position) so a
batch pads little, and runs the model batch by batch; the same inputs, batch size and device give
the same floats.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from cmrkit.errors import CmrkitError
from cmrkit.retrieval.neural import inference, longest_first


def mark(context: str, span: tuple[int, int], markers: tuple[str, str]) -> str:
    """``context`` with the characters ``span`` (start, end exclusive) wrapped in ``markers``."""
    start, end = span
    if not 0 <= start < end <= len(context):
        raise CmrkitError(
            f"mention span {list(span)} lies outside its context of {len(context)} characters"
        )
    return context[:start] + markers[0] + context[start:end] + markers[1] + context[end:]


def _specials(tokenizer: Any) -> tuple[list[int], list[int]]:
    """The special token ids a tokenizer puts before and after one sequence."""
    probe = "cmrkit"
    inner = list(tokenizer(probe, add_special_tokens=False)["input_ids"])
    full = list(tokenizer(probe, add_special_tokens=True)["input_ids"])
    for pos in range(len(full) - len(inner) + 1):
        if full[pos : pos + len(inner)] == inner:
            return full[:pos], full[pos + len(inner) :]
    raise CmrkitError("cannot tell the special tokens of this model's tokenizer")


def passage_ids(tokenizer: Any, texts: Sequence[str], max_length: int) -> list[list[int]]:
    """Token ids (special tokens included) of passages, cut to ``max_length`` from the start."""
    if not texts:
        return []
    encoded = tokenizer(
        list(texts), truncation=True, max_length=max_length, add_special_tokens=True
    )
    return [list(ids) for ids in encoded["input_ids"]]


def query_ids(
    tokenizer: Any,
    contexts: Sequence[str],
    spans: Sequence[tuple[int, int]],
    markers: tuple[str, str],
    max_length: int,
) -> list[list[int]]:
    """Token ids of marked queries, each a window of at most ``max_length`` tokens that keeps
    the marked mention whole and centres it in its context."""
    tokenized = marked_tokens(tokenizer, contexts, spans, markers)
    if not tokenized:
        return []
    before, after = _specials(tokenizer)
    budget = max_length - len(before) - len(after)
    out: list[list[int]] = []
    for ids, _, first, last in tokenized:
        lo, hi = centred_window(first, last, len(ids), budget)
        out.append([*before, *ids[lo:hi], *after])
    return out


def marked_tokens(
    tokenizer: Any,
    contexts: Sequence[str],
    spans: Sequence[tuple[int, int]],
    markers: tuple[str, str],
) -> list[tuple[list[int], list[tuple[int, int]], int, int]]:
    """Each marked query's tokens (no special tokens, no truncation): ``(ids, offsets, first,
    last)``, ``first``..``last`` the tokens of the mention with its markers."""
    marked = [mark(c, s, markers) for c, s in zip(contexts, spans, strict=True)]
    if not marked:
        return []
    encoded = tokenizer(
        marked, add_special_tokens=False, return_offsets_mapping=True, truncation=False
    )
    out = []
    for (start, end), ids, offsets in zip(
        spans, encoded["input_ids"], encoded["offset_mapping"], strict=True
    ):
        m_start = start  # the opening marker's first character in the marked text
        m_end = end + len(markers[0]) + len(markers[1])  # just after the closing marker
        first = next((i for i, (_, b) in enumerate(offsets) if b > m_start), len(ids))
        last = max((i for i, (a, _) in enumerate(offsets) if a < m_end), default=first)
        out.append((ids, offsets, first, last))
    return out


def centred_window(first: int, last: int, n: int, budget: int) -> tuple[int, int]:
    """``(lo, hi)``: at most ``budget`` of ``n`` tokens holding ``first``..``last`` whole and
    centred (the room left on one side goes to the other); from ``first`` when they are longer."""
    span_len = last - first + 1
    if span_len >= budget:
        return first, first + budget
    room = budget - span_len
    left = min(first, room // 2)
    right = min(n - 1 - last, room - left)
    left = min(first, room - right)
    return first - left, last + 1 + right


def decode(tokenizer: Any, ids: Sequence[int]) -> str:
    """The text a model sees for ``ids`` (special tokens left out)."""
    return str(tokenizer.decode(list(ids), skip_special_tokens=True))


def collate(model: Any, inputs: Sequence[Sequence[int]]) -> dict[str, Any]:
    """A padded batch of token ids as the model's input tensors, on the model's device."""
    import torch

    tokenizer = model.tokenizer
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    width = max(len(x) for x in inputs)
    ids = np.full((len(inputs), width), pad, dtype=np.int64)
    mask = np.zeros((len(inputs), width), dtype=np.int64)
    for row, seq in enumerate(inputs):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    features: dict[str, Any] = {
        "input_ids": torch.from_numpy(ids).to(model.device),
        "attention_mask": torch.from_numpy(mask).to(model.device),
    }
    if "token_type_ids" in tokenizer.model_input_names:
        features["token_type_ids"] = torch.zeros_like(features["input_ids"])
    return features


def dimension(model: Any) -> int:
    """The size of a sentence-transformers model's embeddings."""
    get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    return int(get() or 0)


def encode_ids(
    model: Any,
    inputs: Sequence[Sequence[int]],
    *,
    batch_size: int,
    progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Sentence embeddings (float32, one row per input, input order) of tokenized inputs."""
    n = len(inputs)
    if n == 0:
        return np.zeros((0, dimension(model)), dtype=np.float32)
    order = longest_first([len(x) for x in inputs])
    out: np.ndarray | None = None
    with inference(model):
        for b in range(0, n, batch_size):
            chosen = order[b : b + batch_size]
            features = collate(model, [inputs[i] for i in chosen])
            emb = model(features)["sentence_embedding"].float().cpu().numpy()
            if out is None:
                out = np.empty((n, emb.shape[1]), dtype=np.float32)
            out[chosen] = emb
            if progress:
                progress(len(chosen))
    assert out is not None
    return out
