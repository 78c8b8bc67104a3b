"""The options every run command shares, as one record (``RunOptions``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmrkit.errors import check_range
from cmrkit.retrieval.distributed.engine import EngineOptions
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

MAX_K = 100_000_000  # Lucene counts hits in Java ints; no ranking needs more
MAX_THREADS = 256


@dataclass(frozen=True)
class RunOptions:
    """Where a run goes and how it is made, for every system (Lucene, dense, fused).

    ``split`` None picks ``test`` when the collection has it, else its only split.
    ``auto_index`` builds a missing or stale index with the index defaults before running.
    ``argv`` is the command line that made the run (recorded in the sidecar).
    ``engine`` says where the searches run (this process, or Ray workers: the same run file).
    """

    split: str | None = None
    k: int = 1000
    threads: int = 2
    spacy_model: str = DEFAULT_SPACY_MODEL
    name: str | None = None
    runs_dir: Path = Path("runs")
    force: bool = False
    verbose: bool = False
    progress: bool = False
    auto_index: bool = True
    argv: tuple[str, ...] | None = None
    engine: EngineOptions = EngineOptions()

    def __post_init__(self) -> None:
        object.__setattr__(self, "runs_dir", Path(self.runs_dir))
        if self.argv is not None:
            object.__setattr__(self, "argv", tuple(self.argv))
        check_range(self.k, 1, MAX_K, "-k")
        check_range(self.threads, 1, MAX_THREADS, "--threads")

    @classmethod
    def build(
        cls, options: RunOptions | None = None, overrides: Mapping[str, Any] | None = None
    ) -> RunOptions:
        """``options`` (or the defaults) with ``overrides`` applied; unknown names are errors."""
        return with_overrides(cls, options, overrides, "run")

    def with_argv(self, argv: Sequence[str] | None) -> RunOptions:
        return dataclasses.replace(self, argv=tuple(argv) if argv is not None else None)


def with_overrides(cls: type, options: Any, overrides: Mapping[str, Any] | None, what: str) -> Any:
    """An options record of dataclass ``cls``: ``options`` (or the defaults) with ``overrides``
    applied; names that are not fields of ``cls`` are a TypeError naming ``what`` options."""
    base = options or cls()
    if not overrides:
        return base
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise TypeError(f"unknown {what} option(s): {', '.join(unknown)}")
    return dataclasses.replace(base, **overrides)
