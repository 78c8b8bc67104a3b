"""The reader judge (``reader:DIR``): a reader made by ``cmrkit train reader`` scores each
(query, unit) pair on its own (its selection score: no softmax over a query's candidates),
through ``retrieval.reader.scoring`` (torch stays there); a calibration makes the score a
probability and a Likert label.

Pairs are read in groups keyed by the pairs themselves (:func:`groups`: a query's pairs, at most
:data:`GROUP` together), each group read alone and put in the cache when read: a run stopped
midway keeps the groups it finished, and only groups with a missing pair are read. The cache
key of a pair names its group, so a score is reused only where the same group was read: the
labels are the same bytes whatever the cache held before (batches of other pairs change a
score's last bits). The reader is loaded only when a pair is not in the cache, so a rerun loads
no model.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.judgments.auto.cache import Entry, Key
from cmrkit.judgments.auto.calibration import Calibration, likert
from cmrkit.judgments.auto.judges import Request
from cmrkit.judgments.auto.options import READER_DEFAULTS
from cmrkit.judgments.auto.pairs import Pair, PairTexts
from cmrkit.trec import natural_key

GROUP = 64  # pairs of one query read (and cached) together at most


def groups(pairs: Sequence[Pair]) -> list[list[Pair]]:
    """The groups the reader judge reads ``pairs`` in: each query's pairs (queries in natural
    order, units sorted), cut into equal parts of at most :data:`GROUP` pairs. A group depends
    on its query's pairs alone, so two pools sharing a query's pairs share its groups."""
    by_query: dict[str, set[str]] = {}
    for q, d in pairs:
        by_query.setdefault(q, set()).add(d)
    out: list[list[Pair]] = []
    for q in sorted(by_query, key=natural_key):
        docnos = sorted(by_query[q])
        parts = -(-len(docnos) // GROUP)
        for i in range(parts):
            part = docnos[i * len(docnos) // parts : (i + 1) * len(docnos) // parts]
            out.append([(q, d) for d in part])
    return out


class ReaderJudge:
    """A reader folder as a judge; ``calibration`` is set before :meth:`label` is asked."""

    kind = "reader"
    prompt_sha256 = ""

    def __init__(
        self,
        folder: str | Path,
        *,
        device: str = READER_DEFAULTS.device,
        batch_size: int = READER_DEFAULTS.batch_size,
        precision: str = READER_DEFAULTS.precision,
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

    def trained_on(self, coll: Path, fitted_on: Mapping[str, Any]) -> str | None:
        """A warning when the calibration pairs (``fitted_on``, a :class:`pairs.Judged`'s) are
        what the reader was trained on: the split it records (of the same collection: its
        topics' sha256), or the very qrels file (by sha256). None otherwise."""
        from cmrkit.retrieval.runfile import topics_sha256

        data = self.ref.metadata.get("data") or {}
        params = self.ref.metadata.get("parameters") or {}
        trained = data.get("train_split") or params.get("train_split")
        given = fitted_on.get("qrels") or fitted_on.get("labels") or {}
        same_file = bool(data.get("qrels_sha256")) and given.get("sha256") == data["qrels_sha256"]
        split = fitted_on.get("split")
        same_split = split is not None and split == trained
        if same_split and data.get("topics_sha256"):
            with contextlib.suppress(OSError, CmrkitError):
                same_split = topics_sha256(coll) == data["topics_sha256"]
        if not (same_file or same_split):
            return None
        what = f"split {split}" if split is not None else str(given.get("path"))
        return (
            f"--calibrate-on {what}: the reader was trained on it ({self.ref.path} records "
            f"train_split {trained!r}); a reader scores the pairs it learned from better than "
            "unseen ones, so this calibration is overconfident (docs/judging.md); calibrate on "
            "another split or on people's labels"
        )

    def _open(self) -> Any:
        if self._reader is None:
            from cmrkit.retrieval.reader.scoring import open_reader

            self._reader = open_reader(self.ref, device=self.device, precision=self.precision)
        return self._reader

    def keys(self, texts: PairTexts, pairs: Sequence[Pair]) -> dict[Pair, Key]:
        """The cache key of each pair: its texts and the group it is read in
        (:func:`groups`), so that a score is reused only where it was read with the same
        pairs, hence as a fresh run reads it."""
        out: dict[Pair, Key] = {}
        for group in groups(pairs):
            own = [texts.key(p)[2] for p in group]
            members = hashlib.sha256(
                json.dumps([[p[1], sha] for p, sha in zip(group, own, strict=True)]).encode()
            ).hexdigest()
            for p, sha in zip(group, own, strict=True):
                read = hashlib.sha256(f"{sha} in {members}".encode()).hexdigest()
                out[p] = (p[0], p[1], read)
        return out

    def answer(self, request: Request) -> None:
        """Read the groups of ``pairs`` (:func:`groups`) that hold a ``missing`` pair, each
        group whole and alone, and cache its missing pairs: a pair's score depends on its
        group only, so it is the same whatever the cache held."""
        from cmrkit.retrieval.reader.scoring import score_pairs

        texts, missing = request.texts, request.missing
        if not missing:
            return
        reader = self._open()
        for group in groups(request.pairs):
            todo = sum(1 for p in group if p in missing)
            if not todo:
                continue
            docnos = sorted({d for _, d in group})
            at = {d: i for i, d in enumerate(docnos)}
            timings: dict[str, float] = {}
            scored = score_pairs(
                reader,
                [texts.topics[group[0][0]]],
                [texts.texts[d] for d in docnos],
                [(0, at[d]) for _, d in group],
                batch_size=self.batch_size,
                timings=timings,
            )
            for k, v in timings.items():
                self.timings[k] = round(self.timings.get(k, 0.0) + v, 3)
            request.cache.put(
                (request.key(p), Entry(score=s.score))
                for p, s in zip(group, scored, strict=True)
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
