"""The reader network, its folder, and decoding its best span.

The network is a Hugging Face encoder with three heads over its last hidden states:
- ``span``: a linear layer giving start and end logits for every token;
- a passage-selection head, one of
  - ``cls`` (E2E-DPR): a learned vector over the [CLS] representation;
  - ``coref`` (E2E-Integrated): a mention score ``s_m(g_j)`` plus a pairwise score
    ``s_a(g_i, g_j)``, both one-hidden-layer FFNNs (128 units), over span-boundary embeddings
    ``g = [first token, last token]``; ``g_i`` is the query mention, ``g_j`` the candidate span
    and ``s_a`` reads ``[g_i, g_j, g_i * g_j]``.
Scores are compared across the candidates of one query (softmax over them in training).

A reader folder holds ``encoder/`` (the fine-tuned encoder and its tokenizer, as
``save_pretrained`` writes them), ``heads.safetensors`` and ``cmrkit-reader.json`` (format,
selection head, markers, lengths, base model, training data hashes, parameters); ``cmrkit
train reader`` adds ``cmrkit-train.json`` (and ``loss.png``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from cmrkit.errors import CmrkitError
from cmrkit.retrieval.neural import fingerprint, quiet_transformers

READER_METADATA = "cmrkit-reader.json"
READER_FORMAT = "cmrkit-reader/1"
ENCODER = "encoder"
HEADS = "heads.safetensors"
SELECTS = ("cls", "coref")
FFNN_HIDDEN = 128


def _ffnn(inputs: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(inputs, FFNN_HIDDEN), nn.ReLU(), nn.Dropout(dropout), nn.Linear(FFNN_HIDDEN, 1)
    )


class ReaderNet(nn.Module):
    """An encoder with span heads and one selection head (``cls`` or ``coref``)."""

    def __init__(self, encoder: Any, select: str, dropout: float = 0.1):
        super().__init__()
        if select not in SELECTS:
            raise CmrkitError(f"--select must be one of {', '.join(SELECTS)}, got {select!r}")
        self.encoder = encoder
        self.select = select
        hidden = int(encoder.config.hidden_size)
        self.dropout = nn.Dropout(dropout)
        self.span = nn.Linear(hidden, 2)
        if select == "cls":
            self.selector = nn.Linear(hidden, 1)
        else:
            self.mention_score = _ffnn(2 * hidden, dropout)
            self.pair_score = _ffnn(6 * hidden, dropout)

    def hidden(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Last hidden states (batch, tokens, hidden), dropout applied in training."""
        return self.dropout(self.encoder(**batch).last_hidden_state)

    def span_logits(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.span(hidden)
        return logits[..., 0], logits[..., 1]

    def cls_scores(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.selector(hidden[:, 0]).squeeze(-1)

    def coref_scores(
        self, hidden: torch.Tensor, query: torch.Tensor, span: torch.Tensor
    ) -> torch.Tensor:
        """s_m(g_j) + s_a(g_i, g_j); ``query`` and ``span`` are (batch, 2) token positions."""
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        g_i = torch.cat([hidden[rows, query[:, 0]], hidden[rows, query[:, 1]]], dim=-1)
        g_j = torch.cat([hidden[rows, span[:, 0]], hidden[rows, span[:, 1]]], dim=-1)
        pair = torch.cat([g_i, g_j, g_i * g_j], dim=-1)
        return (self.mention_score(g_j) + self.pair_score(pair)).squeeze(-1)


def best_spans(
    start: torch.Tensor, end: torch.Tensor, valid: torch.Tensor, max_span: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's best valid span: (batch, 2) positions and (batch,) scores start + end.

    A span is valid when both ends lie on passage tokens (``valid``), it does not end before it
    starts, and it holds at most ``max_span`` tokens; ties go to the earliest start, then end.
    """
    rows, n = start.shape
    width = max(1, min(max_span, n))
    # only the band of spans of 1..width tokens: (rows, n starts, width lengths), not n x n
    ends = torch.nn.functional.pad(end, (0, width - 1), value=float("-inf")).unfold(1, width, 1)
    ends_ok = torch.nn.functional.pad(valid, (0, width - 1), value=False).unfold(1, width, 1)
    scores = (start[:, :, None] + ends).masked_fill(~(valid[:, :, None] & ends_ok), float("-inf"))
    flat = scores.reshape(rows, -1)
    best = flat.argmax(dim=1)  # the first maximum: the earliest start, then the earliest end
    first = best // width
    spans = torch.stack([first, first + best % width], dim=1)
    return spans, flat.gather(1, best[:, None]).squeeze(1)


@dataclass(frozen=True)
class ReaderRef:
    """A reader folder and what it is."""

    path: Path
    sha256: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def markers(self) -> tuple[str, str]:
        m = self.metadata["markers"]
        return (m[0], m[1])

    @property
    def select(self) -> str:
        return str(self.metadata["select"])

    @property
    def tag(self) -> str:
        import re

        slug = re.sub(r"[^a-z0-9._-]+", "-", self.path.resolve().name.lower()).strip("-.")
        return f"{slug or 'reader'}-{self.sha256[:8]}"

    def identity(self) -> dict[str, Any]:
        return {"path": str(self.path), "sha256": self.sha256, "select": self.select}


def resolve_reader(path: str | Path) -> ReaderRef:
    """A folder written by ``cmrkit train reader``; anything else is refused in one line."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise CmrkitError("no such reader folder; train one with `cmrkit train reader`", path=path)
    meta_path = folder / READER_METADATA
    if not meta_path.is_file() or not (folder / HEADS).is_file():
        raise CmrkitError(
            f"is not a reader (no {READER_METADATA} or {HEADS}); pass a folder written by "
            "`cmrkit train reader`",
            path=folder,
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CmrkitError(
            f"cannot read the reader's metadata ({e}); retrain it", path=meta_path
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != READER_FORMAT:
        raise CmrkitError(f"not reader metadata ({READER_FORMAT} expected)", path=meta_path)
    for key in ("select", "markers", "parameters"):
        if key not in meta:
            raise CmrkitError(f"reader metadata lacks {key!r}; retrain the reader", path=meta_path)
    _check_heads(folder / HEADS)
    return ReaderRef(folder, fingerprint(folder), meta)


def _damaged_heads(path: Path, e: Exception) -> CmrkitError:
    reason = str(e).splitlines()[0] if str(e) else type(e).__name__
    reason = reason.removeprefix("Error while deserializing header: ")
    return CmrkitError(
        f"the reader's heads are damaged (safetensors: {reason}); retrain the reader or copy its "
        "folder again",
        path=path,
    )


def _check_heads(path: Path) -> None:
    """Read the header of the heads' file (cheap): a truncated or foreign file is refused now,
    before any work."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            list(f.keys())
    except SafetensorError as e:  # an OSError (unreadable file) is said as the system says it
        raise _damaged_heads(path, e) from None


def load_encoder(path: Path) -> tuple[Any, Any]:
    """(encoder, tokenizer) of a Hugging Face folder, offline."""
    from transformers import AutoModel, AutoTokenizer

    quiet_transformers()
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        encoder = AutoModel.from_pretrained(str(path), local_files_only=True)
    except Exception as e:  # a broken folder surfaces as many exception types
        raise CmrkitError(
            f"transformers cannot load this encoder ({str(e).splitlines()[0]})", path=path
        ) from None
    if not getattr(tokenizer, "is_fast", False):
        raise CmrkitError(
            "the reader needs a fast tokenizer (character offsets); this folder has none",
            path=path,
        )
    return encoder, tokenizer


def load_reader(ref: ReaderRef, device: str) -> tuple[ReaderNet, Any]:
    """The reader network (eval mode, on ``device``) and its tokenizer."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    encoder, tokenizer = load_encoder(ref.path / ENCODER)
    net = ReaderNet(encoder, ref.select, float(ref.metadata["parameters"].get("dropout", 0.1)))
    try:
        heads = load_file(str(ref.path / HEADS))
    except SafetensorError as e:  # damaged since it was resolved
        raise _damaged_heads(ref.path / HEADS, e) from None
    missing, unexpected = net.load_state_dict(heads, strict=False)
    wrong = [k for k in missing if not k.startswith("encoder.")] + list(unexpected)
    if wrong:
        raise CmrkitError(
            f"the reader's heads do not match its selection head {ref.select!r} "
            f"({', '.join(sorted(wrong)[:3])}); retrain it",
            path=ref.path / HEADS,
        )
    net.to(device)
    net.eval()
    return net, tokenizer


def save_reader(net: ReaderNet, tokenizer: Any, folder: Path, metadata: dict[str, Any]) -> None:
    """Write a reader folder (``folder`` must be new: a staged path)."""
    from safetensors.torch import save_file

    net.encoder.save_pretrained(str(folder / ENCODER))
    tokenizer.save_pretrained(str(folder / ENCODER))
    heads = {
        k: v.detach().cpu().contiguous()
        for k, v in net.state_dict().items()
        if not k.startswith("encoder.")
    }
    save_file(heads, str(folder / HEADS))
    (folder / READER_METADATA).write_text(
        json.dumps(metadata, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )


def collate(items: list[Any], lay: Any, pad: int, device: str) -> dict[str, torch.Tensor]:
    """Padded input tensors of reader items."""
    width = max(len(x.ids) for x in items)
    ids = torch.full((len(items), width), pad, dtype=torch.long)
    mask = torch.zeros((len(items), width), dtype=torch.long)
    types = torch.zeros((len(items), width), dtype=torch.long)
    for row, x in enumerate(items):
        n = len(x.ids)
        ids[row, :n] = torch.tensor(x.ids, dtype=torch.long)
        mask[row, :n] = 1
        types[row, :n] = torch.tensor(x.types, dtype=torch.long)
    batch = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
    if lay.typed:
        batch["token_type_ids"] = types.to(device)
    return batch


def passage_mask(items: list[Any], width: int, device: str) -> torch.Tensor:
    """(batch, width) True on each item's passage tokens."""
    mask = torch.zeros((len(items), width), dtype=torch.bool)
    for row, x in enumerate(items):
        mask[row, x.passage_at : x.passage_at + x.n_passage] = True
    return mask.to(device)
