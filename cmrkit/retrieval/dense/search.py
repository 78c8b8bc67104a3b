"""Exact inner-product search over an encoded corpus, and the ``run dense`` system.

Every unit is scored against every query (no approximation). Scores are written with 6
decimals and ranked like every cmrkit run: score as written descending, ties by docno
descending (trec_eval's order); units that tie with the k-th are all considered before the cut,
so the top k do not depend on the order of the corpus. The query's own unit and, for TAC
collections, the units of its document are never returned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cmrkit.collection.layout import collection_dir, read_topics, resolve_split
from cmrkit.errors import CmrkitError
from cmrkit.retrieval.dense.models import ModelRef, lengths, resolve_model
from cmrkit.retrieval.dense.options import DenseOptions
from cmrkit.retrieval.options import RunOptions
from cmrkit.retrieval.runfile import (
    Computed,
    RankedRun,
    RunResult,
    RunSpec,
    own_document_units,
    produce_run,
    refuse_other_run,
    rerun_command,
)

log = logging.getLogger("cmrkit")
TIE_BREAK = "score descending (as written, 6 decimals), then docno descending (trec_eval order)"
QUERY_BLOCK = 256  # queries scored per matrix product


def written(scores: np.ndarray) -> np.ndarray:
    """Float32 scores as the run file writes them (6 decimals), as float64: the same values as
    ``float(format_score(s))``. Exact: a float32 times 1e6 is exact in float64, so rint rounds
    the true value half to even like Python's formatting, and the division is correctly
    rounded like parsing the decimal."""
    return np.round(scores.astype(np.float64), 6)


def search(
    queries: np.ndarray,
    vectors: np.ndarray,
    ids: Sequence[str],
    k: int,
    *,
    exclude: Sequence[AbstractSet[str]] | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[list[tuple[str, float]]]:
    """The top ``k`` units of each query by inner product, ranked as documented above."""
    if queries.ndim != 2 or vectors.ndim != 2 or queries.shape[1] != vectors.shape[1]:
        raise CmrkitError(
            f"query vectors of shape {queries.shape} do not match unit vectors of shape "
            f"{vectors.shape}"
        )
    position = {docno: i for i, docno in enumerate(ids)} if exclude else {}
    n = vectors.shape[0]
    # each unit's place in docno order (trec_eval's tie-break compares docnos as strings)
    docno_rank = np.empty(n, dtype=np.int64)
    docno_rank[np.argsort(np.array(ids, dtype=object), kind="stable")] = np.arange(n)
    results: list[list[tuple[str, float]]] = []
    vt = np.ascontiguousarray(vectors, dtype=np.float32).T
    for b in range(0, queries.shape[0], QUERY_BLOCK):
        block = np.ascontiguousarray(queries[b : b + QUERY_BLOCK], dtype=np.float32) @ vt
        for row in range(block.shape[0]):
            scores = block[row]
            if exclude:
                banned = [position[d] for d in exclude[b + row] if d in position]
                if banned:
                    scores[banned] = -np.inf
                valid = n - len(banned)
            else:
                valid = n
            take = min(k, valid)
            if take <= 0:
                results.append([])
                continue
            if take < n:
                top = np.argpartition(-scores, take - 1)[:take]
                cut = scores[top].min()
                # everything that may round to the k-th score competes for the last places
                top = np.flatnonzero(scores >= cut - 1e-6)
            else:
                top = np.flatnonzero(np.isfinite(scores))
            value = written(scores[top])
            # trec_eval's order, as cmrkit.trec.ranked: float32 of the written score
            # descending, then docno descending
            order = np.lexsort((-docno_rank[top], -value.astype(np.float32)))[:k]
            results.append(
                [
                    (ids[i], v)
                    for i, v in zip(top[order].tolist(), value[order].tolist(), strict=True)
                ]
            )
        if progress:
            progress(block.shape[0])
    return results


def search_task(
    index: Any, queries: np.ndarray, k: int, exclude: list[AbstractSet[str]], threads: int
) -> tuple[list[list[tuple[str, float]]], None]:
    """Ray task: (:func:`search`, no model) of a block of queries in the encoding ``index`` (a
    ``store.DenseIndex`` not yet read: the worker reads it from storage every node shares),
    with ``threads`` BLAS threads: the matrix product's last bits depend on how many threads
    share it, so a worker uses as many as the command's own process would."""
    from threadpoolctl import threadpool_limits

    from cmrkit.retrieval.distributed.engine import fault_point

    fault_point("search-dense")
    with threadpool_limits(limits=threads, user_api="blas"):
        return search(queries, index.vectors(), index.ids(), k, exclude=exclude), None


def blas_threads() -> int:
    """How many threads this process's BLAS (numpy's) runs a matrix product with."""
    from threadpoolctl import threadpool_info

    found = [i["num_threads"] for i in threadpool_info() if i.get("user_api") == "blas"]
    return int(found[0]) if found else 1


