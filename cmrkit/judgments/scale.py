"""The five-point scale every judgment uses: the offline page, the assessment server, its API
and its page, people's answers (`judgments aggregate`), the simulated assessors and the
automatic judges (`judgments auto`). A label 4-5 is relevant, 1-3 not."""

from __future__ import annotations

# label and what it says
LIKERT: tuple[tuple[int, str], ...] = (
    (1, "very unlikely"),
    (2, "unlikely"),
    (3, "not sure"),
    (4, "likely"),
    (5, "very likely"),
)
LABELS = tuple(v for v, _ in LIKERT)
LABELS_TEXT = f"{LABELS[0]}..{LABELS[-1]} ({LIKERT[0][1]} .. {LIKERT[-1][1]})"

MAX_ASSESSORS = 1000  # the most assessors one pair may have: people or simulated


def binarize(label: int) -> int:
    """Likert 4-5 -> 1 (relevant), 1-3 -> 0."""
    return 1 if label >= 4 else 0


def majority(relevant: int, not_relevant: int) -> int:
    """1 or 0 for a strict majority of binary votes, -1 (unknown) for a tie."""
    if relevant == not_relevant:
        return -1
    return 1 if relevant > not_relevant else 0
