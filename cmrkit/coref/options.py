"""What a clustering of a collection's mentions is made of, and the defaults the command line
shares (light: importing it loads nothing)."""

from __future__ import annotations

from dataclasses import dataclass

from cmrkit.errors import CmrkitError
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

METHODS = ("lemma", "head-lemma", "lh")  # the methods that need no run (coref/cluster.py)
WITHIN = ("corpus", "topic", "subtopic", "predicted")  # coref/scopes.py
LEMMAS = ("mention", "sentence")
SINGLETONS = ("keep", "drop")
# TF-IDF cosine of documents above which they share a predicted topic: the best ECB+ dev CoNLL
# F1 of the lemma baseline among 0.06-0.25 (docs/coreference.md)
TOPIC_THRESHOLD = 0.15
JACCARD = 0.05  # lh: the sentences' lemma-set Jaccard above which a lemma match links


@dataclass
class ClusterOptions:
    """A method, the scope it runs within, and the method's settings."""

    method: str
    within: str = "topic"
    # lemma: each mention's text lemmatized alone (reproduces Hsu & Horwood), or each token's
    # lemma read from the parse of its sentence
    lemmas: str = "mention"
    topic_threshold: float = TOPIC_THRESHOLD
    jaccard: float = JACCARD
    gold_singletons: str = "keep"  # drop: mentions of gold singleton chains left out first
    train_split: str = "train"  # lh: the split whose coreferent head lemmas link
    spacy_model: str = DEFAULT_SPACY_MODEL

    def check(self) -> None:
        for value, allowed, flag in (
            (self.method, METHODS, "--method"),
            (self.within, WITHIN, "--within"),
            (self.lemmas, LEMMAS, "--lemmas"),
            (self.gold_singletons, SINGLETONS, "--gold-singletons"),
        ):
            if value not in allowed:
                raise CmrkitError(f"{flag} {value!r} is not one of {', '.join(allowed)}")
        if not 0.0 <= self.jaccard < 1.0:
            raise CmrkitError(f"--jaccard {self.jaccard} is outside [0, 1)")
        if not -1.0 <= self.topic_threshold <= 1.0:
            raise CmrkitError(
                f"--topic-threshold {self.topic_threshold} is outside [-1, 1] (a cosine)"
            )
