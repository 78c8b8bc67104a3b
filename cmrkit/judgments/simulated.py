"""Simulated assessors: the noise model of ``cmrkit judgments simulate``, shared with the pooling
strategies that need judgments as they go (``pool create --simulate``) and with ``pool plan``.

Each assessor knows complete qrels (rel > 0 relevant) and flips the truth with probability
``noise``; a relevant answer is Likert 4 or 5, a non-relevant one 1, 2 or 3. Assessor ``k`` draws
from its own generator seeded with ``"{seed}:{worker}"``, over the pairs in the order given.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cmrkit.errors import CmrkitError
from cmrkit.judgments.pooled import Pooled
from cmrkit.judgments.scale import MAX_ASSESSORS, binarize, majority

if TYPE_CHECKING:
    from cmrkit.trec import Qrels


def check_assessors(assessors: int, noise: float) -> None:
    """Refuse assessors outside 1..MAX_ASSESSORS or a flip probability outside 0..1."""
    if not 1 <= assessors <= MAX_ASSESSORS:
        raise CmrkitError(f"--assessors must lie in 1..{MAX_ASSESSORS}, not {assessors}")
    if not 0.0 <= noise <= 1.0:
        raise CmrkitError(f"--noise must lie in 0..1, not {noise}")


@dataclass(frozen=True)
class SimulationOptions:
    """How simulated assessors answer: ``assessors`` per pair (each answers every pair; a pair's
    label is their majority) who flip the truth with probability ``noise``. The defaults of
    `judgments simulate`, `pool create --simulate` and `pool plan`."""

    assessors: int = 3
    noise: float = 0.1

    def check(self) -> None:
        check_assessors(self.assessors, self.noise)


SIMULATION = SimulationOptions()


@dataclass(frozen=True)
class SimulatedAssessors:
    """Assessors who know ``truth`` and err with probability ``noise`` (seeded); ``source``
    says where the truth came from (recorded in pool headers)."""

    truth: Qrels
    assessors: int = SIMULATION.assessors
    noise: float = SIMULATION.noise
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


def simulate(
    pool: Pooled,
    truth: Qrels,
    *,
    assessors: int = SIMULATION.assessors,
    noise: float = SIMULATION.noise,
    seed: int = 0,
    worker_prefix: str = "sim",
) -> list[tuple[str, str, str, int]]:
    """Answers of fake assessors for the pool's sampled pairs: each knows the complete ``truth``
    (rel > 0 relevant) and flips it with probability ``noise``; relevant answers are 4 or 5,
    non-relevant 1, 2 or 3. Rows (query_id, doc_id, worker_id, label), sorted."""
    from cmrkit.trec import natural_key

    check_assessors(assessors, noise)
    if pool.queries and not set(pool.queries) & set(truth):
        raise CmrkitError(
            f"the qrels judge none of the pool's queries (e.g. {pool.queries[0]}); "
            "are they from another collection?"
        )
    people = SimulatedAssessors(truth, assessors, noise, seed)
    rows = people.answers([(p.qid, p.docno) for p in pool.pairs if p.sampled], worker_prefix)
    rows.sort(key=lambda r: (natural_key(r[0]), r[1], r[2]))
    return rows
