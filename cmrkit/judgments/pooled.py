"""What the judgments read of a pool: a :class:`cmrkit.pooling.Pool` handed to them.

``pooling/`` stands above ``judgments/``: a pool asks the judgments for the scale and the
simulated assessors, so the judgments never import ``pooling`` (they would close a cycle). They
take the pool their caller read (`judgments aggregate`, `judgments simulate`, the hybrid
judging) and read it through these protocols, which ``Pool`` and ``PoolPair`` satisfy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class PooledPair(Protocol):
    """One pair of a pool: its ids, whether it is to be judged, and the judge's label on it
    (hybrid judging writes ``judge_label``, ``judge_probability``, ``sampled``, ``labelled_by``)."""

    qid: str
    docno: str
    sampled: bool
    judge_label: int | None
    judge_probability: float | None
    labelled_by: str | None


class Pooled(Protocol):
    """A pool: its header, its pairs in order, its queries and the pairs by (qid, docno)."""

    header: dict[str, Any]

    @property
    def pairs(self) -> Sequence[PooledPair]: ...

    @property
    def queries(self) -> list[str]: ...

    def pair_index(self) -> Mapping[tuple[str, str], PooledPair]: ...
