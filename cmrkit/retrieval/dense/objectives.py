"""The training objectives of ``train dense``, their one owner: which positive each query learns
from, which negatives it is scored against, and the loss.

- ``coresearch`` with ``random`` positives (the default, CoreSearch's recipe): one positive
  drawn at random per query and epoch; cross-entropy of each query's scores over the batch's
  units (in-batch negatives plus each example's hard negatives), units relevant to the query
  masked out (:func:`in_batch_loss`).
- ``arborescence`` positives (arboEL, Agarwal et al. 2022, ``train_biencoder_mst.py``): once per
  epoch the training clusters are encoded with the current model; per cluster, scipy's
  minimum spanning tree over its mentions (and its entity, where the collection names one),
  pruned as arboEL's ``cluster_linking_partition`` prunes it, leaves each mention one edge
  towards the root (:func:`arborescence`); that edge is the mention's positive
  (:func:`arborescence_positives`). With the ``coresearch`` objective the loss is then
  arboEL's: a softmax over the query's positive and its own negatives only
  (:func:`candidate_loss`).
- ``knn`` negatives (arboEL): the k nearest non-coreferent mentions of the training clusters in
  the current space (:func:`nearest`), beside the BM25 hard negative.
- ``eer`` (Zhang et al., "Event-enhanced retrieval in real-time search", and its released
  ``loss.py``): InfoNCE over cosine similarities times 20 (temperature 0.05) against the
  batch's positives and its shared hard negatives, plus a triplet margin loss (margin 0.1) of
  each query against its own hard negatives (:func:`eer_loss`); with an event string per
  positive (``events.py``), the event-aware InfoNCE between the query and its positive's event
  (:func:`event_loss`).

The graph and selection functions are numpy and scipy, the losses torch, each imported inside
them: the command line reads the constants here without loading any of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

OBJECTIVES = ("coresearch", "eer")
POSITIVES = ("random", "arborescence")
NEGATIVES = ("bm25", "knn")
KNN_NEGATIVES = 4  # --knn-negatives: each is one more unit encoded per query and step
EER_SCALE = 20.0  # EER's InfoNCE scale (cons_scale 20): a temperature of 0.05
EER_MARGIN = 0.1  # EER's triplet margin over cosine similarities
ENTITY = -1  # a mention's parent (or positive) that is its cluster's entity
NONE = -2  # no parent: a mention alone in its component with no entity


# ----------------------------------------------------------------------------- arborescences


def arborescence(
    weights: np.ndarray, edges: np.ndarray, entity: np.ndarray | None = None
) -> np.ndarray:
    """Each node's parent in the minimum spanning arborescence of one cluster.

    ``weights`` (n x n, symmetric) are similarities between the cluster's nodes, defined where
    ``edges`` (n x n, symmetric booleans) is set; ``entity`` (n similarities, NaN where a node
    has no edge to it), when given, is the cluster's entity node, the root. As arboEL: scipy's
    ``minimum_spanning_tree`` over the distances (similarities reversed), then the pruning of
    ``cluster_linking_partition`` (edges dropped from the least similar up while the root stays
    reachable), which on a tree leaves each node its one edge towards the root: its parent.

    Without an entity (and in a component the entity does not reach), the root is the
    component's medoid, the node of the largest mean similarity over its edges (ties: the
    first), and the root's parent is its most similar neighbour in the tree, so that every
    node of a component of two or more has a parent. Returns the parents: a node index,
    :data:`ENTITY`, or :data:`NONE` for a node without any edge.
    """
    import numpy as np
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import (
        breadth_first_order,
        connected_components,
        minimum_spanning_tree,
    )

    n = len(weights)
    edges = np.asarray(edges, dtype=bool) & ~np.eye(n, dtype=bool)
    rows, cols = np.nonzero(np.triu(edges, 1))
    sims = [np.asarray(weights, dtype=np.float64)[rows, cols]]
    rows, cols = [rows], [cols]
    root = n if entity is not None else None
    if entity is not None:
        linked = np.flatnonzero(~np.isnan(np.asarray(entity, dtype=np.float64)))
        rows.append(np.full(len(linked), n))
        cols.append(linked)
        sims.append(np.asarray(entity, dtype=np.float64)[linked])
    r, c, s = np.concatenate(rows), np.concatenate(cols), np.concatenate(sims)
    size = n + (entity is not None)
    parent = np.full(n, NONE, dtype=np.int64)
    if len(s) == 0:
        return parent
    # distances that order as the similarities reversed, all above 0 (scipy drops zeros)
    distance = (s.max() - s) + 1.0
    tree = minimum_spanning_tree(coo_matrix((distance, (r, c)), shape=(size, size)).tocsr())
    tree = tree + tree.T  # undirected
    if root is not None:
        _, pred = breadth_first_order(tree, root, directed=False, return_predecessors=True)
        for v in range(n):
            if pred[v] >= 0:
                parent[v] = ENTITY if pred[v] == root else pred[v]
    dense = tree.toarray()
    sim = np.full((size, size), np.nan)
    sim[r, c] = s
    sim[c, r] = s
    _, label = connected_components(tree, directed=False)
    for component in sorted(set(label[:n].tolist())):
        members = np.flatnonzero(label[:n] == component)
        if len(members) < 2 or (parent[members] != NONE).any():
            continue  # alone, or reached from the entity already
        block = np.ix_(members, members)
        within = np.where(edges[block], np.asarray(weights, dtype=np.float64)[block], np.nan)
        counts = (~np.isnan(within)).sum(axis=1)
        means = np.where(counts > 0, np.nansum(within, axis=1) / np.maximum(counts, 1), -np.inf)
        medoid = int(members[int(np.argmax(means))])
        _, pred = breadth_first_order(tree, medoid, directed=False, return_predecessors=True)
        for v in members:
            if v != medoid:
                parent[v] = pred[v]
        neighbours = np.flatnonzero(dense[medoid, :n] > 0)
        parent[medoid] = int(neighbours[int(np.argmax(sim[medoid, neighbours]))])
    return parent


def arborescence_positives(
    scores: np.ndarray,
    own: Sequence[int],
    allowed: np.ndarray,
    entity: np.ndarray | None = None,
) -> list[int]:
    """Each query's positive in one cluster: its arborescence edge.

    The nodes are the cluster's units (each holds a mention of it). ``scores`` (queries x
    units) are the current model's scores of the cluster's training queries against them,
    ``own[i]`` the unit holding query i's mention, ``allowed[i, u]`` whether unit u may be
    query i's positive (relevant to it, not its own unit, not banned); ``entity[i]``: the score
    of query i against the cluster's entity text. The similarity of two units is the mean of
    the two directions' best query scores (a unit's mentions score the other unit; one
    direction where only one unit holds training queries), as the score is asymmetric and
    scipy's spanning tree undirected; a unit's similarity to the entity is its queries' best.

    The positive of query i is its unit's parent when that is allowed for it (a unit index, or
    :data:`ENTITY`); else (its unit has no allowed parent: a parent banned for this query, or
    no edge at all) its best-scored allowed unit."""
    import numpy as np

    scores = np.asarray(scores, dtype=np.float64)
    allowed = np.asarray(allowed, dtype=bool)
    nq, nu = scores.shape
    own = np.asarray(own, dtype=np.int64)
    best = np.full((nu, nu), -np.inf)  # best[u, v]: the best score of u's queries against v
    for i in range(nq):
        row = np.where(allowed[i], scores[i], -np.inf)
        best[own[i]] = np.maximum(best[own[i]], row)
    forward, backward = np.isfinite(best), np.isfinite(best.T)
    both = forward & backward
    weights = np.where(
        both, (best + best.T) / 2, np.where(forward, best, np.where(backward, best.T, 0.0))
    )
    edges = forward | backward
    entity_weights = None
    if entity is not None:
        entity_weights = np.full(nu, np.nan)
        for i in range(nq):
            u = own[i]
            e = float(entity[i])
            if np.isnan(entity_weights[u]) or e > entity_weights[u]:
                entity_weights[u] = e
    parent = arborescence(weights, edges, entity_weights)
    out = []
    for i in range(nq):
        p = int(parent[own[i]])
        if p == ENTITY or (p >= 0 and allowed[i, p]):
            out.append(p)
        else:
            out.append(int(np.argmax(np.where(allowed[i], scores[i], -np.inf))))
    return out


# ----------------------------------------------------------------------------- k-NN negatives


def nearest(
    scores: np.ndarray, excluded: Sequence[Sequence[int] | set[int]], k: int
) -> list[list[int]]:
    """Per row of ``scores`` (queries x candidates), the ``k`` best-scored candidates not in
    its ``excluded`` set, best first, ties by candidate index (exact and deterministic)."""
    import numpy as np

    scores = np.asarray(scores, dtype=np.float64)
    out = []
    for row, banned in zip(scores, excluded, strict=True):
        want = min(len(row), k + len(banned))
        if 0 < want < len(row):  # the best ``want`` and every score tied with the last of them
            bar = np.partition(row, len(row) - want)[len(row) - want]
            pick = np.flatnonzero(row >= bar)
        else:
            pick = np.arange(len(row))
        order = pick[np.lexsort((pick, -row[pick]))]
        chosen = [c for c in order.tolist() if c not in banned][:k]
        out.append(chosen)
    return out


# ----------------------------------------------------------------------------- losses


def in_batch_loss(scores: Any, target: Any, mask: Any) -> Any:
    """CoreSearch's loss: cross-entropy of each query's scores over the batch's columns, the
    ``mask``ed ones (relevant to the query but not its positive, or banned) left out."""
    import torch

    return torch.nn.functional.cross_entropy(scores.masked_fill(mask, float("-inf")), target)


def candidate_loss(scores: Any, candidates: Any, valid: Any) -> Any:
    """arboEL's loss: per query, a softmax over its own candidates (``candidates[i, 0]`` the
    positive's column, the others its negatives'; ``valid`` marks the real ones of a padded
    row), the negative log-probability of the positive, averaged over the queries."""
    import torch

    rows = torch.gather(scores, 1, candidates).masked_fill(~valid, float("-inf"))
    target = torch.zeros(len(rows), dtype=torch.long, device=rows.device)
    return torch.nn.functional.cross_entropy(rows, target)


def cosine(a: Any, b: Any) -> Any:
    """Cosine similarities of every row of ``a`` with every row of ``b``."""
    import torch

    return torch.nn.functional.normalize(a, dim=-1) @ torch.nn.functional.normalize(b, dim=-1).T


def eer_loss(
    queries: Any,
    columns: Any,
    target: Any,
    mask: Any,
    negatives: Any,
    valid: Any,
    margin: float = EER_MARGIN,
    scale: float = EER_SCALE,
) -> Any:
    """EER's retrieval loss: InfoNCE over cosine similarities times ``scale`` against every
    column of the batch (its positives and its shared hard negatives; ``mask`` as for
    :func:`in_batch_loss`), plus the triplet margin loss ``max(0, cos(q, n) - cos(q, p) +
    margin)`` of each query against its own hard negatives (``negatives[i]``: their columns,
    ``valid`` the real ones), averaged over those pairs."""
    import torch

    cos = cosine(queries, columns)
    infonce = in_batch_loss(cos * scale, target, mask)
    positive = cos.gather(1, target[:, None])
    negative = cos.gather(1, negatives)
    hinge = torch.clamp(negative - positive + margin, min=0.0)
    triplet = hinge[valid].mean() if bool(valid.any()) else cos.new_zeros(())
    return infonce + triplet


def event_loss(queries: Any, events: Any, mask: Any, scale: float = EER_SCALE) -> Any:
    """EER's event-aware term: InfoNCE between each query and its positive's event string
    (row i of ``events``), the other rows' events its negatives but those ``mask``ed (events
    of units relevant to the query)."""
    import torch

    target = torch.arange(len(queries), device=queries.device)
    return in_batch_loss(cosine(queries, events) * scale, target, mask)
