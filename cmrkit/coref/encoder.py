"""Hsu & Horwood's (2022) contrastive mention encoder: its input, its network, its folder.

A mention is read as one sequence in the base encoder's pair layout (BERT's
``[CLS] context [SEP] sentence [SEP]``, the sentence in segment 1):

- the context: the document's first two sentences (the release's order and tokens), the next
  one in place of the mention's own sentence when it is one of them;
- the sentence: the mention's sentence with the markers (``<S>``, ``</S>``, as words) around
  the mention, from its first token to its last (a non-contiguous mention is marked whole);
- at most ``max_length`` (128) tokens: the context is cut first, from its end (the document's
  first words stay), down to nothing; a sentence still too long is cut to a window centred on
  the marked mention (``dense/encode.centred_window``).

The representation is the [CLS] vector and the sum of the mention's own word pieces' vectors
(the words of its tokens, markers left out), each through its own MLP (``h -> h``, ReLU,
``h -> dim``), concatenated; mentions are compared by cosine. The base encoder's own view of a
mention, which picks the training pairs, is the same two vectors without the MLPs, each
L2-normalized, concatenated (:func:`encode`, ``heads=False``).

A model folder holds ``encoder/`` (the fine-tuned encoder and its tokenizer, as
``save_pretrained`` writes them), ``heads.safetensors`` (the two MLPs) and
``cmrkit-coref-model.json`` (format, base model, markers, lengths, the clustering threshold
tuned on dev, data hashes, parameters); ``cmrkit train coref`` adds ``cmrkit-train.json`` (and
``loss.png``).

torch is imported inside the functions that need it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cmrkit.coref.mentions import CorefMention
from cmrkit.coref.options import HEAD_DIM, MAX_LENGTH, MIN_LENGTH
from cmrkit.errors import CmrkitError

METADATA = "cmrkit-coref-model.json"
FORMAT = "cmrkit-coref-model/1"
ENCODER = "encoder"
HEADS = "heads.safetensors"
CONTEXT_SENTENCES = 2
SIMILARITY_RANGE = (-1.0, 1.0)  # a threshold is a cosine similarity


@dataclass(frozen=True)
class MentionInput:
    """One mention's sequence: token ids, token type ids, the positions of its own word pieces
    (markers left out), and how it was made (the context's sentence numbers and the tokens of
    context and sentence kept)."""

    ids: tuple[int, ...]
    types: tuple[int, ...]
    mention: tuple[int, ...]
    context_sentences: tuple[int, ...]
    context_tokens: int
    sentence_tokens: int
    sentence_at: int  # position of the sentence's first token in ``ids``


def context_of(m: CorefMention, sentences: Sequence[tuple[int, list[str]]]) -> list[int]:
    """The sentence numbers read as the mention's context: the document's first
    ``CONTEXT_SENTENCES``, the next one in place of the mention's own."""
    numbers = sorted(n for n, _ in sentences if n != m.sentence)
    return numbers[:CONTEXT_SENTENCES]


def _marked(m: CorefMention, markers: tuple[str, str]) -> tuple[list[str], list[int]]:
    """The sentence's words with the markers as words around the mention, and the indexes of
    the mention's own words in that list."""
    first, last = min(m.tokens), max(m.tokens)
    words = [*m.words[:first], markers[0], *m.words[first : last + 1], markers[1]]
    words += m.words[last + 1 :]
    own = [t + 1 for t in sorted(set(m.tokens))]
    return words, own


def _pieces(tokenizer: Any, texts: Sequence[list[str]]) -> list[tuple[list[int], list[int]]]:
    """Each word list's word pieces (no special tokens) and each piece's word index."""
    out: list[tuple[list[int], list[int]]] = [([], []) for _ in texts]
    full = [i for i, words in enumerate(texts) if words]
    if not full:
        return out
    enc = tokenizer([texts[i] for i in full], is_split_into_words=True, add_special_tokens=False)
    for row, i in enumerate(full):
        out[i] = (list(enc["input_ids"][row]), [int(w) for w in enc.word_ids(row)])
    return out


