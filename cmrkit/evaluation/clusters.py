"""Clusters from a retrieval run: score a retrieval system as a coreference system.

Each query (an annotated mention) is linked to the mentions of the units it retrieves at or
above ``threshold`` and within its ``top`` k results (trec_eval's ranking order). A unit holding
several annotated mentions links the query to each of them. The links become clusters by
transitive closure, or by average-link agglomerative clustering: two clusters merge while the
mean score over all their mention pairs is at least ``threshold``, a pair the run does not link
counting as ``missing_score`` (default: the lowest score among the links).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cmrkit.errors import CmrkitError
from cmrkit.trec import ranked

METHODS = ("closure", "average")
MAX_AVERAGE_COMPONENT = 20000  # average-link holds a dense matrix of a component's pairs


@dataclass
class ClusterOptions:
    """How run results become links and links become clusters."""

    threshold: float | None = None
    top: int | None = None
    method: str = "closure"
    missing_score: float | None = None

    def check(self) -> None:
        if self.method not in METHODS:
            raise CmrkitError(f"--method {self.method!r} is not one of {', '.join(METHODS)}")
        if self.threshold is None and self.top is None:
            raise CmrkitError("give --threshold, --top or both: which results make a link")
        if self.top is not None and self.top < 1:
            raise CmrkitError("--top must be 1 or more")
        if self.method == "average" and self.threshold is None:
            raise CmrkitError("--method average merges clusters down to --threshold: give it")
        # scores are finite numbers: NaN compares false to everything, infinity breaks averages
        given = (("--threshold", self.threshold), ("--missing-score", self.missing_score))
        for flag, value in given:
            if value is not None and not math.isfinite(value):
                raise CmrkitError(f"{flag} must be a finite number, got {value}")


@dataclass
class Links:
    """Mention-pair links with their scores (both directions folded: the higher score)."""

    items: list[str]  # every mention clustered, in output order
    pairs: dict[tuple[int, int], float]  # (i, j) with i < j, indexes into items
    shared_units: int = 0  # linked units that hold several annotated mentions


def run_links(
    run: Mapping[str, Mapping[str, float]],
    query_mention: Mapping[str, str],
    unit_mentions: Mapping[str, Sequence[str]],
    items: Sequence[str],
    opts: ClusterOptions,
) -> Links:
    """The links a run makes between mentions; ``items`` are the mentions to cluster (linked
    mentions outside them are added after them, in the order met)."""
    order = list(items)
    index = {m: i for i, m in enumerate(order)}

    def at(mention: str) -> int:
        i = index.get(mention)
        if i is None:
            i = index[mention] = len(order)
            order.append(mention)
        return i

    pairs: dict[tuple[int, int], float] = {}
    shared: set[str] = set()
    for qid in sorted(run):
        q = at(query_mention[qid])
        results = ranked(run[qid])
        if opts.top is not None:
            results = results[: opts.top]
        for docno, score in results:
            if opts.threshold is not None and score < opts.threshold:
                break
            mentions = unit_mentions.get(docno, ())
            if len(mentions) > 1:
                shared.add(docno)
            for mention in mentions:
                m = at(mention)
                if m == q:
                    continue
                pair = (q, m) if q < m else (m, q)
                if pair not in pairs or pairs[pair] < score:
                    pairs[pair] = score
    return Links(order, pairs, len(shared))


def _components(n: int, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """Connected component of each item (labelled by its smallest member)."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in pairs:
        a, b = find(i), find(j)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return np.asarray([find(i) for i in range(n)], dtype=np.int64)


def _average_link(
    members: np.ndarray, pairs: list[tuple[int, int, float]], threshold: float, missing: float
) -> np.ndarray:
    """Flat clusters of one component by average linkage cut at ``threshold`` (labels)."""
    from scipy.cluster.hierarchy import fcluster, linkage

    size = len(members)
    if size > MAX_AVERAGE_COMPONENT:
        raise CmrkitError(
            f"{size} mentions are linked together: too many for average-link clustering; "
            "use --method closure, or fewer links (--top, a higher --threshold)"
        )
    local = np.full(int(members.max()) + 1, -1, dtype=np.int64)
    local[members] = np.arange(size)
    sim = np.full((size, size), missing, dtype=np.float64)
    if pairs:
        i, j, s = (np.asarray(x) for x in zip(*pairs, strict=True))
        sim[local[i], local[j]] = s
        sim[local[j], local[i]] = s
    top = max(float(sim.max()), threshold)
    distance = top - sim[np.triu_indices(size, 1)]
    tree = linkage(distance, method="average")
    return fcluster(tree, t=top - threshold, criterion="distance")


def cluster_links(links: Links, opts: ClusterOptions) -> list[list[str]]:
    """Clusters of the linked mentions (every item at least alone), ordered by first member."""
    n = len(links.items)
    label = _components(n, list(links.pairs))
    if opts.method == "average" and links.pairs:
        assert opts.threshold is not None
        missing = (
            opts.missing_score if opts.missing_score is not None else min(links.pairs.values())
        )
        by_component: dict[int, list[tuple[int, int, float]]] = {}
        for (i, j), score in links.pairs.items():
            by_component.setdefault(int(label[i]), []).append((i, j, score))
        order = np.argsort(label, kind="stable")
        bounds = np.flatnonzero(np.r_[True, label[order][1:] != label[order][:-1], True])
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            members = order[a:b]
            if len(members) < 2:
                continue
            root = int(label[members[0]])
            flat = _average_link(members, by_component[root], opts.threshold, missing)
            for f in np.unique(flat).tolist():
                group = members[flat == f]
                label[group] = group.min()
    clusters: dict[int, list[str]] = {}
    for i, root in enumerate(label.tolist()):
        clusters.setdefault(root, []).append(links.items[i])
    return list(clusters.values())
