"""Thresholded average-link agglomerative clustering of cosine similarities.

Two clusters merge while the mean cosine similarity over all their pairs is above ``threshold``
(scikit-learn's ``AgglomerativeClustering(metric="cosine", linkage="average",
distance_threshold=1 - threshold)``, which merges while the mean distance is below it).

- Up to ``exact_limit`` vectors: exact, on the dense matrix of distances (scipy's average
  linkage, cut strictly below ``1 - threshold``).
- Beyond: a sparse graph of each vector's ``neighbours`` nearest (exact inner products, block
  by block) keeping the pairs above the threshold. Average link never merges two clusters with
  no pair above the threshold (a mean above it needs one), so each connected component of that
  graph is clustered on its own, exactly while it fits ``exact_limit``: the result is exact
  when no vector has ``neighbours`` or more neighbours above the threshold (``exact`` says so).
  A component larger than ``exact_limit`` is clustered on the graph, a pair missing from it
  counting as similarity 0 (as graph HAC does): an approximation, reported.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

EXACT_LIMIT = 10_000  # vectors clustered on a dense distance matrix (400 MB of doubles)
NEIGHBOURS = 64
BLOCK = 1024  # rows of the similarity matrix computed at once


@dataclass
class Clustered:
    """Cluster labels (0, 1, ... by first member), and how they were found."""

    labels: np.ndarray
    exact: bool  # the same clusters as the dense computation
    components: int = 1  # connected components of the sparse graph (1 when dense)
    largest: int = 0  # the largest component's size
    approximate: int = 0  # vectors in components clustered on the sparse graph


def _normalized(vectors: np.ndarray) -> np.ndarray:
    x = np.asarray(vectors, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"expected a 2-d array of vectors, got shape {x.shape}")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def _renumber(labels: np.ndarray) -> np.ndarray:
    """Labels numbered 0, 1, ... in the order their first member appears."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first, kind="stable"), kind="stable")
    return order[inverse.ravel()].astype(np.int64)


def _dense(x: np.ndarray, threshold: float) -> np.ndarray:
    """Exact average link of normalized vectors, merging while the mean similarity is above
    ``threshold``."""
    n = len(x)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    from scipy.cluster.hierarchy import fcluster, linkage

    sims = x.astype(np.float64) @ x.astype(np.float64).T
    iu = np.triu_indices(n, 1)
    distances = np.clip(1.0 - sims[iu], 0.0, 2.0)
    del sims
    tree = linkage(distances, method="average")
    # fcluster keeps merges at or below t; average link merges strictly below 1 - threshold
    cut = np.nextafter(1.0 - threshold, -np.inf)
    return _renumber(fcluster(tree, t=cut, criterion="distance"))


