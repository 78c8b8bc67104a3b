"""Simulated assessors: the noise model of ``cmrkit judgments simulate``, shared with the pooling
strategies that need judgments as they go and with ``pool plan``.

Each assessor knows complete qrels (rel > 0 relevant) and flips the truth with probability
``noise``; a relevant answer is Likert 4 or 5, a non-relevant one 1, 2 or 3. Assessor ``k`` draws
from its own generator seeded with ``"{seed}:{worker}"``, over the pairs in the order given.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.trec import Qrels

# The five-point scale every judgment uses (the offline page, the assessment server, its API and
# its page, `judgments aggregate`): label and what it says.
LIKERT: tuple[tuple[int, str], ...] = (
    (1, "very unlikely"),
    (2, "unlikely"),
    (3, "not sure"),
    (4, "likely"),
    (5, "very likely"),
)
LABELS = tuple(v for v, _ in LIKERT)
LABELS_TEXT = f"{LABELS[0]}..{LABELS[-1]} ({LIKERT[0][1]} .. {LIKERT[-1][1]})"


def binarize(label: int) -> int:
    """Likert 4-5 -> 1 (relevant), 1-3 -> 0."""
    return 1 if label >= 4 else 0


MAX_ASSESSORS = 1000


def check_assessors(assessors: int, noise: float) -> None:
    """Refuse assessors outside 1..MAX_ASSESSORS or a flip probability outside 0..1."""
    if not 1 <= assessors <= MAX_ASSESSORS:
        raise CmrkitError(f"--assessors must lie in 1..{MAX_ASSESSORS}, not {assessors}")
    if not 0.0 <= noise <= 1.0:
        raise CmrkitError(f"--noise must lie in 0..1, not {noise}")


def majority(relevant: int, not_relevant: int) -> int:
    """1 or 0 for a strict majority of binary votes, -1 (unknown) for a tie."""
    if relevant == not_relevant:
        return -1
    return 1 if relevant > not_relevant else 0


@dataclass(frozen=True)
class SimulatedAssessors:
    """Assessors who know ``truth`` and err with probability ``noise`` (seeded); ``source``
    says where the truth came from (recorded in pool headers)."""

    truth: Qrels
    assessors: int = 3
    noise: float = 0.1
    seed: int = 0
    source: Mapping[str, Any] = field(default_factory=dict)

    def answers(
        self, pairs: Sequence[tuple[str, str]], worker_prefix: str = "sim"
    ) -> list[tuple[str, str, str, int]]:
        """Every assessor's Likert answer to every pair: rows (query_id, doc_id, worker_id,
        label), assessor by assessor, pairs in the order given."""
        check_assessors(self.assessors, self.noise)
        width = max(2, len(str(self.assessors)))
        rows = []
        for a in range(1, self.assessors + 1):
            worker = f"{worker_prefix}{a:0{width}d}"
            rng = random.Random(f"{self.seed}:{worker}")
            for qid, docno in pairs:
                relevant = self.truth.get(qid, {}).get(docno, 0) > 0
                if rng.random() < self.noise:
                    relevant = not relevant
                label = rng.choice((4, 5)) if relevant else rng.choice((1, 2, 3))
                rows.append((qid, docno, worker, label))
        return rows

    def labels(self, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], int]:
        """The majority label (1, 0, or -1 for a tie) of the assessors for each pair."""
        keys = list(dict.fromkeys(pairs))
        votes = dict.fromkeys(keys, 0)
        for qid, docno, _, label in self.answers(keys):
            votes[(qid, docno)] += binarize(label)
        return {k: majority(v, self.assessors - v) for k, v in votes.items()}

    def to_json(self) -> dict[str, Any]:
        return {
            "truth": dict(self.source),
            "assessors": self.assessors,
            "noise": self.noise,
            "seed": self.seed,
        }


# --- agreement between assessors (judgments aggregate, the assessment server) ----------------


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
