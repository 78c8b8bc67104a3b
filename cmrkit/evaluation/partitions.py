"""Agreement of two partitions (clusterings) of the same items: adjusted Rand index and
normalised mutual information (arithmetic mean of the entropies), with scikit-learn's
definitions and limit cases (``adjusted_rand_score``, ``normalized_mutual_info_score``), for many
groups of items at once.
"""

from __future__ import annotations

import numpy as np


def _clusters(group: np.ndarray, labels: np.ndarray):
    """The (group, label) clusters: each item's cluster, each cluster's group and size."""
    _, inverse = np.unique(labels, return_inverse=True)
    width = int(inverse.max()) + 1 if len(inverse) else 1
    keys, item, size = np.unique(group * width + inverse, return_inverse=True, return_counts=True)
    return item, keys // width, size


def _entropy(where: np.ndarray, sizes: np.ndarray, n: np.ndarray, groups: int) -> np.ndarray:
    total = n[where].astype(np.float64)
    p = sizes / total
    return -np.bincount(where, weights=p * (np.log(sizes) - np.log(total)), minlength=groups)


def agreement_by_group(
    group: np.ndarray, a: np.ndarray, b: np.ndarray, groups: int
) -> tuple[list[float], list[float]]:
    """ARI and NMI of labelings ``a`` and ``b`` within each group of items (``group[i]`` in
    ``range(groups)``): a label names a cluster within its group only."""
    group = np.asarray(group, dtype=np.int64)
    n = np.bincount(group, minlength=groups)
    row, row_group, rows = _clusters(group, np.asarray(a))
    col, col_group, cols = _clusters(group, np.asarray(b))
    width = max(len(cols), 1)
    keys, cells = np.unique(row * width + col, return_counts=True)
    r, c = keys // width, keys % width
    cell_group = row_group[r]

    def squares(where: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        return np.bincount(where, weights=sizes.astype(np.float64) ** 2, minlength=groups)

    sq_cells, sq_rows, sq_cols = (
        squares(cell_group, cells),
        squares(row_group, rows),
        squares(col_group, cols),
    )
    # mutual information, term by term as scikit-learn sums it
    total = n[cell_group].astype(np.float64)
    p = cells / total
    outer = rows[r].astype(np.float64) * cols[c].astype(np.float64)
    terms = p * (np.log(cells) - np.log(total)) + p * (-np.log(outer) + 2 * np.log(total))
    terms = np.where(np.abs(terms) < np.finfo(np.float64).eps, 0.0, terms)
    mi = np.bincount(cell_group, weights=terms, minlength=groups)
    h_rows = _entropy(row_group, rows, n, groups)
    h_cols = _entropy(col_group, cols, n, groups)
    n_rows = np.bincount(row_group, minlength=groups)
    n_cols = np.bincount(col_group, minlength=groups)

    ari: list[float] = []
    nmi: list[float] = []
    for g in range(groups):
        items = int(n[g])
        # ordered pairs together in both, in b only, in a only, in neither
        tp = int(sq_cells[g]) - items
        fp = int(sq_cols[g]) - items - tp
        fn = int(sq_rows[g]) - items - tp
        tn = items * items - items - tp - fp - fn
        if fn == 0 and fp == 0:
            ari.append(1.0)
        else:
            ari.append(2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn)))
        if n_rows[g] == n_cols[g] <= 1:
            nmi.append(1.0)
        elif n_rows[g] == 1 or n_cols[g] == 1:
            nmi.append(0.0)
        else:
            m = max(float(mi[g]), 0.0)
            nmi.append(0.0 if m == 0.0 else m / ((h_rows[g] + h_cols[g]) / 2.0))
    return ari, nmi


def adjusted_rand_index(a, b) -> float:
    """Hubert and Arabie's adjusted Rand index of two labelings of the same items."""
    return agreement_by_group(np.zeros(len(a), dtype=np.int64), a, b, 1)[0][0]


def normalized_mutual_information(a, b) -> float:
    """Mutual information over the arithmetic mean of the two labelings' entropies."""
    return agreement_by_group(np.zeros(len(a), dtype=np.int64), a, b, 1)[1][0]