def search_on_ray(
    work: Any,
    encoded: Any,
    qvecs: np.ndarray,
    k: int,
    exclude: list[AbstractSet[str]],
    progress: Callable[[int], None] | None = None,
) -> list[list[tuple[str, float]]]:
    """:func:`search` on Ray workers: the queries cut into pieces of whole ``QUERY_BLOCK``
    blocks (the blocks one machine multiplies), each multiplied with this process's number of
    BLAS threads, so the same scores, in query order."""
    from cmrkit.retrieval.dense.store import DenseIndex
    from cmrkit.retrieval.distributed.engine import chunks

    unread = DenseIndex(encoded.collection, encoded.path, encoded.manifest)
    pieces = chunks(qvecs.shape[0], work.workers, QUERY_BLOCK, 16 * QUERY_BLOCK)
    threads = blas_threads()
    tasks = [
        (unread, qvecs[piece.start : piece.stop], k, exclude[piece.start : piece.stop], threads)
        for piece in pieces
    ]
    found = work.run(
        search_task,
        tasks,
        what=lambda i: f"searching queries {pieces[i].start}..{pieces[i].stop - 1}",
        done=(lambda i, _: progress(len(pieces[i]))) if progress else None,
    )
    return [hits for part in found for hits in part]


def ensure_encoded(
    collection: Path,
    ref: ModelRef,
    dense: DenseOptions,
    passage_max_length: int,
    *,
    auto: bool,
    progress: bool,
    loader: Callable[[], Any],
    work: Any = None,
) -> Any:
    """The current encoding of the corpus; with ``auto``, a missing or stale one is made first
    (saying so on stderr)."""
    from cmrkit.console import console
    from cmrkit.retrieval.dense import store

    precision = dense.precision
    found = store.state(collection, ref, passage_max_length, precision)
    damage = ""
    if found == "current" and auto:
        index = store.open_dense(collection, ref, passage_max_length, precision)
        try:
            index.load()  # every byte checked now, while a damaged encoding can still be redone
            return index
        except store.DamagedEncoding as e:
            found, damage = "damaged", str(e).split("; re-encode it")[0]
    if found in ("current", "foreign") or not auto:
        return store.open_dense(collection, ref, passage_max_length, precision)
    if found == "damaged":
        if not damage:
            try:
                store.open_dense(collection, ref, passage_max_length, precision)
            except store.DamagedEncoding as e:
                damage = str(e).split("; re-encode it")[0]
        log.warning(f"{damage}; encoding the corpus again")
    elif progress:
        why = "not encoded yet" if found == "missing" else "the corpus changed"
        console.print(f"encoding {collection.as_posix()} with {ref.name} first ({why})")
    return store.encode_corpus(
        collection,
        ref,
        None,
        dense,
        passage_max_length=passage_max_length,
        force=True,
        progress=progress,
        loader=loader,
        work=work,
    )


def run_dense(
    collection: str | Path = "collections/sample",
    *,
    dense: DenseOptions | None = None,
    options: RunOptions | None = None,
    **overrides: Any,
) -> RunResult:
    """Dense retrieval: marked queries against the encoded corpus, exact inner product.

    ``dense`` holds the model and encoding options (:class:`DenseOptions`), ``options`` what
    every run shares (:class:`RunOptions`); keyword ``overrides`` set single run options.
    Writes ``RUNS/<collection>/<name>.<split>.trec`` (name: ``dense-<model-tag>``) and its
    sidecar.
    """
    from cmrkit.retrieval.dense.store import ray_work
    from cmrkit.retrieval.neural import quiet_hub

    quiet_hub()
    opts = RunOptions.build(options, overrides)
    dense = dense or DenseOptions()
    started = time.perf_counter()
    coll = collection_dir(collection)
    split = resolve_split(coll, opts.split)
    topics = read_topics(coll, split)
    ref = resolve_model(dense.model, download=dense.download)
    markers = dense.markers or ref.markers
    query_len, passage_len = lengths(ref, dense)
    job = _DenseRun(
        coll, topics, ref, dense, opts, opts.name or f"dense-{ref.tag}",
        markers, query_len, passage_len, _marker_warnings(ref, markers),
        ray_work(opts.engine, ref, dense),
    )  # fmt: skip
    parameters = {
        "model": ref.identity(),
        "markers": list(markers),
        "query_max_length": query_len,
        "passage_max_length": passage_len,
        "k": opts.k,
        "similarity": "inner product",
    }
    if dense.precision != "fp32":  # fp32 runs keep the identity they always had
        parameters["precision"] = dense.precision
    spec = RunSpec.for_collection(
        opts.runs_dir,
        coll,
        system="dense",
        name=job.name,
        split=split,
        parameters=parameters,
        index_id="",
        command=rerun_command(opts.argv, opts.split, split),
    )
    if not opts.force:
        # refuse a conflicting run before spending time on encoding the corpus
        refuse_other_run(spec.run_path, spec.sidecar_path, spec.identity)
    encoded = ensure_encoded(
        coll,
        ref,
        dense,
        passage_len,
        auto=opts.auto_index,
        progress=opts.progress,
        loader=job.encoders,
        work=job.work,
    )
    spec.index_id = encoded.index_id
    return produce_run(spec, lambda: job.compute(encoded, split), force=opts.force, started=started)


