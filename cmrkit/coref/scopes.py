"""Where clustering runs: the groups of mentions that may join (``--within``).

- ``corpus``: one group, every mention of the split;
- ``topic`` / ``subtopic``: the corpus's gold topics or subtopics;
- ``predicted``: topics predicted by clustering the split's documents: TF-IDF vectors of their
  text (scikit-learn; English stop words dropped, sublinear term frequency), joined by
  average-link agglomerative clustering of their cosine similarities down to
  ``topic_threshold``. Barhom et al. (2019) ran K-Means on TF-IDF vectors; a threshold needs no
  number of topics (unknown for a new corpus) and no random start, so the same documents give
  the same topics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cmrkit.coref.mentions import CorefMentions
from cmrkit.coref.options import TOPIC_THRESHOLD, WITHIN
from cmrkit.errors import CmrkitError


@dataclass
class Scope:
    """The groups of mention indexes, and (``predicted``) each document's predicted topic."""

    within: str
    groups: list[list[int]]
    topics: dict[str, int] | None = None

    def purity(self, mentions: CorefMentions) -> dict[str, float]:
        """How the predicted topics match the gold ones, over documents: purity (each
        predicted topic's largest gold topic), inverse purity, and the topic counts."""
        if self.topics is None:
            raise ValueError("purity is for predicted topics")
        gold = {m.doc_id: m.topic for m in mentions.mentions}
        return topic_purity(self.topics, gold)


def topic_purity(predicted: dict[str, int], gold: dict[str, str | None]) -> dict[str, float]:
    """Purity and inverse purity of a document clustering against gold topics."""
    docs = [d for d in predicted if gold.get(d) is not None]
    if not docs:
        return {}
    pairs = [(predicted[d], gold[d]) for d in docs]

    def share(first: int) -> float:
        best: dict[object, dict[object, int]] = {}
        for p in pairs:
            best.setdefault(p[first], {}).setdefault(p[1 - first], 0)
            best[p[first]][p[1 - first]] += 1
        return sum(max(c.values()) for c in best.values()) / len(pairs)

    return {
        "documents": float(len(docs)),
        "predicted_topics": float(len({p for p, _ in pairs})),
        "gold_topics": float(len({g for _, g in pairs})),
        "purity": share(0),
        "inverse_purity": share(1),
    }


def _by(keys: Sequence[object]) -> list[list[int]]:
    groups: dict[object, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    return list(groups.values())


def predict_topics(texts: dict[str, str], threshold: float = TOPIC_THRESHOLD) -> dict[str, int]:
    """Each document's predicted topic (numbered by first document)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    from cmrkit.coref.agglomerative import average_link

    names = list(texts)
    vectors = TfidfVectorizer(stop_words="english", sublinear_tf=True).fit_transform(
        [texts[n] for n in names]
    )
    labels = average_link(vectors.toarray(), threshold).labels
    return {n: int(label) for n, label in zip(names, labels, strict=True)}


def scope(mentions: CorefMentions, within: str, topic_threshold: float = TOPIC_THRESHOLD) -> Scope:
    """The groups of ``within`` over the split's mentions."""
    if within not in WITHIN:
        raise CmrkitError(f"--within {within!r} is not one of {', '.join(WITHIN)}")
    ms = mentions.mentions
    if within == "corpus":
        return Scope(within, [list(range(len(ms)))])
    if within in ("topic", "subtopic"):
        field = {"topic": "topic_id", "subtopic": "subtopic_id"}[within]
        mentions.require(within, field, f"--within {within}")
        return Scope(within, _by([getattr(m, within) for m in ms]))
    if not -1.0 <= topic_threshold <= 1.0:
        raise CmrkitError(f"--topic-threshold {topic_threshold} is outside [-1, 1]")
    docs = list(dict.fromkeys(m.doc_id for m in ms))
    if len(docs) < 2:
        raise CmrkitError(
            f"--within predicted clusters documents, and split {mentions.split!r} has "
            f"{len(docs)}; use --within corpus",
            path=mentions.path or mentions.collection,
        )
    texts = {
        d: " ".join(" ".join(words) for _, words in mentions.documents.get(d, [])) for d in docs
    }
    for m in ms:  # a document the documents file lacks: its mentions' sentences
        if not mentions.documents.get(m.doc_id):
            texts[m.doc_id] = f"{texts[m.doc_id]} {' '.join(m.words)}"
    topics = predict_topics(texts, topic_threshold)
    return Scope(within, _by([topics[m.doc_id] for m in ms]), topics)


def labels_within(scope: Scope, n: int) -> np.ndarray:
    """Each mention's group number (for methods that cluster groups as a whole)."""
    out = np.zeros(n, dtype=np.int64)
    for g, group in enumerate(scope.groups):
        out[group] = g
    return out