def neighbour_graph(
    x: np.ndarray,
    threshold: float,
    neighbours: int = NEIGHBOURS,
    block: int = BLOCK,
    tick: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """The pairs (i < j) among each vector's ``neighbours`` nearest with a similarity above
    ``threshold``, their similarities, and whether no vector had more such neighbours than
    were kept (then every pair above the threshold is there)."""
    n = len(x)
    rows, cols, sims = [], [], []
    complete = True
    for at in range(0, n, block):
        s = x[at : at + block] @ x.T
        width = len(s)
        s[np.arange(width), at + np.arange(width)] = -np.inf
        above = s > threshold
        many = above.sum(axis=1) > neighbours
        r, c = np.nonzero(above & ~many[:, None])
        rows.append(at + r)
        cols.append(c)
        sims.append(s[r, c])
        if many.any():  # more neighbours above the threshold than kept: the nearest ones
            complete = False
            crowded = np.flatnonzero(many)
            top = np.argpartition(-s[crowded], neighbours - 1, axis=1)[:, :neighbours]
            rows.append(at + np.repeat(crowded, neighbours))
            cols.append(top.ravel())
            sims.append(np.take_along_axis(s[crowded], top, axis=1).ravel())
        if tick is not None:
            tick(width)
    i = np.concatenate(rows).astype(np.int64)
    j = np.concatenate(cols).astype(np.int64)
    v = np.concatenate(sims).astype(np.float64)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    pairs, first = np.unique(lo * n + hi, return_index=True)
    return pairs // n, pairs % n, v[first], complete


def _graph_average_link(
    size: int, i: np.ndarray, j: np.ndarray, v: np.ndarray, threshold: float
) -> np.ndarray:
    """Average link on a sparse similarity graph (a missing pair counts 0): merge the pair of
    clusters of highest mean similarity while it is above ``threshold``."""
    sums: list[dict[int, float]] = [{} for _ in range(size)]
    for a, b, s in zip(i.tolist(), j.tolist(), v.tolist(), strict=True):
        sums[a][b] = s
        sums[b][a] = s
    members = [1] * size
    version = [0] * size
    parent = list(range(size))
    heap = [(-s, a, b, 0, 0) for a, b, s in zip(i.tolist(), j.tolist(), v.tolist(), strict=True)]
    heapq.heapify(heap)
    while heap:
        neg, a, b, va, vb = heapq.heappop(heap)
        if -neg <= threshold:
            break
        if parent[a] != a or parent[b] != b or version[a] != va or version[b] != vb:
            continue
        if len(sums[a]) < len(sums[b]):
            a, b = b, a
        parent[b] = a
        members[a] += members[b]
        version[a] += 1
        sums[a].pop(b, None)
        for c, s in sums[b].items():
            if c == a:
                continue
            sums[a][c] = sums[a].get(c, 0.0) + s
            sums[c].pop(b, None)
            sums[c][a] = sums[a][c]
        sums[b] = {}
        for c, s in sums[a].items():
            mean = s / (members[a] * members[c])
            if mean > threshold:
                x, y = (a, c) if a < c else (c, a)
                heapq.heappush(heap, (-mean, x, y, version[x], version[y]))
    roots = np.asarray(parent)
    while True:
        up = roots[roots]
        if np.array_equal(up, roots):
            break
        roots = up
    return _renumber(roots)


def average_link(
    vectors: np.ndarray,
    threshold: float,
    *,
    exact_limit: int = EXACT_LIMIT,
    neighbours: int = NEIGHBOURS,
    block: int = BLOCK,
    tick: Callable[[int], None] | None = None,
) -> Clustered:
    """Cluster ``vectors`` (rows; cosine similarity) by average link down to ``threshold``
    (a similarity in [-1, 1]); ``tick(n)`` after each block of the neighbour search."""
    if not -1.0 <= threshold <= 1.0:
        raise ValueError(f"threshold {threshold} is outside [-1, 1]")
    x = _normalized(vectors)
    n = len(x)
    if n == 0:
        return Clustered(np.zeros(0, dtype=np.int64), True, 0, 0)
    if n <= exact_limit:
        return Clustered(_dense(x, threshold), True, 1, n)
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    i, j, v, complete = neighbour_graph(x, threshold, neighbours, block, tick)
    graph = coo_matrix((np.ones(len(i)), (i, j)), shape=(n, n))
    count, component = connected_components(graph, directed=False)
    labels = np.empty(n, dtype=np.int64)
    order = np.argsort(component, kind="stable")
    bounds = np.flatnonzero(np.r_[True, np.diff(component[order]) != 0, True])
    sizes = np.diff(bounds)
    next_label = 0
    approximate = 0
    edge_component = component[i]
    for c in range(len(bounds) - 1):
        nodes = order[bounds[c] : bounds[c + 1]]
        if len(nodes) == 1:
            local = np.zeros(1, dtype=np.int64)
        elif len(nodes) <= exact_limit:
            local = _dense(x[nodes], threshold)
        else:
            approximate += len(nodes)
            mine = np.flatnonzero(edge_component == component[nodes[0]])
            index = np.full(n, -1, dtype=np.int64)
            index[nodes] = np.arange(len(nodes))
            local = _graph_average_link(
                len(nodes), index[i[mine]], index[j[mine]], v[mine], threshold
            )
        labels[nodes] = local + next_label
        next_label += int(local.max()) + 1
    return Clustered(
        _renumber(labels),
        complete and not approximate,
        int(count),
        int(sizes.max()),
        approximate,
    )
