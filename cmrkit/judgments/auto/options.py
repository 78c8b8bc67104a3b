"""The options of ``cmrkit judgments auto``: their one set of defaults, which the command line
declares its options from, and the records a judge is made from (:class:`JudgeOptions`, what
:func:`cmrkit.judgments.auto.make.make_judge` takes). Importing this module loads neither numpy
nor a model."""

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
CONFIDENT = 0.9  # hybrid judging: the judge takes a pair it is at least this sure of


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


@dataclass(frozen=True)
class ReaderJudgeOptions:
    """How the reader judge (``reader:DIR``) reads its pairs: as `run rerank` reads them."""

    device: str = RERANK_DEFAULTS.device
    batch_size: int = READER_BATCH_SIZE
    precision: str = RERANK_DEFAULTS.precision


READER_DEFAULTS = ReaderJudgeOptions()


@dataclass(frozen=True)
class JudgeOptions:
    """How a judge of any kind is made: the reader judge's options, the LLM judges' and, for
    ``llm:URL``, ``model``, the name of the model the endpoint serves."""

    reader: ReaderJudgeOptions = ReaderJudgeOptions()
    llm: LlmOptions = LLM_DEFAULTS
    model: str | None = None

    def check(self, kind: str) -> None:
        """Refuse, before any work, what a judge of ``kind`` (a ``JudgeSpec``'s) cannot run
        with: ``llm:URL`` without a model name, LLM options out of range."""
        if kind == "llm" and not self.model:
            raise CmrkitError("llm:URL needs --model NAME (the model the endpoint serves)")
        if kind != "reader":
            self.llm.check()