def mention_inputs(
    tokenizer: Any,
    mentions: Sequence[CorefMention],
    documents: dict[str, list[tuple[int, list[str]]]],
    markers: tuple[str, str],
    max_length: int = MAX_LENGTH,
) -> list[MentionInput]:
    """The sequences of ``mentions`` (see the module's docstring)."""
    from cmrkit.retrieval.reader.features import layout

    if max_length < MIN_LENGTH:
        raise CmrkitError(f"--max-length must be at least {MIN_LENGTH}, got {max_length}")
    # the pair's special tokens (the reader's probe; its budgets, fine for any length from
    # MIN_LENGTH with 8 "query" tokens, are not used)
    lay = layout(tokenizer, max_length, 8)
    budget = max_length - len(lay.prefix) - len(lay.middle) - len(lay.suffix)
    numbers, marked = [], []
    keys: dict[tuple[str, tuple[int, ...]], int] = {}
    for m in mentions:
        if not m.tokens:
            raise CmrkitError(f"mention {m.mention_id!r} has no tokens; rebuild the collection")
        sentences = documents.get(m.doc_id) or [(m.sentence or 0, m.words)]
        numbers.append(tuple(context_of(m, sentences)))
        keys.setdefault((m.doc_id, numbers[-1]), len(keys))
        marked.append(_marked(m, markers))
    context_words = []
    for doc_id, nums in keys:
        by_number = dict(documents.get(doc_id) or [])
        context_words.append([w for n in nums for w in by_number[n]])
    contexts = [ids for ids, _ in _pieces(tokenizer, context_words)]
    sentences = _pieces(tokenizer, [words for words, _ in marked])
    out = []
    for m, nums, (_, own), (ids, word_of) in zip(mentions, numbers, marked, sentences, strict=True):
        ctx = contexts[keys[(m.doc_id, nums)]]
        out.append(_sequence(lay, budget, ctx, ids, word_of, min(m.tokens), own, nums))
    return out


def _sequence(
    lay: Any,
    budget: int,
    ctx: list[int],
    ids: list[int],
    word_of: list[int],
    first: int,
    own: list[int],
    numbers: tuple[int, ...],
) -> MentionInput:
    """One mention's sequence from its context's and marked sentence's word pieces: the
    context cut first (from its end), then the sentence around the marked mention."""
    from cmrkit.retrieval.dense.encode import centred_window

    if len(ids) > budget:  # no context; the sentence cut around the marked mention
        # the marked words: the opening marker (word ``first``) to the closing one
        inside = [i for i, w in enumerate(word_of) if first <= w <= own[-1] + 1]
        lo, hi = centred_window(inside[0], inside[-1], len(ids), budget)
        ids, word_of = ids[lo:hi], word_of[lo:hi]
    kept = ctx[: max(0, budget - len(ids))]
    at = len(lay.prefix) + len(kept) + len(lay.middle)
    mine = set(own)
    positions = tuple(at + i for i, w in enumerate(word_of) if w in mine)
    if not positions:  # the mention's words gave no word pieces: its markers stand for it
        positions = tuple(at + i for i, w in enumerate(word_of) if first <= w <= own[-1] + 1)
    seq = (*lay.prefix, *kept, *lay.middle, *ids, *lay.suffix)
    types = tuple(0 if i < at else lay.passage_type for i in range(len(seq)))
    return MentionInput(seq, types, positions, numbers, len(kept), len(ids), at)


def build_net(encoder: Any, dim: int = HEAD_DIM) -> Any:
    """The network: the encoder and the two MLPs (``cls``, ``mention``), a ``ModuleDict``."""
    from torch import nn

    hidden = int(encoder.config.hidden_size)

    def mlp() -> Any:
        return nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, dim))

    return nn.ModuleDict({"encoder": encoder, "cls": mlp(), "mention": mlp()})


