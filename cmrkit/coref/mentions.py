"""A collection's annotated mentions as cross-document coreference reads them: each with its
chain, document, topic, subtopic, sentence tokens, mention tokens, head and singleton flag.

Collections built from ECB+ or uCDCR carry them (``mentions.jsonl.gz``, ``documents.jsonl.gz``:
``collection/layout.py``); for any other collection they are made from the corpus units and the
split's gold clusters (no topics, no heads; a unit's tokens are its whitespace words).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmrkit.collection import layout
from cmrkit.errors import CmrkitError


@dataclass
class CorefMention:
    """One mention: ``words`` its sentence's tokens, ``tokens`` the mention's indexes in them."""

    mention_id: str
    cluster: str
    doc_id: str
    split: str
    text: str
    words: list[str]
    tokens: list[int]
    topic: str | None = None
    subtopic: str | None = None
    sentence: int | None = None
    head: str | None = None
    head_lemma: str | None = None
    singleton: bool = False
    source: dict[str, Any] = field(default_factory=dict)

    @property
    def mention_words(self) -> list[str]:
        return [self.words[i] for i in self.tokens]


@dataclass
class CorefMentions:
    """The mentions of one split (file order) and their documents' known sentences."""

    collection: Path
    split: str
    mentions: list[CorefMention]
    documents: dict[str, list[tuple[int, list[str]]]]
    path: Path | None  # the mentions file, or None when made from the corpus units

    def where(self, m: CorefMention) -> str:
        """How a message names a mention: its source file and record when known."""
        src = m.source
        place = f"{src['file']} " if src.get("file") else ""
        if "record" in src:
            return f"{place}record {src['record']}"
        if "m_id" in src:
            return f"{place}m_id {src['m_id']}"
        return f"mention {m.mention_id}"

    def require(self, attribute: str, field_name: str, needed_by: str) -> None:
        """Refuse when a mention lacks ``attribute`` (None), naming the source field and what
        needs it."""
        for m in self.mentions:
            if getattr(m, attribute) is None:
                raise CmrkitError(
                    f"mention {m.mention_id!r} ({self.where(m)}) has no {attribute}: "
                    f"{needed_by} needs the source's '{field_name}' field; rebuild the "
                    "collection from a file that has it, or choose another scope",
                    path=self.path or self.collection,
                )


def read_mentions(collection: str | Path, split: str) -> CorefMentions:
    """The split's mentions (every one, singletons too), in the order the build wrote them."""
    folder = layout.collection_dir(collection)
    if not layout.mentions_path(folder).is_file():
        return _from_units(folder, split)
    documents: dict[str, list[tuple[int, list[str]]]] = {}
    if layout.documents_path(folder).is_file():
        for _, rec in layout.iter_documents(folder):
            documents[rec["doc_id"]] = [(int(n), list(w)) for n, w in rec.get("sentences") or []]
    path = layout.mentions_path(folder)
    found: list[CorefMention] = []
    splits: set[str] = set()
    for n, rec in layout.iter_mentions(folder):
        splits.add(rec["split"])
        if rec["split"] != split:
            continue
        sentence = rec.get("sentence")
        words = dict(documents.get(rec["doc_id"], [])).get(sentence)
        if words is None:
            raise CmrkitError(
                f"mention {rec['mention_id']!r}: its sentence {sentence} is not in "
                f"{layout.DOCUMENTS}; rebuild the collection",
                path=path,
                where=f"line {n}",
            )
        found.append(
            CorefMention(
                mention_id=rec["mention_id"],
                cluster=rec["cluster"],
                doc_id=rec["doc_id"],
                split=rec["split"],
                text=str(rec.get("text", "")),
                words=words,
                tokens=[int(t) for t in rec.get("tokens") or []],
                topic=rec.get("topic"),
                subtopic=rec.get("subtopic"),
                sentence=sentence,
                head=rec.get("head"),
                head_lemma=rec.get("head_lemma"),
                singleton=bool(rec.get("singleton")),
                source=rec.get("source") or {},
            )
        )
    if not found:
        raise CmrkitError(
            f"no mentions in split {split!r} (splits present: {', '.join(sorted(splits))}); "
            "choose one with --split",
            path=path,
        )
    return CorefMentions(folder, split, found, documents, path)


def _from_units(folder: Path, split: str) -> CorefMentions:
    """Mentions from the corpus units (their whitespace words) and the split's gold clusters."""
    from cmrkit.collection.clusters import read_clustering
    from cmrkit.evaluation.units import gold_clusters_path, read_annotated_units

    key_path = gold_clusters_path(folder, split)
    units = read_annotated_units(folder)
    key = [rec for rec in _key_records(read_clustering(key_path), key_path)]
    sizes = Counter(c for _, c in key)
    docs = {}
    for _, line in _jsonl(key_path):
        docs[str(line.get("mention_id"))] = str(line.get("doc_id"))
    found: list[CorefMention] = []
    documents: dict[str, list[tuple[int, list[str]]]] = {}
    spans = {m.mention_id: m for ms in units.mentions.values() for m in ms}
    for mention_id, cluster in key:
        unit = units.unit_of.get(mention_id)
        if unit is None:
            raise CmrkitError(
                f"mention {mention_id!r} of the gold clusters is in no unit of the corpus; "
                "rebuild the collection",
                path=key_path,
            )
        text = units.contents[unit]
        words, starts = _words(text)
        m = spans[mention_id]
        tokens = [i for i, s in enumerate(starts) if m.start <= s < m.end] or [
            max((i for i, s in enumerate(starts) if s <= m.start), default=0)
        ]
        doc = docs.get(mention_id) or unit
        known = documents.setdefault(doc, [])
        number = next((n for n, w in known if w == words), None)
        if number is None:
            number = len(known)
            known.append((number, words))
        found.append(
            CorefMention(
                mention_id=mention_id,
                cluster=cluster,
                doc_id=doc,
                split=split,
                text=text[m.start : m.end],
                words=words,
                tokens=tokens,
                sentence=number,
                singleton=sizes[cluster] == 1,
                source={"file": str(key_path), "unit": unit},
            )
        )
    return CorefMentions(folder, split, found, documents, None)


def _key_records(key, path: Path) -> list[tuple[str, str]]:
    from cmrkit.collection.clusters import ID

    if key.identity != ID:
        raise CmrkitError("the gold clusters must identify mentions by mention_id", path=path)
    return [
        (str(ident), doc.names[chain])
        for doc in key.documents.values()
        for ident, chain in zip(doc.ids, doc.chains, strict=True)
    ]


def _jsonl(path: Path):
    from cmrkit.fileio import iter_jsonl

    return iter_jsonl(path, what="one mention record per line")


def _words(text: str) -> tuple[list[str], list[int]]:
    words, starts = [], []
    at = 0
    for word in text.split():
        at = text.index(word, at)
        words.append(word)
        starts.append(at)
        at += len(word)
    return words, starts
