"""What a clustering of a collection's mentions is made of, and the defaults the command line
shares (light: importing it loads nothing)."""

from __future__ import annotations

from dataclasses import dataclass

from cmrkit.errors import CmrkitError
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

METHODS = ("lemma", "head-lemma", "lh", "embedding")  # a collection's methods (coref/cluster.py)
WITHIN = ("corpus", "topic", "subtopic", "predicted")  # coref/scopes.py
LEMMAS = ("mention", "sentence")
SINGLETONS = ("keep", "drop")
# TF-IDF cosine of documents above which they share a predicted topic: the best ECB+ dev CoNLL
# F1 of the lemma baseline among 0.06-0.25 (docs/coreference.md)
TOPIC_THRESHOLD = 0.15
JACCARD = 0.05  # lh: the sentences' lemma-set Jaccard above which a lemma match links
EMBEDDING_BATCH = 32  # embedding: mentions encoded at once
# the contrastive mention encoder (coref/encoder.py): tokens read per mention, the fewest
# allowed, each MLP's output dimensions
MAX_LENGTH = 128
MIN_LENGTH = 32
HEAD_DIM = 256
DEFAULT_THRESHOLD = 0.5  # the cosine a model stores when no dev split tunes it


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
    model: str | None = None  # embedding: a folder written by `cmrkit train coref`
    threshold: float | None = None  # embedding: None: the model's own
    device: str = "auto"
    batch_size: int = EMBEDDING_BATCH

    def check(self) -> None:
        for value, allowed, flag in (
            (self.method, METHODS, "--method"),
            (self.within, WITHIN, "--within"),
            (self.lemmas, LEMMAS, "--lemmas"),
            (self.gold_singletons, SINGLETONS, "--gold-singletons"),
        ):
            if value not in allowed:
                raise CmrkitError(f"{flag} {value!r} is not one of {', '.join(allowed)}")
        if self.method == "embedding" and not self.model:
            raise CmrkitError(
                "--method embedding needs --model: a folder written by `cmrkit train coref`"
            )
        if self.method != "embedding" and self.model is not None:
            raise CmrkitError(
                f"--model is for --method embedding; --method {self.method} takes none"
            )
        if self.batch_size < 1:
            raise CmrkitError(f"--batch-size must be at least 1, got {self.batch_size}")
        if not 0.0 <= self.jaccard < 1.0:
            raise CmrkitError(f"--jaccard {self.jaccard} is outside [0, 1)")
        if not -1.0 <= self.topic_threshold <= 1.0:
            raise CmrkitError(
                f"--topic-threshold {self.topic_threshold} is outside [-1, 1] (a cosine)"
            )


@dataclass(frozen=True)
class CorefTrainOptions:
    """The training recipe; the defaults fit ECB+'s train events in about an hour on a loaded
    2-core CPU (docs/coreference.md says what they change from the paper's)."""

    train_split: str = "train"
    dev_split: str | None = None  # None: "dev" when the collection has it; "none": no tuning
    epochs: int = 2
    batch_size: int = 24  # mentions (sequences) per batch
    learning_rate: float = 2e-5
    head_learning_rate: float = 1e-3
    weight_decay: float = 0.01
    warmup: float = 0.1
    margin: float = 0.4
    positives: int = 1  # least similar coreferent mentions per mention
    negatives: int = 5  # most similar non-coreferent mentions per mention, per side of a subtopic
    max_length: int = MAX_LENGTH
    head_dim: int = HEAD_DIM
    seed: int = 13
    max_steps: int | None = None
    threshold: float | None = None  # stored as given; None: tuned on dev, else the default

    def check(self) -> None:
        from cmrkit.retrieval.training import check_steps

        for flag, value, low in (
            ("--epochs", self.epochs, 1),
            ("--batch-size", self.batch_size, 2),
            ("--positives", self.positives, 1),
            ("--negatives", self.negatives, 0),
            ("--max-length", self.max_length, MIN_LENGTH),
            ("--head-dim", self.head_dim, 1),
        ):
            if value < low:
                raise CmrkitError(f"{flag} must be at least {low}, got {value}")
        check_steps(self.max_steps, self.warmup)
        if not self.learning_rate > 0 or not self.head_learning_rate > 0:
            raise CmrkitError("--lr and --head-lr must be above 0")
        if not 0 < self.margin <= 2:
            raise CmrkitError(f"--margin must lie in (0, 2] (a cosine distance), got {self.margin}")
        if self.threshold is not None and not -1 <= self.threshold <= 1:
            raise CmrkitError(f"--threshold {self.threshold} is outside [-1, 1] (a cosine)")


TRAIN_DEFAULTS = CorefTrainOptions()  # what `cmrkit train coref` declares its options from
