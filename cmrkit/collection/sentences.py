"""Sentence segmentation with spaCy (loaded lazily: importing this module is cheap)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cmrkit.errors import CmrkitError
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

METHODS = ("parser", "rule")


def load_segmenter(model: str = DEFAULT_SPACY_MODEL, method: str = "parser"):
    """A spaCy pipeline that sets sentence boundaries: the model's parser, or the rule-based
    sentencizer (fast, punctuation only)."""
    if method not in METHODS:
        raise CmrkitError(f"unknown sentence method {method!r}; use parser or rule")
    import spacy

    if method == "rule":
        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
        return nlp
    try:
        nlp = spacy.load(model, exclude=["ner", "lemmatizer", "attribute_ruler", "tagger"])
    except OSError:
        raise CmrkitError(
            f"spaCy model {model!r} is not installed; install it (pip install "
            f"{DEFAULT_SPACY_MODEL.replace('_', '-')} gives {DEFAULT_SPACY_MODEL}) or pass "
            "--spacy-model NAME, "
            "or use --sentences rule"
        ) from None
    return nlp


def sentence_spans(
    nlp, texts: Iterable[str], batch_size: int = 64
) -> Iterator[list[tuple[int, int]]]:
    """For each text, its sentences as (start, end) character offsets, end exclusive,
    leading/trailing whitespace trimmed; a text with no sentence gives one span over itself."""
    for text, doc in zip(texts, nlp.pipe(texts, batch_size=batch_size), strict=True):
        spans = []
        for sent in doc.sents:
            s, e = sent.start_char, sent.end_char
            while s < e and text[s].isspace():
                s += 1
            while e > s and text[e - 1].isspace():
                e -= 1
            if e > s:
                spans.append((s, e))
        yield spans or [(0, len(text))]
