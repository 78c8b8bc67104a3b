"""The encoded corpus of a collection: ``COLLECTION/dense/<model-tag>/``.

The folder holds ``cmrkit-dense.json`` (the model's identity, the corpus sha256, the passage
length, the shards, versions and timings), ``ids.txt`` (the unit ids in corpus order) and
``vectors-NNNNN.npy`` (float32, one row per unit, ``shard_size`` rows a shard). The model tag is
the model's name plus the start of its sha256, so each model has its own folder.

Encoding writes into ``<model-tag>.partial/`` shard by shard; an interrupted encoding resumes
from its finished shards when run again with the same model, corpus and settings, and the
folder is moved into place when every shard is there. An encoding whose corpus has changed is
stale: refused unless rebuilt (``force``, or ``auto`` in the run commands).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

import cmrkit.retrieval.stored as stored
from cmrkit._version import __version__
from cmrkit.collection.layout import collection_dir, corpus_path, iter_corpus
from cmrkit.errors import CmrkitError
from cmrkit.fileio import OutputLock, StagedOutputs, reading, sha256_file
from cmrkit.retrieval.dense.models import ModelRef
from cmrkit.retrieval.dense.options import DenseOptions
from cmrkit.retrieval.stored import StoredIndex

DENSE_DIR = "dense"
MANIFEST = "cmrkit-dense.json"
STATE = "cmrkit-dense-partial.json"
IDS = "ids.txt"
FORMAT = "cmrkit-dense/1"


class DenseIndex(StoredIndex):
    """An encoded corpus that matches its collection's corpus."""

    def ids(self) -> list[str]:
        return (self.path / IDS).read_text(encoding="utf-8").split("\n")[:-1]

    def vectors(self) -> np.ndarray:
        """All unit vectors (n_units x dim, float32), in corpus order."""
        # under the folder's read lock: a re-encoding swapped in meanwhile is refused, never mixed
        with reading(self.path):
            now = _read_json(self.path / MANIFEST) or {}
            if now.get("index_id") != self.manifest.get("index_id"):
                raise CmrkitError(
                    "the encoding was replaced while this command ran; run the command again",
                    path=self.path,
                )
            parts = [np.load(self.path / s["file"]) for s in self.manifest["shards"]]
        return np.concatenate(parts) if len(parts) > 1 else parts[0]


def store_tag(ref: ModelRef, passage_max_length: int) -> str:
    """The folder name of an encoding: the model's tag and the passage length."""
    return f"{ref.tag}-p{passage_max_length}"


def dense_path(collection: Path, ref: ModelRef, passage_max_length: int) -> Path:
    return Path(collection) / DENSE_DIR / store_tag(ref, passage_max_length)


def _identity(ref: ModelRef, corpus_sha: str, passage_max_length: int, shard_size: int) -> dict:
    return {
        "format": FORMAT,
        "model": ref.identity(),
        "corpus_sha256": corpus_sha,
        "passage_max_length": passage_max_length,
        "shard_size": shard_size,
    }


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def state(collection: Path, ref: ModelRef, passage_max_length: int) -> str:
    """``missing``, ``foreign`` (not cmrkit's), ``stale`` (another corpus) or ``current``."""
    target = dense_path(collection, ref, passage_max_length)
    return stored.state(collection, target, MANIFEST, FORMAT)


def open_dense(collection: str | Path, ref: ModelRef, passage_max_length: int) -> DenseIndex:
    """The current encoding of a collection's corpus by ``ref``; a clear error otherwise."""
    coll = collection_dir(collection)
    target = dense_path(coll, ref, passage_max_length)
    name = coll.as_posix()
    found = state(coll, ref, passage_max_length)
    if found == "missing":
        raise CmrkitError(
            f"the corpus is not encoded with this model and passage length; run `cmrkit encode "
            f"{name} --model {ref.name} --max-length {passage_max_length}` (or drop "
            "--no-auto-index)",
            path=target,
        )
    if found == "foreign":
        raise CmrkitError(
            f"exists but is not an encoding written by cmrkit (no readable {MANIFEST}); move it "
            "away, or pass --force to replace it",
            path=target,
        )
    if found == "stale":
        raise CmrkitError(
            f"encoded from another corpus (the collection changed since); re-encode it with "
            f"`cmrkit encode {name} --model {ref.name} --max-length {passage_max_length} "
            "--force`",
            path=target,
        )
    manifest = _read_json(target / MANIFEST) or {}
    return DenseIndex(coll, target, manifest, up_to_date=True)


