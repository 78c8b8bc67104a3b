"""The options of ``cmrkit run rerank`` (``RerankOptions``): their one set of defaults, which the
command line declares its options from. Importing this module loads neither numpy nor torch."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from cmrkit.errors import CmrkitError

DEFAULT_DEPTH = 50


def check_weights(interpolation: float | None, span_weight: float | None) -> None:
    """--interpolation and --span-weight: numbers >= 0 (None: not given)."""
    for flag, value in (("--interpolation", interpolation), ("--span-weight", span_weight)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise CmrkitError(
                f"{flag} must be a number >= 0 (0 for both: the reader's selection score "
                f"alone), got {value}"
            )


@dataclass(frozen=True)
class RerankOptions:
    """How the reader reads the candidates (None: what the model was trained with)."""

    depth: int = DEFAULT_DEPTH
    batch_size: int = 32
    device: str = "auto"
    stride: int | None = None
    max_span: int | None = None
    markers: tuple[str, str] | None = None
    interpolation: float | None = None  # None: the reader's own weight
    span_weight: float | None = None  # None: the reader's own weight
    precision: str = "fp32"  # int8: the encoder's linear layers in int8, on the CPU
    engine: Any = None  # distributed.engine.EngineOptions (--engine ray); None: this process

    def check(self) -> None:
        from cmrkit.retrieval.quantized import check_precision

        check_weights(self.interpolation, self.span_weight)
        check_precision(self.precision, self.device)
        if self.depth < 1:
            raise CmrkitError(f"--depth must be at least 1, got {self.depth}")
        if self.batch_size < 1:
            raise CmrkitError(f"--batch-size must be at least 1, got {self.batch_size}")
        if self.stride is not None and self.stride < 1:
            raise CmrkitError(f"--stride must be at least 1, got {self.stride}")
        if self.max_span is not None and self.max_span < 1:
            raise CmrkitError(f"--max-span must be at least 1, got {self.max_span}")


RERANK_DEFAULTS = RerankOptions()
