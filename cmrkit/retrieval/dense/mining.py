"""What ``train dense`` draws at each epoch's start when its examples depend on the current model
(``--positives arborescence``, ``--negatives knn``): the training clusters as graphs, and each
query's positive and negatives from the vectors of the current encoders.

The training clusters are those of the train split's queries that have a positive; a cluster's
units are its queries' own units and their positives (each holds a mention of it), and, with
entities, its entity text (the cluster's title in topics.jsonl: WEC-Eng's ``coref_link``) is one
more node, keyed :func:`entity_key`. The candidates of the k-NN negatives are every cluster's
units (and the other clusters' entities), the mentions arboEL draws its negatives from.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cmrkit.retrieval.dense import objectives

BLOCK = 256  # queries scored against the candidates per matrix product


def entity_key(cluster: str) -> str:
    """The key of a cluster's entity node beside the docnos (a tab never is in a docno)."""
    return f"entity\t{cluster}"


def entity_titles(records: Sequence[dict[str, Any]], qids: set[str]) -> dict[str, str]:
    """Each cluster's entity text: the most frequent ``cluster_title`` of its queries ``qids``
    (ties: the first in order), for the clusters whose queries name one."""
    seen: dict[str, Counter] = {}
    for rec in records:
        title = rec.get("cluster_title")
        if rec.get("qid") in qids and isinstance(title, str) and title.strip():
            seen.setdefault(str(rec.get("cluster")), Counter())[title.strip()] += 1
    return {c: counts.most_common(1)[0][0] for c, counts in seen.items()}


@dataclass
class Clusters:
    """The training clusters: per cluster its queries (topic indexes), units (sorted) and
    entity key (None without one); ``pool`` every cluster's units, sorted; ``entities`` the
    entity keys, in cluster order."""

    names: list[str]
    members: list[list[int]]
    units: list[list[str]]
    entity: list[str | None]
    pool: list[str]

    @property
    def entities(self) -> list[str]:
        return [e for e in self.entity if e is not None]


def training_clusters(
    clusters: Sequence[str | None], positives: Sequence[Sequence[str]], own: Sequence[str],
    titles: dict[str, str] | None,
) -> Clusters:  # fmt: skip
    """The clusters of the queries that have a positive (``clusters[i]``: query i's cluster;
    a query without one is a cluster of its own)."""
    by: dict[str, list[int]] = {}
    for i, pos in enumerate(positives):
        if pos:
            by.setdefault(clusters[i] if clusters[i] is not None else f"\0{i}", []).append(i)
    names = sorted(by)
    units = [
        sorted({own[i] for i in by[c]} | {d for i in by[c] for d in positives[i]}) for c in names
    ]
    entity = [entity_key(c) if titles and c in titles else None for c in names]
    pool = sorted({d for us in units for d in us})
    return Clusters(names, [by[c] for c in names], units, entity, pool)


def cluster_sizes(
    clusters: Sequence[str | None], relevant: Sequence[frozenset[str]], own: Sequence[str]
) -> dict[str, int]:
    """The mentions of each cluster the queries know: its queries' own units and the units
    relevant to them."""
    found: dict[str, set[str]] = {}
    for i, c in enumerate(clusters):
        found.setdefault(c if c is not None else f"\0{i}", set()).update({own[i]} | relevant[i])
    return {c: len(units) for c, units in found.items()}


@dataclass
class Vectors:
    """The current encoders' vectors: ``queries`` (one row per query, all topics), ``units``
    (rows in ``Clusters.pool`` order) and ``entities`` (rows in ``Clusters.entities`` order)."""

    queries: np.ndarray
    units: np.ndarray
    entities: np.ndarray


def _arborescence_positives(data: Any, clusters: Clusters, vectors: Vectors) -> list[str | None]:
    """Each query's arborescence edge in the current space (None: a query without positives)."""
    chosen: list[str | None] = [None for _ in data.positives]
    where = {d: k for k, d in enumerate(clusters.pool)}
    entity_row = {e: k for k, e in enumerate(clusters.entities)}
    for members, units, entity in zip(clusters.members, clusters.units, clusters.entity,
                                      strict=True):  # fmt: skip
        cols = [where[u] for u in units]
        scores = vectors.queries[members] @ vectors.units[cols].T
        index = {u: k for k, u in enumerate(units)}
        own = [index[data.topics[i].unit] for i in members]
        allowed = np.zeros(scores.shape, dtype=bool)
        for row, i in enumerate(members):
            for d in data.positives[i]:
                if d not in data.banned[i]:
                    allowed[row, index[d]] = True
        ent = None
        if entity is not None:
            ent = vectors.queries[members] @ vectors.entities[entity_row[entity]]
        picks = objectives.arborescence_positives(scores, own, allowed, ent)
        for i, p in zip(members, picks, strict=True):
            chosen[i] = entity if p == objectives.ENTITY else units[p]
    return chosen


