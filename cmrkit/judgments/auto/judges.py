"""The judges behind one interface: ``reader:DIR``, ``llm:URL`` and ``llm:local``.

A judge has a ``kind`` (the labels' worker id is ``auto:<kind>``), an ``identity`` (what its
answers depend on, recorded in the sidecar; its sha256 keys the cache with ``prompt_sha256``),
and :meth:`Judge.answer`: answer the pairs the cache lacks, putting each answer in the cache as
it comes. :meth:`Judge.label` turns a cached answer into (label, probability), None when the
answer gave no label (unparsed). The reader's answers are scores, labelled through a
calibration; an LLM's are labels (and probabilities from its logprobs).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cmrkit.errors import CmrkitError
from cmrkit.judgments.auto.cache import Entry, Key, LabelCache
from cmrkit.judgments.auto.pairs import Pair, PairTexts

KINDS = ("reader", "llm", "llm-local")
Progress = Callable[[int], None]  # pairs answered now


@dataclass(frozen=True)
class Request:
    """What a judge is asked: the ``missing`` pairs of ``pairs`` (those the cache lacks), their
    texts, the cache each answer goes to as it comes, and the progress to tick."""

    texts: PairTexts
    pairs: Sequence[Pair]
    missing: set[Pair]
    cache: LabelCache
    progress: Progress
    keys: Mapping[Pair, Key] | None = None  # the cache keys (None: the texts' own)

    def todo(self) -> list[Pair]:
        """The missing pairs in the order of ``pairs``."""
        return [p for p in self.pairs if p in self.missing]

    def key(self, pair: Pair) -> Key:
        """The cache key a pair's answer is kept under."""
        return self.keys[pair] if self.keys is not None else self.texts.key(pair)


def pair_keys(judge: Any, texts: PairTexts, pairs: Sequence[Pair]) -> dict[Pair, Key]:
    """The cache keys of ``pairs`` for ``judge``: its own (``judge.keys``, the reader's, which
    name the group a pair is read in) or the pairs' texts' (:meth:`PairTexts.key`)."""
    own = getattr(judge, "keys", None)
    return own(texts, pairs) if own is not None else {p: texts.key(p) for p in pairs}


class Judge(Protocol):
    kind: str
    identity: dict[str, Any]
    prompt_sha256: str

    def answer(self, request: Request) -> None:
        """Answer the request's missing pairs and put each answer in its cache as it comes."""

    def label(self, entry: Entry) -> tuple[int, float | None] | None:
        """The (Likert label, probability) of a cached answer; None: no label (unparsed)."""

    def close(self) -> None:
        """Free what the judge holds (a model, connections)."""


def identity_sha256(identity: dict[str, Any]) -> str:
    """The cache's key for a judge: the sha256 of its identity as canonical JSON."""
    text = json.dumps(identity, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class JudgeSpec:
    """``--judge`` read: the kind and what follows the colon (a folder, a URL, ``local``)."""

    kind: str
    target: str

    @classmethod
    def parse(cls, text: str) -> JudgeSpec:
        head, sep, rest = text.partition(":")
        if sep and head == "reader" and rest:
            return cls("reader", rest)
        if sep and head == "llm" and rest == "local":
            return cls("llm-local", rest)
        if sep and head == "llm" and rest.startswith(("http://", "https://")):
            return cls("llm", rest)
        raise CmrkitError(
            f"--judge {text!r} is not a judge; give reader:DIR (a folder made by `cmrkit train "
            "reader`), llm:URL (an OpenAI-compatible endpoint, e.g. "
            "llm:http://127.0.0.1:8080/v1, with --model) or llm:local"
        )
