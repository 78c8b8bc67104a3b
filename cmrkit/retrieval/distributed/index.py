"""`cmrkit index --engine ray`: the index built shard by shard on a Ray cluster, then merged.

1. This process reads the corpus once, checks every unit as the single-machine build does
   (fields, unique ids) and writes it into one of S slices, chosen by a hash of its passage or
   document (of its id when it has neither): the units that share a passage or document lie in
   one slice, in corpus order. S is at least the number of workers, and enough slices that none
   holds much more than ``SHARD_UNITS`` units.
2. One Ray task per slice runs the single-machine build on it (:func:`index.index_corpus`: NER
   with the entity cache, the unit records, the ``document`` field, Anserini's IndexCollection)
   into a shard index. Slices and shards lie in the collection's folder, which every node must
   see (shared storage); a retried task writes a fresh shard, never one a dead worker left.
3. This process merges the shards with Lucene's ``IndexWriter.addIndexes`` (segments copied,
   not re-analysed), then writes the manifest and the doc-number table as a single-machine
   build does (:func:`index.finish_index`). The index is moved into place only when all of
   this succeeded; until then the previous index stays as it was.

The merged index equals the single-machine one in content: the same records, analysed the same
way, with Lucene's statistics (document counts, lengths, term frequencies) summed over segments,
so the same BM25 scores and, ties broken by docno, the same rankings. Only the doc numbers
differ (shard order); the doc-number table is built from the merged index. The index id depends
on the corpus and the settings alone, so it is the single-machine index's id.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import socket
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from cmrkit.collection.layout import corpus_path, iter_corpus, manifest_path
from cmrkit.errors import CmrkitError
from cmrkit.fileio import StagedOutputs, gzip_writer, sha256_file
from cmrkit.retrieval.distributed.engine import EngineOptions, connect, fault_point, run_tasks
from cmrkit.retrieval.index import (
    Built,
    IndexInfo,
    check_unit_id,
    corpus_size,
    existing_index,
    finish_index,
    group_key,
    index_corpus,
)
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

SHARD_UNITS = 250_000  # units per shard at most (about 10 minutes of NER on one core)


def slice_of(record: dict, n_slices: int) -> int:
    """The slice of a unit: by its passage or document, else by its id (stable across runs)."""
    key = group_key(record) or "u\t" + record["id"]
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % n_slices


def split_corpus(
    coll: Path, folder: Path, n_slices: int, *, progress: bool
) -> tuple[list[tuple[Path, int]], bool, int]:
    """Write the corpus as slices (each a folder holding ``corpus.jsonl.gz``).

    Returns the non-empty slices with their unit counts, whether any passage or document
    holds more than one unit (then every shard indexes ``document``), and the number of units.
    """
    from cmrkit.console import progress_bar

    path = corpus_path(coll)
    seen: dict[str, int] = {}
    groups: set[str] | None = set()  # None once a group of two units is found
    dirs = [folder / f"slice-{i:04d}" for i in range(n_slices)]
    counts = [0] * n_slices
    writers = []
    try:
        for d in dirs:
            d.mkdir(parents=True)
            writers.append(gzip_writer(corpus_path(d)))
        with progress_bar(progress, f"splitting the corpus into {n_slices} slices") as bar:
            task = bar.add_task("units", total=corpus_size(coll))
            for n, record in iter_corpus(coll):
                check_unit_id(seen, record["id"], n, path)
                key = group_key(record)
                if groups is not None and key is not None:
                    if key in groups:
                        groups = None
                    else:
                        groups.add(key)
                s = slice_of(record, n_slices)
                writers[s].write(json.dumps(record, ensure_ascii=False) + "\n")
                counts[s] += 1
                if n % 8192 == 0:
                    bar.update(task, completed=len(seen))
            bar.update(task, completed=len(seen), total=len(seen))
    finally:
        for w in writers:
            w.close()
    if not seen:
        raise CmrkitError("the corpus holds no units", path=path)
    for d, c in zip(dirs, counts, strict=True):
        manifest = {"counts": {"corpus_units": c}}
        manifest_path(d).write_text(json.dumps(manifest) + "\n", encoding="utf-8")
    slices = [(d, c) for d, c in zip(dirs, counts, strict=True) if c]
    return slices, groups is None, len(seen)


def index_shard(
    slice_dir: str,
    shard: int,
    shards_dir: str,
    entities: bool,
    spacy_model: str,
    documents: bool,
    target: str,
    docvectors: bool = False,
) -> tuple[str, Built]:
    """Ray task: the single-machine build of one slice into a new shard index; its path and
    what was built."""
    here = Path(slice_dir)
    if not corpus_path(here).exists():
        raise CmrkitError(
            f"the worker on {socket.gethostname()} cannot see the slice it was given; the "
            "collection's folder must lie on storage that every Ray node shares",
            path=here,
        )
    attempt = Path(shards_dir) / f"shard-{shard:04d}-{uuid.uuid4().hex[:8]}"
    attempt.mkdir(parents=True)
    built = index_corpus(
        here,
        attempt / "index",
        attempt,
        target=Path(target),
        threads=1,
        entities=entities,
        spacy_model=spacy_model,
        verbose=False,
        progress=False,
        documents=documents,
        docvectors=docvectors,
    )
    fault_point(f"shard-{shard}")  # the tests kill the worker here: a shard written, unreported
    return str(attempt / "index"), built


def merge_indexes(parts: Sequence[Path], out: Path, *, verbose: bool) -> int:
    """Merge Lucene indexes into the new index ``out`` (``IndexWriter.addIndexes``: segments
    copied, not re-analysed); the number of documents it holds."""
    from cmrkit.retrieval.java import java_errors, jclass, quiet

    def directory(path: Path):
        return jclass("org.apache.lucene.store.FSDirectory").open(
            jclass("java.io.File")(str(path.resolve())).toPath()
        )

    with (
        quiet(out.parent / "lucene.log", verbose=verbose),
        java_errors(
            "Lucene could not merge the shard indexes", "rerun with --verbose to see its log", out
        ),
    ):
        config = jclass("org.apache.lucene.index.IndexWriterConfig")()
        config.setOpenMode(jclass("org.apache.lucene.index.IndexWriterConfig$OpenMode").CREATE)
        target = directory(out)
        sources = [directory(p) for p in parts]
        writer = jclass("org.apache.lucene.index.IndexWriter")(target, config)
        try:
            writer.addIndexes(*sources)
            writer.commit()
            n = int(writer.getDocStats().numDocs)
        finally:
            writer.close()
            for d in (*sources, target):
                d.close()
    return n


def _index_shards(
    slices: list[tuple[Path, int]],
    n_units: int,
    shards_dir: Path,
    target: Path,
    *,
    workers: int,
    entities: bool,
    spacy_model: str,
    documents: bool,
    docvectors: bool,
    progress: bool,
) -> list[tuple[str, Built]]:
    """Index every slice into a shard on the Ray workers, with a progress bar of the units."""
    from cmrkit.console import progress_bar

    tasks = [
        (
            str(d.resolve()),
            i,
            str(shards_dir),
            entities,
            spacy_model,
            documents,
            str(target),
            docvectors,
        )
        for i, (d, _) in enumerate(slices)
    ]
    what = "NER and Lucene" if entities else "Lucene"
    with progress_bar(
        progress, f"indexing {len(slices)} shards on Ray ({workers} workers, {what})"
    ) as bar:
        task = bar.add_task("units", total=n_units)
        return run_tasks(
            index_shard,
            tasks,
            workers=workers,
            what=lambda i: f"shard {i} of {len(slices)}",
            done=lambda i, _: bar.advance(task, slices[i][1]),
        )


def build_sharded(
    collection: str | Path,
    *,
    engine: EngineOptions,
    entities: bool = True,
    spacy_model: str = DEFAULT_SPACY_MODEL,
    force: bool = False,
    verbose: bool = False,
    progress: bool = True,
    docvectors: bool = False,
) -> IndexInfo:
    """Index a collection's corpus into ``COLLECTION/index/`` on a Ray cluster; the index
    (equal in content to :func:`cmrkit.retrieval.index.build_index`'s)."""
    from cmrkit.console import console

    coll, target, kept = existing_index(
        collection, force=force, entities=entities, spacy_model=spacy_model, docvectors=docvectors
    )
    if kept is not None:
        return kept
    started = time.perf_counter()
    timings: dict[str, float] = {}
    workers = connect(engine, verbose=verbose)
    timings["connect"] = round(time.perf_counter() - started, 3)
    corpus_sha = sha256_file(corpus_path(coll))
    n_slices = max(workers, math.ceil(corpus_size(coll) / SHARD_UNITS))
    with StagedOutputs([target], force=True, anchor=coll, kinds={target: "index"}) as staged:
        t0 = time.perf_counter()
        slices, documents, n_units = split_corpus(
            coll, staged.tmp / "slices", n_slices, progress=progress
        )
        timings["split"] = round(time.perf_counter() - t0, 3)
        shards_dir = (staged.tmp / "shards").resolve()
        t0 = time.perf_counter()
        results = _index_shards(
            slices,
            n_units,
            shards_dir,
            target,
            workers=workers,
            entities=entities,
            spacy_model=spacy_model,
            documents=documents,
            docvectors=docvectors,
            progress=progress,
        )
        timings["shards"] = round(time.perf_counter() - t0, 3)
        for d, _ in slices:
            shutil.rmtree(d, ignore_errors=True)
        t0 = time.perf_counter()
        if progress:
            console.print(f"merging {len(results)} shard indexes with Lucene")
        staged_index = staged.path(target)
        n_indexed = merge_indexes([Path(p) for p, _ in results], staged_index, verbose=verbose)
        if n_indexed != n_units:
            raise CmrkitError(f"the merged index holds {n_indexed} of {n_units} units", path=target)
        shutil.rmtree(shards_dir, ignore_errors=True)
        timings["merge"] = round(time.perf_counter() - t0, 3)
        parts = [b for _, b in results]
        built = Built(
            n_units,
            documents,
            set().union(*(b.features for b in parts)),
            {k: sum(b.ner.get(k, 0) for b in parts) for k in ("recognised", "cached")}
            if entities
            else {},
            timings,
            docvectors,
        )
        timings["total"] = round(time.perf_counter() - started, 3)
        manifest = finish_index(
            staged_index,
            coll,
            corpus_sha,
            built,
            entities=entities,
            spacy_model=spacy_model,
            verbose=verbose,
            extra={
                "engine": {
                    "name": "ray",
                    "address": engine.address or "local",
                    "workers": workers,
                    "shards": len(slices),
                },
                "threads": 1,
                "seconds": timings,
            },
        )
    return IndexInfo(coll, target, manifest)
