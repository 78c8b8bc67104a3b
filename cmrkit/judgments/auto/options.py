"""The options of ``cmrkit judgments auto``: their one set of defaults, which the command line
declares its options from. Importing this module loads neither numpy nor a model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cmrkit.errors import CmrkitError
from cmrkit.retrieval.reader.options import RERANK_DEFAULTS

DEFAULT_DEPTH = 20  # --run's units per query, and --calibrate-run's
CALIBRATE_QUERIES = 100  # --calibrate-on SPLIT: queries (evenly spread) whose top k calibrate
READER_BATCH_SIZE = RERANK_DEFAULTS.batch_size  # the reader judge reads as `run rerank`
ON_UNPARSED = ("skip", "fail")
MAX_TIMEOUT = 86_400  # seconds: --timeout at most a day (a finite deadline)
MAX_RETRIES = 20  # the 20th retry waits 0.5 * 2**19 s (three days) already


@dataclass(frozen=True)
class LlmOptions:
    """How an LLM judge is asked."""

    prompt: Path | None = None  # None: the shipped template
    concurrency: int = 4
    timeout: float = 60.0
    retries: int = 3
    api_key_env: str | None = None
    seed: int = 0

    def check(self) -> None:
        if self.concurrency < 1:
            raise CmrkitError(f"--concurrency must be at least 1, got {self.concurrency}")
        if not 0 < self.timeout <= MAX_TIMEOUT:  # refuses nan and inf (1e309) too
            raise CmrkitError(
                f"--timeout must be a number of seconds > 0 and at most {MAX_TIMEOUT:,} (a "
                f"day), got {self.timeout}"
            )
        if not 0 <= self.retries <= MAX_RETRIES:
            raise CmrkitError(
                f"--retries must be 0 to {MAX_RETRIES} (the backoff doubles each time), got "
                f"{self.retries}"
            )


LLM_DEFAULTS = LlmOptions()
