"""A split's mentions clustered by a method within a scope: what `cmrkit cluster COLLECTION`
runs. A method is a function of the mentions, the scope and the options giving one cluster
label per mention (``METHODS``); a method that embeds mentions gives its vectors to
``agglomerative.average_link`` group by group (``cluster_vectors``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cmrkit.coref import lemma
from cmrkit.coref.mentions import CorefMentions, read_mentions
from cmrkit.coref.options import ClusterOptions
from cmrkit.coref.scopes import Scope, scope
from cmrkit.errors import CmrkitError

Progress = Callable[[str, int | None], Callable[[int], None]]


@dataclass
class Clustering:
    """The clusters of a split (lists of mention ids, ordered by first mention), how they were
    made and what to tell."""

    mentions: CorefMentions
    clusters: list[list[str]]
    scope: Scope
    seconds: float
    notes: list[str] = field(default_factory=list)
    record: dict[str, Any] = field(default_factory=dict)  # what the sidecar adds (embedding)


@dataclass
class _Run:
    mentions: CorefMentions
    scope: Scope
    opts: ClusterOptions
    progress: Progress
    notes: list[str]
    nlp: object = None
    model: Any = None  # embedding: the resolved model (coref/encoder.CorefModelRef)
    record: dict[str, Any] = field(default_factory=dict)

    def spacy(self):
        if self.nlp is None:
            done = self.progress(f"loading spaCy ({self.opts.spacy_model})", 1)
            self.nlp = lemma.load_spacy(self.opts.spacy_model)
            done(1)
        return self.nlp

    def parsed(self, mentions: CorefMentions, alone: bool = False) -> list[lemma.Parsed]:
        sentences = len({tuple(m.words) for m in mentions.mentions})
        tick = self.progress(f"parsing {mentions.split} sentences", sentences)
        return lemma.parse_mentions(mentions.mentions, self.spacy(), alone=alone, tick=tick)


def _lemma(run: _Run) -> np.ndarray:
    parsed = run.parsed(run.mentions, alone=run.opts.lemmas == "mention")
    return lemma.join_equal(lemma.lemma_keys(parsed, run.opts.lemmas), run.scope.groups)


def _heads(run: _Run, mentions: CorefMentions) -> tuple[list[str], list[lemma.Parsed] | None]:
    need = any(m.head_lemma is None for m in mentions.mentions)
    parsed = run.parsed(mentions) if need else None
    if parsed is not None:
        missing = sum(1 for m in mentions.mentions if m.head_lemma is None)
        run.notes.append(
            f"{missing:,} {mentions.split} mention(s) without the corpus's head lemma: spaCy's"
        )
    return lemma.head_lemma_keys(mentions.mentions, parsed), parsed


def _head_lemma(run: _Run) -> np.ndarray:
    heads, _ = _heads(run, run.mentions)
    return lemma.join_equal(heads, run.scope.groups)


def _lh(run: _Run) -> np.ndarray:
    pairs: set[tuple[str, str]] = set()
    if run.opts.train_split != run.mentions.split:
        try:
            train = read_mentions(run.mentions.collection, run.opts.train_split)
        except CmrkitError:
            train = None
            run.notes.append(f"no {run.opts.train_split} split: no coreferent lemma pairs")
        if train is not None:
            heads, _ = _heads(run, train)
            pairs = lemma.train_lemma_pairs(heads, [m.cluster for m in train.mentions])
    heads, parsed = _heads(run, run.mentions)
    if parsed is None:
        parsed = run.parsed(run.mentions)
    labels, links = lemma.lh_labels(
        run.mentions.mentions,
        heads,
        [p.sentence for p in parsed],
        run.scope.groups,
        pairs,
        run.opts.jaccard,
    )
    run.notes.append(f"lh: {links:,} links, {len(pairs) // 2:,} coreferent lemma pairs of train")
    return labels


def _embedding(run: _Run) -> np.ndarray:
    """The mentions encoded by a model of `cmrkit train coref`, clustered by average link
    within each group at the threshold (the model's unless given)."""
    from cmrkit.coref.encoder import check_threshold, encode, load_model, mention_inputs
    from cmrkit.retrieval.neural import quiet_hub, resolve_device

    ref, ms = run.model, run.mentions
    threshold = check_threshold(ref, run.opts.threshold)
    quiet_hub()
    device = resolve_device(run.opts.device)
    done = run.progress("loading the coreference model", 1)
    net, tokenizer = load_model(ref, device)
    done(1)
    items = mention_inputs(tokenizer, ms.mentions, ms.documents, ref.markers, ref.max_length)
    tick = run.progress(f"encoding {ms.split} mentions", len(items))
    vectors = encode(
        net, tokenizer, items, batch_size=run.opts.batch_size, device=device, tick=tick
    )
    how = "given" if run.opts.threshold is not None else ref.metadata["threshold"].get("how")
    run.notes.append(f"embedding: cosine threshold {threshold:g} ({how})")
    run.record.update(model={**ref.identity(), "threshold": threshold, "threshold_how": how})
    return cluster_vectors(vectors, run.scope.groups, threshold)


METHODS: dict[str, Callable[[_Run], np.ndarray]] = {  # options.METHODS
    "lemma": _lemma,
    "head-lemma": _head_lemma,
    "lh": _lh,
    "embedding": _embedding,
}


def cluster_vectors(vectors: np.ndarray, groups: list[list[int]], threshold: float) -> np.ndarray:
    """Average-link clusters of mention vectors within each group (for embedding methods)."""
    from cmrkit.coref.agglomerative import average_link

    labels = np.zeros(len(vectors), dtype=np.int64)
    base = 0
    for group in groups:
        local = average_link(vectors[group], threshold).labels
        labels[group] = local + base
        base += int(local.max()) + 1 if len(local) else 0
    return labels


def _drop_singletons(mentions: CorefMentions) -> CorefMentions:
    kept = [m for m in mentions.mentions if not m.singleton]
    m = mentions
    return CorefMentions(m.collection, m.split, kept, m.documents, m.path)


@dataclass
class Prepared:
    """A split's mentions read and grouped by the scope: what a method then clusters."""

    mentions: CorefMentions
    scope: Scope
    opts: ClusterOptions
    notes: list[str]
    seconds: float
    model: Any = None  # embedding: the resolved model


def prepare(collection: str | Path, split: str, opts: ClusterOptions) -> Prepared:
    """Read the split's mentions (gold singletons left out when asked) and group them by
    ``opts.within``; every refusal of the inputs happens here, before any long work."""
    opts.check()
    model = None
    if opts.method == "embedding":
        from cmrkit.coref.encoder import check_threshold, resolve_coref_model

        assert opts.model is not None
        model = resolve_coref_model(opts.model)
        check_threshold(model, opts.threshold)
    mentions = read_mentions(collection, split)
    notes: list[str] = []
    if opts.gold_singletons == "drop":
        before = len(mentions.mentions)
        mentions = _drop_singletons(mentions)
        dropped = before - len(mentions.mentions)
        notes.append(f"gold singletons dropped before clustering: {dropped:,}")
        if not mentions.mentions:
            raise CmrkitError(f"every mention of split {split!r} is a gold singleton")
    started = time.perf_counter()
    where = scope(mentions, opts.within, opts.topic_threshold)
    return Prepared(mentions, where, opts, notes, time.perf_counter() - started, model)


def cluster_split(
    collection: str | Path | Prepared,
    split: str | None = None,
    opts: ClusterOptions | None = None,
    progress: Progress | None = None,
) -> Clustering:
    """Cluster the split's mentions by ``opts.method`` within ``opts.within`` (or those of a
    :func:`prepare` result)."""
    if isinstance(collection, Prepared):
        ready = collection
    else:
        assert split is not None and opts is not None
        ready = prepare(collection, split, opts)

    def step(description: str, total: int | None) -> Callable[[int], None]:
        return progress(description, total) if progress else (lambda n: None)

    started = time.perf_counter()
    run = _Run(ready.mentions, ready.scope, ready.opts, step, ready.notes, model=ready.model)
    labels = METHODS[ready.opts.method](run)
    seconds = ready.seconds + time.perf_counter() - started
    clusters: dict[int, list[str]] = {}
    for m, label in zip(ready.mentions.mentions, labels.tolist(), strict=True):
        clusters.setdefault(label, []).append(m.mention_id)
    return Clustering(
        ready.mentions, list(clusters.values()), ready.scope, seconds, ready.notes, run.record
    )