def collate(items: Sequence[MentionInput], pad: int, typed: bool, device: str) -> dict[str, Any]:
    """Padded tensors of a batch: the encoder's inputs and ``mention_mask`` (1.0 on each
    mention's own word pieces)."""
    import torch

    width = max(len(x.ids) for x in items)
    ids = torch.full((len(items), width), pad, dtype=torch.long)
    mask = torch.zeros((len(items), width), dtype=torch.long)
    types = torch.zeros((len(items), width), dtype=torch.long)
    own = torch.zeros((len(items), width), dtype=torch.float32)
    for row, x in enumerate(items):
        n = len(x.ids)
        ids[row, :n] = torch.tensor(x.ids, dtype=torch.long)
        mask[row, :n] = 1
        types[row, :n] = torch.tensor(x.types, dtype=torch.long)
        own[row, list(x.mention)] = 1.0
    batch = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
    if typed:
        batch["token_type_ids"] = types.to(device)
    return {"inputs": batch, "mention_mask": own.to(device)}


def represent(net: Any, batch: dict[str, Any], heads: bool = True) -> Any:
    """(batch, 2 * dim) representations: each MLP's output of the [CLS] vector and of the
    summed mention vectors, concatenated; ``heads=False``: the two vectors themselves, each
    L2-normalized (the base encoder's view)."""
    import torch

    hidden = net["encoder"](**batch["inputs"]).last_hidden_state
    cls = hidden[:, 0]
    summed = torch.einsum("bt,bth->bh", batch["mention_mask"], hidden)
    if not heads:
        normalize = torch.nn.functional.normalize
        return torch.cat([normalize(cls, dim=-1), normalize(summed, dim=-1)], dim=-1)
    return torch.cat([net["cls"](cls), net["mention"](summed)], dim=-1)


def encode(
    net: Any,
    tokenizer: Any,
    items: Sequence[MentionInput],
    *,
    batch_size: int,
    device: str,
    heads: bool = True,
    tick: Callable[[int], None] | None = None,
) -> np.ndarray:
    """The representations of ``items`` (float32 rows, input order), longest first in batches
    under ``torch.inference_mode``; ``tick(n)`` after each batch."""
    from cmrkit.retrieval.neural import inference, longest_first

    if not items:
        return np.zeros((0, 0), dtype=np.float32)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    typed = "token_type_ids" in tokenizer.model_input_names
    order = longest_first([len(x.ids) for x in items])
    rows: list[np.ndarray] = []
    with inference(net):
        for at in range(0, len(order), batch_size):
            chunk = [items[i] for i in order[at : at + batch_size]]
            out = represent(net, collate(chunk, pad, typed, device), heads=heads)
            rows.append(out.float().cpu().numpy())
            if tick is not None:
                tick(len(chunk))
    vectors = np.concatenate(rows)
    result = np.empty_like(vectors)
    result[order] = vectors
    return result


@dataclass(frozen=True)
class CorefModelRef:
    """A coreference model folder and what it records."""

    path: Path
    sha256: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def markers(self) -> tuple[str, str]:
        m = self.metadata["markers"]
        return (str(m[0]), str(m[1]))

    @property
    def max_length(self) -> int:
        return int(self.metadata["max_length"])

    @property
    def threshold(self) -> float:
        return float(self.metadata["threshold"]["value"])

    @property
    def threshold_range(self) -> tuple[float, float]:
        lo, hi = self.metadata.get("threshold_range", SIMILARITY_RANGE)
        return float(lo), float(hi)

    def identity(self) -> dict[str, Any]:
        return {"path": str(self.path), "sha256": self.sha256}