def _bm25_negative(data: Any, i: int, pool: list[str], rng: random.Random) -> str:
    """One hard negative from the query's BM25 candidates (a random unit when it has none),
    drawn as the CoreSearch recipe draws it."""
    if data.negatives[i]:
        return rng.choice(data.negatives[i])
    while True:  # BM25 found no non-relevant unit: a random one
        neg = rng.choice(pool)
        if neg not in data.relevant[i] and neg not in data.banned[i]:
            return neg


def _knn(data: Any, clusters: Clusters, vectors: Vectors, k: int,
         first: list[str | None]) -> list[list[str]]:  # fmt: skip
    """Each query's ``k`` nearest non-coreferent units of the training clusters (half of them
    other clusters' entities when there are entities, as arboEL), leaving out its BM25
    negative ``first[i]``."""
    entities = clusters.entities
    k_entities = k // 2 if entities else 0
    rows = [i for i, f in enumerate(first) if f is not None]
    out: list[list[str]] = [[] for _ in first]
    where = {d: c for c, d in enumerate(clusters.pool)}
    entity_col = {e: c for c, e in enumerate(entities)}
    own_entity = {i: e for members, e in zip(clusters.members, clusters.entity, strict=True)
                  for i in members}  # fmt: skip
    for b in range(0, len(rows), BLOCK):  # a block of queries' scores at a time
        block = rows[b : b + BLOCK]
        q = vectors.queries[block]
        excluded = []
        for i in block:
            banned = data.relevant[i] | data.banned[i] | {data.topics[i].unit, first[i]}
            excluded.append({where[d] for d in banned if d in where})
        near = objectives.nearest(q @ vectors.units.T, excluded, k - k_entities)
        for i, cols in zip(block, near, strict=True):
            out[i] = [clusters.pool[c] for c in cols]
        if k_entities:
            own = [{entity_col[own_entity[i]]} if own_entity.get(i) else set() for i in block]
            near = objectives.nearest(q @ vectors.entities.T, own, k_entities)
            for i, cols in zip(block, near, strict=True):
                out[i] = [entities[c] for c in cols] + out[i]
    return out


def draw_epoch(data: Any, clusters: Clusters, vectors: Vectors | None, *, arborescence: bool,
               knn: int | None, pairs: int | None,
               rng: random.Random) -> list[tuple[str | int, ...]]:  # fmt: skip
    """One epoch's examples ``(query index, positive, BM25 negative, *k-NN negatives)``,
    shuffled: each query's arborescence edge (``arborescence``) or positives drawn at random,
    a BM25 negative each, both drawn from ``rng`` as the CoreSearch recipe draws them, and with
    ``knn`` its k nearest non-coreferent units (the BM25 negative left out)."""
    pool = list(data.texts)
    edges = None
    if arborescence:
        assert vectors is not None
        edges = _arborescence_positives(data, clusters, vectors)
    pairs_out: list[tuple[int, str, str]] = []
    for i, pos in enumerate(data.positives):
        if not pos:
            continue
        if edges is not None:
            chosen = [edges[i]]
        else:  # drawn as the CoreSearch recipe draws them
            chosen = pos if pairs is None else rng.sample(pos, min(len(pos), pairs))
        for p in chosen:
            pairs_out.append((i, p, _bm25_negative(data, i, pool, rng)))
    extra: dict[tuple[int, str], list[str]] = {}
    if knn:
        assert vectors is not None
        by_query: dict[int, str] = {}
        for i, _, n in pairs_out:
            by_query.setdefault(i, n)
        first = [by_query.get(i) for i in range(len(data.positives))]
        near = _knn(data, clusters, vectors, knn, first)
        extra = {(i, n): [d for d in near[i] if d != n] for i, _, n in pairs_out}
    out: list[tuple[str | int, ...]] = [(i, p, n, *extra.get((i, n), [])) for i, p, n in pairs_out]
    rng.shuffle(out)
    return out
