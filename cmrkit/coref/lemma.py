"""The lemma baselines of cross-document coreference, on spaCy's lemmas (loaded lazily).

- ``lemma`` (Hsu & Horwood 2022): every token of the mention lemmatized; mentions whose lemma
  sequences are equal join. ``lemmas="sentence"`` takes each token's lemma from its sentence
  parsed as the corpus tokenized it; ``"mention"`` parses the mention's text alone.
- ``head-lemma`` (Barhom et al. 2019, uCDCR): mentions with the same head lemma join: the
  corpus's (``mention_head_lemma``) where it has one, else spaCy's (the mention token whose
  syntactic head lies outside the mention).
- ``lh`` (Ahmed et al. 2023): two mentions link when the head lemma of one is in the other's
  text, or the pair of their head lemmas was coreferent in the train split, and the Jaccard of
  their sentences' lemma sets is above ``jaccard`` (0.05); clusters are the connected
  components of the links.

Every comparison is case-insensitive. Clustering runs within each group of a scope
(``scopes.py``): mentions of different groups never join.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from cmrkit.coref.mentions import CorefMention
from cmrkit.coref.options import JACCARD, LEMMAS
from cmrkit.errors import CmrkitError
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL


@dataclass
class Parsed:
    """spaCy's reading of one mention: its tokens' lemmas (from the sentence and from the
    mention's text alone), its head and head lemma, its sentence's lemma set."""

    in_sentence: tuple[str, ...]
    alone: tuple[str, ...]
    head: str
    head_lemma: str
    sentence: frozenset[str] = field(default_factory=frozenset)


def load_spacy(model: str = DEFAULT_SPACY_MODEL):
    import spacy

    try:
        return spacy.load(model, exclude=["ner"])
    except OSError:
        raise CmrkitError(
            f"spaCy model {model!r} is not installed; install it (pip install "
            f"{DEFAULT_SPACY_MODEL.replace('_', '-')} gives {DEFAULT_SPACY_MODEL}) or pass "
            "--spacy-model NAME"
        ) from None


def parse_mentions(
    mentions: Sequence[CorefMention],
    nlp,
    *,
    alone: bool = True,
    tick: Callable[[int], None] | None = None,
) -> list[Parsed]:
    """spaCy's lemmas and heads for the mentions: each distinct sentence parsed once, as the
    corpus tokenized it (``tick(n)`` as sentences are parsed)."""
    from spacy.tokens import Doc

    sentences: dict[tuple[str, ...], int] = {}
    for m in mentions:
        sentences.setdefault(tuple(m.words), len(sentences))
    words = list(sentences)
    docs = []
    for doc in nlp.pipe((Doc(nlp.vocab, words=list(w)) for w in words), batch_size=256):
        docs.append(doc)
        if tick is not None:
            tick(1)
    texts = {" ".join(m.mention_words) for m in mentions} if alone else set()
    by_text = {}
    for text, doc in zip(sorted(texts), nlp.pipe(sorted(texts), batch_size=512), strict=True):
        by_text[text] = tuple(t.lemma_.lower() for t in doc)
    parsed = []
    sentence_sets: dict[int, frozenset[str]] = {}
    for m in mentions:
        n = sentences[tuple(m.words)]
        doc = docs[n]
        if n not in sentence_sets:
            sentence_sets[n] = frozenset(
                t.lemma_.lower() for t in doc if not (t.is_punct or t.is_space or t.is_stop)
            )
        inside = set(m.tokens)
        head = next(
            (doc[i] for i in m.tokens if doc[i].head.i not in inside or doc[i].head.i == i),
            doc[m.tokens[0]],
        )
        parsed.append(
            Parsed(
                in_sentence=tuple(doc[i].lemma_.lower() for i in m.tokens),
                alone=by_text.get(" ".join(m.mention_words), ()),
                head=head.text,
                head_lemma=head.lemma_.lower(),
                sentence=sentence_sets[n],
            )
        )
    return parsed


def join_equal(keys: Sequence[object], groups: Sequence[Sequence[int]]) -> np.ndarray:
    """Cluster labels: within each group, items with equal keys share a cluster."""
    labels = np.full(len(keys), -1, dtype=np.int64)
    next_label = 0
    for group in groups:
        seen: dict[object, int] = {}
        for i in group:
            label = seen.get(keys[i])
            if label is None:
                label = seen[keys[i]] = next_label
                next_label += 1
            labels[i] = label
    return labels


def lemma_keys(parsed: Sequence[Parsed], lemmas: str) -> list[tuple[str, ...]]:
    """Each mention's lemma sequence (``lemmas``: sentence or mention)."""
    if lemmas not in LEMMAS:
        raise CmrkitError(f"--lemmas {lemmas!r} is not one of {', '.join(LEMMAS)}")
    return [p.in_sentence if lemmas == "sentence" else p.alone for p in parsed]


def head_lemma_keys(mentions: Sequence[CorefMention], parsed: Sequence[Parsed] | None) -> list:
    """Each mention's head lemma: the corpus's, else spaCy's (``parsed``, needed then)."""
    keys = []
    for n, m in enumerate(mentions):
        if m.head_lemma is not None:
            keys.append(m.head_lemma.lower())
        else:
            assert parsed is not None
            keys.append(parsed[n].head_lemma)
    return keys


def train_lemma_pairs(heads: Sequence[str], clusters: Sequence[str]) -> set[tuple[str, str]]:
    """The head-lemma pairs of coreferent mentions (a train split's), both orders."""
    by_cluster: dict[str, set[str]] = {}
    for lemma, cluster in zip(heads, clusters, strict=True):
        by_cluster.setdefault(cluster, set()).add(lemma)
    pairs: set[tuple[str, str]] = set()
    for lemmas in by_cluster.values():
        pairs.update((a, b) for a in lemmas for b in lemmas if a != b)
    return pairs


def lh_labels(
    mentions: Sequence[CorefMention],
    heads: Sequence[str],
    sentences: Sequence[frozenset[str]],
    groups: Sequence[Sequence[int]],
    train_pairs: set[tuple[str, str]],
    jaccard: float = JACCARD,
) -> tuple[np.ndarray, int]:
    """Ahmed et al.'s lemma heuristic within each group: the connected components of its
    links; also the number of links."""
    texts = [m.text.lower() for m in mentions]
    parent = list(range(len(mentions)))

    def root(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    links = 0
    for group in groups:
        for x, a in enumerate(group):
            for b in group[x + 1 :]:
                la, lb = heads[a], heads[b]
                if not (la in texts[b] or lb in texts[a] or (la, lb) in train_pairs):
                    continue
                sa, sb = sentences[a], sentences[b]
                union = len(sa | sb)
                if union and len(sa & sb) / union > jaccard:
                    links += 1
                    ra, rb = root(a), root(b)
                    if ra != rb:
                        parent[max(ra, rb)] = min(ra, rb)
    roots = [root(a) for a in range(len(mentions))]
    return join_equal(roots, [range(len(mentions))]), links