def encode_corpus(
    collection: str | Path,
    ref: ModelRef,
    encoders: Any,
    *,
    passage_max_length: int,
    batch_size: int,
    shard_size: int,
    force: bool = False,
    progress: bool = True,
    loader: Any = None,
) -> DenseIndex:
    """Encode every unit of the corpus with the passage encoder into ``dense/<model-tag>/``.

    ``encoders`` is the loaded model, or None with ``loader`` (called once, only when there is
    work to do) returning it. An existing current encoding with the same settings is kept; a
    stale or different one is refused unless ``force``.
    """
    from cmrkit.console import console, progress_bar
    from cmrkit.retrieval.dense.encode import encode_ids, passage_ids

    coll = collection_dir(collection)
    target = dense_path(coll, ref, passage_max_length)
    corpus_sha = sha256_file(corpus_path(coll))
    wanted = _identity(ref, corpus_sha, passage_max_length, shard_size)
    if target.exists() and not force:
        kept = open_dense(coll, ref, passage_max_length)
        if kept.manifest.get("identity") == wanted:
            return kept
        raise CmrkitError(
            "an encoding with another shard size exists; pass --force to re-encode",
            path=target,
        )
    started = time.perf_counter()
    partial = target.with_name(target.name + ".partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    # one encoder at a time on this target: the resumable folder is locked while it is written
    with OutputLock(partial):
        previous = _read_json(partial / STATE) if partial.exists() else None
        if previous is not None and previous.get("identity") != wanted:
            previous = None
        if previous is None:
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)
            (partial / STATE).write_text(json.dumps({"identity": wanted}, indent=2) + "\n")
        ids: list[str] = []
        texts: list[str] = []
        seen: dict[str, int] = {}
        for n, record in iter_corpus(coll):
            docno = record["id"]
            if docno in seen:
                raise CmrkitError(
                    f"unit id {docno!r} already used on line {seen[docno]}; ids must be unique "
                    "(rebuild the collection)",
                    path=corpus_path(coll),
                    where=f"line {n}",
                )
            seen[docno] = n
            ids.append(docno)
            texts.append(record["contents"])
        if not ids:
            raise CmrkitError("the corpus holds no units", path=corpus_path(coll))
        del seen
        n_shards = (len(ids) + shard_size - 1) // shard_size
        shards = [f"vectors-{i:05d}.npy" for i in range(n_shards)]
        done = [s for s in shards if (partial / s).exists()]
        if done and progress:
            console.print(
                f"resuming the encoding in {partial}: {len(done)} of {n_shards} shards done"
            )
        if encoders is None:
            encoders = loader()
        timings: dict[str, float] = {"tokenize": 0.0, "encode": 0.0}
        with progress_bar(progress, f"encoding {coll.name} ({target.name})") as bar:
            resumed = sum(
                len(texts[i * shard_size : (i + 1) * shard_size])
                for i, s in enumerate(shards)
                if s in done
            )
            task = bar.add_task("units", total=len(ids), completed=resumed)
            for i, shard in enumerate(shards):
                if shard in done:
                    continue
                part = texts[i * shard_size : (i + 1) * shard_size]
                t0 = time.perf_counter()
                tokens = passage_ids(encoders.passage.tokenizer, part, passage_max_length)
                timings["tokenize"] += time.perf_counter() - t0
                t0 = time.perf_counter()
                vectors = encode_ids(
                    encoders.passage,
                    tokens,
                    batch_size=batch_size,
                    progress=lambda k: bar.advance(task, k),
                )
                timings["encode"] += time.perf_counter() - t0
                tmp = partial / (shard + ".tmp")
                with open(tmp, "wb") as f:
                    np.save(f, vectors)
                os.replace(tmp, partial / shard)
        with open(partial / IDS, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(f"{docno}\n" for docno in ids))
        files = [
            {"file": s, "rows": int(np.load(partial / s, mmap_mode="r").shape[0])} for s in shards
        ]
        dim = int(np.load(partial / shards[0], mmap_mode="r").shape[1])
        timings = {k: round(v, 3) for k, v in timings.items()}
        timings["total"] = round(time.perf_counter() - started, 3)
        manifest = {
            "format": FORMAT,
            "identity": wanted,
            "index_id": _index_id(wanted, partial, shards),
            "model": {**ref.identity(), "path": str(ref.path), "tag": ref.tag},
            "tag": target.name,
            "corpus": corpus_path(coll).name,
            "corpus_sha256": corpus_sha,
            "n_units": len(ids),
            "dim": dim,
            "dtype": "float32",
            "passage_max_length": passage_max_length,
            "shards": files,
            "device": encoders.device,
            "batch_size": batch_size,
            "resumed_shards": len(done),
            "versions": versions(),
            "seconds": timings,
        }
        (partial / MANIFEST).write_text(
            json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )
        # the finished folder goes in by rename; a previous encoding stays whole until then
        with StagedOutputs([target], force=True, anchor=target.parent) as staged:
            os.replace(partial, staged.path(target))
            (staged.path(target) / STATE).unlink()
            staged.commit()
        return DenseIndex(coll, target, manifest)


def _index_id(identity: dict[str, Any], folder: Path, shards: list[str]) -> str:
    """The identity plus the vectors' bytes: another encoding, another id."""
    import hashlib

    h = hashlib.sha256(json.dumps(identity, sort_keys=True).encode())
    for s in shards:
        h.update(sha256_file(folder / s).encode())
    return h.hexdigest()


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {"cmrkit": __version__}
    for package in ("torch", "transformers", "sentence-transformers", "numpy"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found


def encode(
    collection: str | Path,
    dense: DenseOptions | None = None,
    *,
    force: bool = False,
    progress: bool = True,
) -> DenseIndex:
    """``cmrkit encode``: the corpus encoded by ``dense.model`` (a :class:`DenseOptions`)."""
    from cmrkit.retrieval.dense.models import lengths, load_encoders, quiet_hub, resolve_model

    quiet_hub()
    dense = dense or DenseOptions()
    coll = collection_dir(collection)
    ref = resolve_model(dense.model, download=dense.download)
    _, passage_len = lengths(ref, dense)
    return encode_corpus(
        coll,
        ref,
        None,
        passage_max_length=passage_len,
        batch_size=dense.batch_size,
        shard_size=dense.shard_size,
        force=force,
        progress=progress,
        loader=lambda: load_encoders(ref, dense.device),
    )
