"""How systems are compared, the defaults the command line and the library share: in a module
of its own, light enough for the command line to import (the evaluation package's face loads
its scorers).

- :data:`COMPARE`: `compare`'s paired tests and intervals (``evaluation/significance.py``,
  ``cmrkit.compare``, `cmrkit compare`).
- :data:`AGREEMENT`: two rankings of the same systems (``evaluation/agreement.py``: `agree`,
  `judgments check`, `pool plan`): the bootstrap over queries and RBO's persistence (the
  extrapolated RBO's, ``evaluation/rbo.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from cmrkit.errors import CmrkitError


@dataclass(frozen=True)
class CompareOptions:
    """``permutations``: random sign flips of the permutation test; ``bootstrap``: resamples of
    the queries for the intervals and the bootstrap test (0: no intervals); ``ci``: the
    intervals' confidence level; ``alpha``: the significance level of the mark; ``seed``: of
    the permutations and the resamples."""

    permutations: int = 10000
    bootstrap: int = 10000
    ci: float = 0.95
    alpha: float = 0.05
    seed: int = 0


@dataclass(frozen=True)
class AgreementOptions:
    """``bootstrap``: resamples of the queries for the intervals (0: none); ``ci``: their
    confidence level; ``seed``: of the resamples; ``rbo_p``: RBO's persistence."""

    bootstrap: int = 1000
    ci: float = 0.95
    seed: int = 0
    rbo_p: float = 0.9

    def check(self) -> None:
        """--ci and --rbo-p strictly between 0 and 1, refused in one line before any work."""
        if not 0 < self.ci < 1:
            raise CmrkitError(f"--ci {self.ci} must lie between 0 and 1 (0.95 for 95% intervals)")
        if not 0 < self.rbo_p < 1:
            raise CmrkitError(
                f"--rbo-p {self.rbo_p}: RBO's persistence must lie strictly between 0 and 1"
            )


COMPARE = CompareOptions()
AGREEMENT = AgreementOptions()