def _other_kind(folder: Path) -> str | None:
    """What a folder that is no coreference model is, when it is a known model."""
    from cmrkit.fileio import KINDS, output_kind

    # a model folder of train dense or train reader, marked or from before the marks
    if (folder / KINDS["dense-model"].signature).is_file():
        return "a dense retrieval model (written by `cmrkit train dense`)"
    if (folder / KINDS["reader"].signature).is_file():
        return "a reader (written by `cmrkit train reader`)"
    kind = output_kind(folder)
    if kind in KINDS:
        return KINDS[kind].what
    if (folder / "modules.json").is_file():
        return "a sentence-transformers model"
    if (folder / "config.json").is_file():
        return "a Hugging Face model"
    return None


def resolve_coref_model(path: str | Path) -> CorefModelRef:
    """A folder written by ``cmrkit train coref``; anything else is refused in one line."""
    from cmrkit.retrieval.neural import fingerprint

    folder = Path(path).expanduser()
    todo = "pass a folder written by `cmrkit train coref`"
    if not folder.is_dir():
        raise CmrkitError(f"no such coreference model folder; {todo}", path=folder)
    meta_path = folder / METADATA
    if not meta_path.is_file():
        other = _other_kind(folder)
        what = f"is {other}, not a coreference model" if other else "is not a coreference model"
        raise CmrkitError(f"{what} (no {METADATA}); {todo}", path=folder)
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CmrkitError(
            f"cannot read the model's metadata ({e}); train the model again", path=meta_path
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CmrkitError(f"not coreference model metadata ({FORMAT} expected)", path=meta_path)
    for key in ("markers", "max_length", "threshold", "parameters"):
        if key not in meta:
            raise CmrkitError(f"the model's metadata lacks {key!r}; train it again", path=meta_path)
    if not (folder / HEADS).is_file() or not (folder / ENCODER / "config.json").is_file():
        raise CmrkitError(
            f"the model folder lacks {HEADS} or {ENCODER}/; train it again or copy it whole",
            path=folder,
        )
    return CorefModelRef(folder, fingerprint(folder), meta)


def check_threshold(ref: CorefModelRef, threshold: float | None) -> float:
    """The clustering threshold: ``threshold`` when given (refused outside the model's range),
    else the one the model was tuned to."""
    if threshold is None:
        return ref.threshold
    lo, hi = ref.threshold_range
    if not lo <= threshold <= hi:
        raise CmrkitError(
            f"--threshold {threshold} is outside the model's range [{lo:g}, {hi:g}] (a cosine "
            f"similarity; the model's own is {ref.threshold:g})"
        )
    return float(threshold)


def load_model(ref: CorefModelRef, device: str) -> tuple[Any, Any]:
    """The network (eval mode, on ``device``) and its tokenizer."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from cmrkit.retrieval.reader.model import load_encoder

    encoder, tokenizer = load_encoder(ref.path / ENCODER)
    net = build_net(encoder, int(ref.metadata["parameters"].get("head_dim", HEAD_DIM)))
    try:
        heads = load_file(str(ref.path / HEADS))
    except SafetensorError as e:
        raise CmrkitError(
            f"the model's heads are damaged (safetensors: {e}); train it again",
            path=ref.path / HEADS,
        ) from None
    missing, unexpected = net.load_state_dict(heads, strict=False)
    wrong = [k for k in missing if not k.startswith("encoder.")] + list(unexpected)
    if wrong:
        raise CmrkitError(
            f"the model's heads do not fit its network ({', '.join(sorted(wrong)[:3])}); train "
            "it again",
            path=ref.path / HEADS,
        )
    net.to(device)
    net.eval()
    return net, tokenizer


def save_model(net: Any, tokenizer: Any, folder: Path, metadata: dict[str, Any]) -> None:
    """Write a model folder (``folder``: a new, staged path)."""
    from safetensors.torch import save_file

    from cmrkit.retrieval.training import write_json

    net["encoder"].save_pretrained(str(folder / ENCODER))
    tokenizer.save_pretrained(str(folder / ENCODER))
    heads = {
        k: v.detach().cpu().contiguous()
        for k, v in net.state_dict().items()
        if not k.startswith("encoder.")
    }
    save_file(heads, str(folder / HEADS))
    write_json(folder / METADATA, metadata)
