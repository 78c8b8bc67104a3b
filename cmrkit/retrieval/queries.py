"""Query formulations: how a topic (a mention in its context) becomes a bag-of-words query.

- ``mention``: the mention text;
- ``mention+entities``: the mention followed by the named entities (spaCy) of its context, each
  distinct entity once, in text order, leaving out entities that overlap the mention (CoreSearch's
  best BM25 formulation);
- ``sentence``: the sentence of the context that holds the mention (spaCy sentence boundaries);
- ``context``: the whole context (the query's own unit text);
- ``chain``: the words of the mention's within-document coreference chain (topics that carry
  ``chain``, as TAC collections do; else the mention text);
- ``features``: the mention, its acronym, its character trigrams and its chain words (the CMR
  DiscK features; pair with ``fields`` weights on ``contents``, ``acronyms``, ``trigrams``,
  ``chain``).
"""

from __future__ import annotations

from collections.abc import Sequence

import cmrkit.retrieval.entities as ner
from cmrkit.collection.layout import Topic
from cmrkit.errors import CmrkitError
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

FORMULATIONS = ("mention", "mention+entities", "sentence", "context", "chain", "features")


def check_formulation(name: str) -> str:
    if name not in FORMULATIONS:
        raise CmrkitError(
            f"unknown query formulation {name!r}; choose one of {', '.join(FORMULATIONS)}"
        )
    return name


def formulate(
    topics: Sequence[Topic], formulation: str, spacy_model: str = DEFAULT_SPACY_MODEL
) -> dict[str, str]:
    """{qid: query text} for the topics, in topic order."""
    check_formulation(formulation)
    if formulation == "mention":
        return {t.qid: t.mention for t in topics}
    if formulation == "context":
        return {t.qid: t.context for t in topics}
    if formulation == "chain":
        return {t.qid: t.chain or t.mention for t in topics}
    if formulation == "features":
        from cmrkit.tac.chains import acronym, char_trigrams

        return {
            t.qid: " ".join(
                p for p in (t.mention, acronym(t.mention), *char_trigrams(t.mention), t.chain) if p
            )
            for t in topics
        }
    contexts = sorted({t.context for t in topics})
    if formulation == "sentence":
        analysed = dict(zip(contexts, ner.analyse(contexts, spacy_model), strict=True))
    else:
        # entities alone (the NER-only pipeline is several times faster than one with
        # sentences), from the entity cache for contexts seen before
        found = ner.iter_entities(contexts, spacy_model)
        analysed = {c: (ents, []) for c, ents in zip(contexts, found, strict=True)}
    queries: dict[str, str] = {}
    for t in topics:
        ents, sents = analysed[t.context]
        start, end = t.span
        if formulation == "sentence":
            s, e = next(((s, e) for s, e in sents if s <= start < e), (0, len(t.context)))
            queries[t.qid] = t.context[s : max(e, end)]
            continue
        seen: set[str] = set()
        words = [t.mention]
        for text, s, e in ents:
            key = text.lower()
            if (s < end and start < e) or key in seen:
                continue
            seen.add(key)
            words.append(text)
        queries[t.qid] = " ".join(words)
    return queries
