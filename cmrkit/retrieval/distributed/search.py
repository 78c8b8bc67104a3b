"""`cmrkit run ... --engine ray`: the queries of a run split over Ray workers.

Each worker (a Ray actor) opens the collection's index from storage every node shares, with
the searcher a single-machine run uses, and answers chunks of the queries; this process puts
the answers back in query order. A query's ranking does not depend on the queries searched
with it, so the run file is the single-machine one, byte for byte. The workers stay up for the
whole run (the field-weight learner searches many times with them); a worker that dies is
restarted and its chunk searched again (``RETRIES`` times).
"""

from __future__ import annotations

import json
import math
import socket
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.retrieval.distributed.engine import (
    RETRIES,
    EngineOptions,
    connect,
    failure,
    fault_point,
    ray_module,
)
from cmrkit.retrieval.index import MANIFEST, IndexInfo
from cmrkit.retrieval.runfile import RankedRun

CHUNKS_PER_WORKER = 4  # chunks of queries per worker: late chunks even out uneven workers
MAX_CHUNK = 2000


class SearchWorker:
    """One worker's searcher on the shared index (made a Ray actor by the searcher below),
    opened on its first search."""

    def __init__(self, open_searcher: Callable[..., Any], info: IndexInfo, k1: float, b: float):
        self.open_searcher = open_searcher
        self.info = info
        self.k1, self.b = k1, b
        self.searcher: Any = None
        self.qe: Any = None

    def _open(self) -> Any:
        info = self.info
        try:
            found = json.loads((info.path / MANIFEST).read_text(encoding="utf-8"))["index_id"]
        except (OSError, ValueError, KeyError, TypeError):
            found = None
        if found != info.index_id:
            raise CmrkitError(
                f"the worker on {socket.gethostname()} does not see this index there; the "
                "collection's folder must lie on storage that every Ray node shares",
                path=info.path,
            )
        return self.open_searcher(info, k1=self.k1, b=self.b)

    def search(self, qe: Any, queries: dict[str, str], options: dict[str, Any]) -> tuple:
        """(ranked lists, warnings) of a chunk of queries, with feedback ``qe``."""
        fault_point("search")  # the tests interrupt a run here
        if self.searcher is None:
            self.searcher = self._open()
        if qe != self.qe:
            self.searcher.set_qe(qe)
            self.qe = qe
        warnings: list[dict[str, str]] = []
        run = self.searcher.search(queries, warnings=warnings, **options)
        return run, warnings


class DistributedSearcher:
    """A searcher with the interface of ``systems.Searcher`` (``info``, ``set_qe``, ``search``,
    ``close``) whose searches run on Ray workers; ``open_searcher(info, k1=, b=)`` opens a
    single-machine searcher in each worker."""

    def __init__(
        self,
        open_searcher: Callable[..., Any],
        info: IndexInfo,
        *,
        k1: float = 0.9,
        b: float = 0.4,
        engine: EngineOptions,
        verbose: bool = False,
    ):
        ray = ray_module()
        self.info = info
        self.workers = connect(engine, verbose=verbose)
        self.record = {"name": "ray", "address": engine.address or "local", "workers": self.workers}
        actor = ray.remote(max_restarts=RETRIES, max_task_retries=RETRIES, num_cpus=1)(SearchWorker)
        self._actors = [
            actor.remote(open_searcher, info, float(k1), float(b)) for _ in range(self.workers)
        ]
        self._qe: Any = None

    def set_qe(self, qe: Any) -> None:
        if qe is not None:
            qe.check()
        self._qe = qe

    def search(
        self,
        queries: Mapping[str, str],
        *,
        k: int,
        exclude: Mapping[str, str] | None = None,
        exclude_units: Mapping[str, AbstractSet[str]] | None = None,
        fields: Mapping[str, float] | None = None,
        threads: int = 2,
        progress: Callable[[int], None] | None = None,
        warnings: list[dict[str, str]] | None = None,
    ) -> RankedRun:
        """As ``systems.Searcher.search``, the same answers in the same order."""
        ray = ray_module()
        exclude = exclude or {}
        exclude_units = exclude_units or {}
        qids = list(queries)
        size = min(MAX_CHUNK, max(1, math.ceil(len(qids) / (self.workers * CHUNKS_PER_WORKER))))
        chunks = [qids[i : i + size] for i in range(0, len(qids), size)]
        answers: list[tuple[RankedRun, list[dict[str, str]]] | None] = [None] * len(chunks)
        pending: dict[Any, tuple[int, Any]] = {}
        queued = iter(range(len(chunks)))

        def submit(i: int, actor: Any) -> None:
            part = chunks[i]
            options = {
                "k": k,
                "exclude": {q: exclude[q] for q in part if q in exclude},
                "exclude_units": {q: exclude_units[q] for q in part if q in exclude_units},
                "fields": dict(fields) if fields else None,
                "threads": threads,
            }
            ref = actor.search.remote(self._qe, {q: queries[q] for q in part}, options)
            pending[ref] = (i, actor)

        try:
            for actor, i in zip(self._actors, queued, strict=False):
                submit(i, actor)
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    i, actor = pending.pop(ref)
                    try:
                        answers[i] = ray.get(ref)
                    except ray.exceptions.RayError as e:
                        raise failure(e, f"queries {chunks[i][0]}..{chunks[i][-1]}") from None
                    if progress is not None:
                        progress(len(chunks[i]))
                    nxt = next(queued, None)
                    if nxt is not None:
                        submit(nxt, actor)
        finally:
            if pending:  # an error or an interrupt: calls on actors are stopped by killing them
                self.close()
        merged: dict[str, list[tuple[str, float]]] = {}
        found: list[dict[str, str]] = []
        for run, said in answers:  # type: ignore[misc]
            merged.update(run)
            found.extend(said)
        if warnings is not None:
            # one machine warns of queries without index terms first (they are not searched,
            # hence absent from the run), then of searched queries without results
            place = {q: n for n, q in enumerate(qids)}
            warnings.extend(sorted(found, key=lambda w: (w["qid"] in merged, place[w["qid"]])))
        return {qid: merged[qid] for qid in qids if qid in merged}

    def close(self) -> None:
        ray = ray_module()
        actors, self._actors = self._actors, []
        for actor in actors:
            ray.kill(actor)
