"""The reader judge (``reader:DIR``): a reader made by ``cmrkit train reader`` scores each
(query, unit) pair on its own (its selection score: no softmax over a query's candidates),
through ``retrieval.reader.scoring`` (torch stays there); a calibration makes the score a
probability and a Likert label.

Pairs are read in fixed chunks of the pairs to judge, each put in the cache whole when read: a
run stopped midway keeps the chunks it finished. The reader is loaded only when a pair is not
in the cache, so a rerun loads no model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.judging.cache import Entry
from cmrkit.judging.calibration import Calibration, likert
from cmrkit.judging.judges import Request
from cmrkit.judging.options import READER_BATCH_SIZE

CHUNK = 1024  # pairs read (and cached) together


class ReaderJudge:
    """A reader folder as a judge; ``calibration`` is set before :meth:`label` is asked."""

    kind = "reader"
    prompt_sha256 = ""

    def __init__(
        self,
        folder: str | Path,
        *,
        device: str = "auto",
        batch_size: int = READER_BATCH_SIZE,
        precision: str = "fp32",
    ):
        from cmrkit.retrieval.quantized import check_precision
        from cmrkit.retrieval.reader.model import resolve_reader

        if batch_size < 1:
            raise CmrkitError(f"--batch-size must be at least 1, got {batch_size}")
        check_precision(precision, device)
        self.ref = resolve_reader(folder)  # a folder that is no reader: refused here
        self.device, self.batch_size, self.precision = device, batch_size, precision
        params = self.ref.metadata["parameters"]
        self.identity: dict[str, Any] = {
            "kind": self.kind,
            "model": self.ref.identity(),
            "precision": precision,
            "stride": int(params["stride"]),
            "max_span": int(params["max_span"]),
            "max_length": int(params["max_length"]),
            "query_max_length": int(params["query_max_length"]),
        }
        self.calibration: Calibration | None = None
        self._reader: Any = None
        self.timings: dict[str, float] = {}

    def _open(self) -> Any:
        if self._reader is None:
            from cmrkit.retrieval.reader.scoring import open_reader

            self._reader = open_reader(self.ref, device=self.device, precision=self.precision)
        return self._reader

    def answer(self, request: Request) -> None:
        """Read every chunk of ``pairs`` that holds a ``missing`` pair (the chunk whole: the
        same chunks give the same scores, resumed or not) and cache its missing pairs."""
        from cmrkit.retrieval.reader.scoring import score_pairs

        texts, pairs, missing = request.texts, request.pairs, request.missing
        if not missing:
            return
        reader = self._open()
        qids = sorted({q for q, _ in pairs})
        docnos = sorted({d for _, d in pairs})
        q_at = {q: i for i, q in enumerate(qids)}
        d_at = {d: i for i, d in enumerate(docnos)}
        queries = [texts.topics[q] for q in qids]
        units = [texts.texts[d] for d in docnos]
        for start in range(0, len(pairs), CHUNK):
            chunk = pairs[start : start + CHUNK]
            todo = sum(1 for p in chunk if p in missing)
            if not todo:
                continue
            timings: dict[str, float] = {}
            scored = score_pairs(
                reader,
                queries,
                units,
                [(q_at[q], d_at[d]) for q, d in chunk],
                batch_size=self.batch_size,
                timings=timings,
            )
            for k, v in timings.items():
                self.timings[k] = round(self.timings.get(k, 0.0) + v, 3)
            request.cache.put(
                (texts.key(p), Entry(score=s.score))
                for p, s in zip(chunk, scored, strict=True)
                if p in missing
            )
            request.progress(todo)

    def scores(self, entries: Sequence[Entry]) -> list[float]:
        return [float(e.score) if e.score is not None else float("-inf") for e in entries]

    def label(self, entry: Entry) -> tuple[int, float | None] | None:
        if self.calibration is None:
            raise RuntimeError("the reader judge labels only once calibrated")
        p = self.calibration.probability(self.scores([entry])[0])
        return likert(p), p

    def close(self) -> None:
        self._reader = None
