"""Agreement between assessors of the same pairs (`judgments aggregate`, the assessment
server's progress, `judgments check`): the rows of the Fleiss tables, Fleiss' kappa, Cohen's
kappa and Cohen's weighted kappa on the Likert scale of :mod:`cmrkit.judgments.scale`."""

from __future__ import annotations

from collections.abc import Sequence

from cmrkit.judgments.scale import LABELS, binarize


def agreement_rows(labels: Sequence[int]) -> tuple[list[int], list[int]]:
    """One pair's rows of the two Fleiss tables: the counts of its labels binarized (not
    relevant, relevant) and on the Likert scale (one count per label of :data:`LIKERT`)."""
    relevant = sum(binarize(v) for v in labels)
    return [len(labels) - relevant, relevant], [list(labels).count(v) for v in LABELS]


def fleiss_kappa(table: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa of items x categories counts (items with fewer than 2 ratings ignored;
    item sizes may differ). None when undefined (no item, or a single category used)."""
    rows = [r for r in table if sum(r) >= 2]
    if not rows:
        return None
    k = len(rows[0])
    total = sum(sum(r) for r in rows)
    p_j = [sum(r[j] for r in rows) / total for j in range(k)]
    p_e = sum(p * p for p in p_j)
    p_bar = sum((sum(c * c for c in r) - sum(r)) / (sum(r) * (sum(r) - 1)) for r in rows) / len(
        rows
    )
    if p_e >= 1.0:
        return None
    return (p_bar - p_e) / (1.0 - p_e)


def cohen_kappa(a: Sequence[int], b: Sequence[int]) -> float | None:
    """Cohen's kappa of two raters' labels of the same items (``a[i]`` and ``b[i]`` rate item
    ``i``). None when undefined (no item, or chance agreement is certain)."""
    n = len(a)
    if n == 0 or n != len(b):
        return None
    cats = sorted(set(a) | set(b))
    p_o = sum(1 for x, y in zip(a, b, strict=True) if x == y) / n
    p_e = sum((a.count(c) / n) * (b.count(c) / n) for c in cats)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1.0 - p_e)


def weighted_kappa(
    a: Sequence[int], b: Sequence[int], categories: Sequence[int] = LABELS, power: int = 2
) -> float | None:
    """Cohen's weighted kappa of two raters' ordinal labels of the same items, with
    disagreement weights ``|i - j| ** power`` over the positions of ``categories``: 2 is the
    quadratic kappa (Fleiss & Cohen 1973: a 1 against a 5 costs 16 times a 1 against a 2), 1
    the linear. None when undefined (no item, or every label in one category on both sides)."""
    n = len(a)
    if n == 0 or n != len(b):
        return None
    pos = {c: i for i, c in enumerate(categories)}
    k = len(categories)
    observed = [[0] * k for _ in range(k)]
    for x, y in zip(a, b, strict=True):
        observed[pos[x]][pos[y]] += 1
    rows = [sum(r) for r in observed]
    cols = [sum(observed[i][j] for i in range(k)) for j in range(k)]
    disagree = expected = 0.0
    for i in range(k):
        for j in range(k):
            w = abs(i - j) ** power
            disagree += w * observed[i][j]
            expected += w * rows[i] * cols[j] / n
    if expected == 0.0:
        return None
    return 1.0 - disagree / expected
