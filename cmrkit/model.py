"""The few records everything shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Mention:
    """One annotated mention in its context (the passage that holds it).

    ``start``/``end`` are character offsets into ``context`` (end exclusive). ``cluster`` is the
    coreference cluster id as a string (WEC-Eng ints become strings). ``context_offset`` is the
    character offset of ``context`` inside its source document (0 when the context is the
    document or when unknown); sentence unit ids add it so they match the source's offsets.
    """

    mention_id: str
    cluster: str
    doc_id: str
    context: str
    start: int
    end: int
    text: str
    cluster_title: str | None = None
    doc_title: str | None = None
    type: str | None = None
    split: str | None = None
    context_offset: int = 0
    source: dict[str, Any] = field(default_factory=dict)
    cdcr: Cdcr | None = None


@dataclass
class Cdcr:
    """Where a mention lies in a cross-document coreference corpus (ECB+, uCDCR), beyond its
    span: what topic scopes, the lemma baselines and mention encoders read.

    ``sentences`` is the document's sentences that the source gives, as (number, tokens) in
    document order (ECB+: all of them; uCDCR: those holding a mention), the same list for every
    mention of the document; the mention's sentence is the one numbered ``sentence`` and its
    tokens are ``tokens`` (indexes into that sentence's tokens, in order; ECB+ has mentions on
    non-contiguous tokens). ``singleton``: the mention's chain has no other mention among the
    mentions read.
    """

    topic: str | None
    subtopic: str | None
    sentence: int
    tokens: list[int]
    sentences: list[tuple[int, list[str]]]
    head: str | None = None
    head_lemma: str | None = None
    singleton: bool | None = None


@dataclass
class Passage:
    """A distractor passage: a unit of the corpus that holds no query mention.

    ``clusters`` lists the coreference clusters annotated in it, when the source says
    (WEC-Eng-format distractor files): a passage of a query cluster is never a distractor.
    """

    text: str
    doc_id: str | None = None
    title: str | None = None
    source_id: str | None = None
    clusters: tuple[str, ...] = ()