def _marker_warnings(ref: ModelRef, markers: tuple[str, str]) -> list[dict[str, str]]:
    """A warning (said now, and kept in the sidecar) when the queries' markers are not those
    the model was trained with."""
    from cmrkit.console import console

    if not ref.metadata or tuple(ref.metadata.get("markers", markers)) == tuple(markers):
        return []
    note = (
        f"the model was trained with markers {ref.markers[0]!r} {ref.markers[1]!r}, "
        f"the queries use {markers[0]!r} {markers[1]!r}"
    )
    console.print(f"warning: {note}", style="yellow")  # markup is off: data, not tags
    return [{"qid": "*", "warning": note}]


@dataclass
class _DenseRun:
    """A ``run dense``: its topics, model and options, and the encoders once loaded."""

    coll: Path
    topics: list[Any]
    ref: ModelRef
    dense: DenseOptions
    opts: RunOptions
    name: str
    markers: tuple[str, str]
    query_len: int
    passage_len: int
    warnings: list[dict[str, str]]
    work: Any = None  # store.RayWork: the queries encoded and searched on Ray workers
    _loaded: list[Any] = field(default_factory=list)

    def encoders(self) -> Any:
        """The model's encoders, loaded on first use (the corpus encoding may load them); on
        the CPU for a run on Ray (this process only tokenizes)."""
        from cmrkit.retrieval.dense.models import load_encoders
        from cmrkit.retrieval.dense.store import local_device

        if not self._loaded:
            device = local_device(self.dense.device, self.opts.engine)
            self._loaded.append(load_encoders(self.ref, device, self.dense.precision))
        return self._loaded[0]

    def compute(self, encoded: Any, split: str) -> Computed:
        """Encode the queries, search the encoded corpus, and make the run's sidecar."""
        from cmrkit.console import progress_bar
        from cmrkit.retrieval.dense.encode import encode_ids, query_ids

        topics = self.topics
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        encoders = self.encoders()
        timings["load_model"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        tokenizer = encoders.query.tokenizer
        contexts, spans = [t.context for t in topics], [t.span for t in topics]
        tokens = query_ids(tokenizer, contexts, spans, self.markers, self.query_len)
        work = self.work.connect(self.opts.verbose) if self.work is not None else None
        with progress_bar(self.opts.progress, f"{self.name} {split}: queries") as bar:
            task = bar.add_task("queries", total=len(topics))
            advance = lambda n: bar.advance(task, n)  # noqa: E731
            if work is not None:
                qvecs = work.encode_queries(tokens, self.dense.batch_size, advance)
            else:
                qvecs = encode_ids(
                    encoders.query, tokens, batch_size=self.dense.batch_size, progress=advance
                )
        timings["encode_queries"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        own_docs = own_document_units(self.coll, topics)
        exclude = [frozenset({t.unit}) | own_docs.get(t.qid, frozenset()) for t in topics]
        if work is not None:
            hits = search_on_ray(work, encoded, qvecs, self.opts.k, exclude)
        else:
            hits = search(qvecs, encoded.vectors(), encoded.ids(), self.opts.k, exclude=exclude)
        run: RankedRun = {t.qid: docs for t, docs in zip(topics, hits, strict=True)}
        timings["search"] = round(time.perf_counter() - t0, 3)
        tag = _tag(self.name, self.ref, self.query_len, self.passage_len)
        tag += "" if self.dense.precision == "fp32" else f":{self.dense.precision}"
        return Computed(run, tag, self.sidecar(encoders, encoded, tokens), timings)

    def sidecar(self, encoders: Any, encoded: Any, tokens: list[list[int]]) -> dict[str, Any]:
        """The run's own sidecar fields (the query each topic became, as the model reads it)."""
        from cmrkit.retrieval.dense.encode import decode
        from cmrkit.retrieval.neural import versions

        ref, topics = self.ref, self.topics
        tokenizer = encoders.query.tokenizer
        return {
            "model": {
                **ref.identity(),
                "path": str(ref.path),
                "tag": ref.tag,
                "trained": ref.metadata or None,
                "separate_query_encoder": ref.separate_query_encoder,
            },
            "device": encoders.device if self.work is None else self.work.device_made_on("cpu"),
            **encoders.precision_record(),
            "batch_size": self.dense.batch_size,
            **({"engine": self.work.record()} if self.work is not None else {}),
            "ranking": {
                "own_unit_removed": True,
                "own_document_removed": any(t.exclude_doc for t in topics),
                "tie_break": TIE_BREAK,
                "exact": True,
            },
            "index": {
                "path": str(encoded.path),
                "index_id": encoded.index_id,
                "corpus_sha256": encoded.corpus_sha256,
            },
            "versions": versions(),
            "n_queries": len(topics),
            "warnings": self.warnings,
            "queries": {
                t.qid: decode(tokenizer, ids) for t, ids in zip(topics, tokens, strict=True)
            },
        }


def _tag(name: str, ref: ModelRef, query_len: int, passage_len: int) -> str:
    return f"{name}:q={query_len}:p={passage_len}".replace(" ", "_")
