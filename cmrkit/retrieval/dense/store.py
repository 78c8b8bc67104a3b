"""The encoded corpus of a collection: ``COLLECTION/dense/<model-tag>/``.

The folder holds ``cmrkit-dense.json`` (the model's identity, the corpus sha256, the passage
length, the shards, versions and timings), ``ids.txt`` (the unit ids in corpus order) and
``vectors-NNNNN.npy`` (float32, one row per unit, ``shard_size`` rows a shard). The model tag is
the model's name plus the start of its sha256, so each model has its own folder.

Encoding writes into ``<model-tag>.partial/`` shard by shard; an interrupted encoding resumes
from its finished shards when run again with the same model, corpus and settings, and the
folder is moved into place when every shard is there. An encoding whose corpus has changed is
stale: refused unless rebuilt (``force``, or ``auto`` in the run commands).

Nothing in the folder is trusted blindly. The manifest, written last, records each shard's rows,
size and sha256 and those of ``ids.txt``. Opening an encoding checks the sizes and the ``.npy``
headers (cheap); reading it checks the content hashes as the bytes are read. A mismatch is a
:class:`DamagedEncoding` naming the file (the run commands re-encode instead when they may).
Each finished shard of a partial encoding is recorded the same way in its state file, so a
resumed encoding re-encodes a shard that is missing, truncated or changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import cmrkit.retrieval.stored as stored
from cmrkit.collection.layout import collection_dir, corpus_path, iter_corpus
from cmrkit.errors import CmrkitError
from cmrkit.fileio import OutputLock, StagedOutputs, reading, sha256_file, write_file
from cmrkit.retrieval.dense.models import ModelRef
from cmrkit.retrieval.dense.options import DenseOptions
from cmrkit.retrieval.distributed.engine import NeuralWork
from cmrkit.retrieval.neural import versions
from cmrkit.retrieval.stored import StoredIndex

DENSE_DIR = "dense"
MANIFEST = "cmrkit-dense.json"
STATE = "cmrkit-dense-partial.json"
IDS = "ids.txt"
FORMAT = "cmrkit-dense/1"

log = logging.getLogger("cmrkit")


class DamagedEncoding(CmrkitError):
    """A file of an encoding is not what its manifest (or a partial encoding's state) records."""


def _npy_layout(path: Path) -> tuple[tuple[int, ...], bool, np.dtype, int] | None:
    """(shape, fortran order, dtype, offset of the data) from a ``.npy`` header; None when the
    file has no valid header."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                return None
            return tuple(shape), bool(fortran), dtype, f.tell()
    except (ValueError, OSError, SyntaxError, TypeError, EOFError):
        return None


def _shard_problem(
    path: Path, rows: int | None, dim: int | None, size: int | None = None
) -> str | None:
    """What is wrong with a shard file (None: nothing): present, of the recorded size, a
    float32 array of ``rows`` x ``dim`` whose data fills the file exactly."""
    try:
        actual = path.stat().st_size if path.is_file() else None
    except OSError:
        actual = None
    if actual is None:
        return "is missing"
    if size is not None and actual != size:
        return f"holds {actual:,} bytes where {size:,} were written (truncated or changed)"
    layout = _npy_layout(path)
    if layout is None:
        return "has no valid .npy header"
    shape, fortran, dtype, offset = layout
    want_rows = shape[0] if rows is None and shape else rows
    want_dim = shape[1] if dim is None and len(shape) == 2 else dim
    if fortran or dtype != np.dtype("<f4") or shape != (want_rows, want_dim):
        return (
            f"holds a {dtype} array of shape {shape}, expected float32 of shape "
            f"({want_rows}, {want_dim})"
        )
    need = offset + int(want_rows) * int(want_dim) * 4
    if actual != need:
        return f"holds {actual:,} bytes where its header needs {need:,} (truncated or changed)"
    return None


def _damaged(
    path: Path, reason: str, collection: Path, manifest: dict[str, Any]
) -> DamagedEncoding:
    model = (manifest.get("model") or {}).get("name", "MODEL")
    length = manifest.get("passage_max_length", "N")
    precision = (manifest.get("identity") or {}).get("precision")
    also = f" --precision {precision}" if precision else ""
    return DamagedEncoding(
        f"the dense encoding is damaged: this file {reason}; re-encode it with `cmrkit encode "
        f"{collection.as_posix()} --model {model} --max-length {length}{also} --force`",
        path=path,
    )


def check_files(collection: Path, folder: Path, manifest: dict[str, Any]) -> None:
    """The cheap check made on every open: each shard is there with its recorded size and a
    float32 header of its recorded shape, ``ids.txt`` has its recorded size; else
    :class:`DamagedEncoding` naming the file."""
    dim = manifest.get("dim")
    shards = manifest.get("shards")
    if not isinstance(shards, list) or not shards:
        raise _damaged(folder / MANIFEST, "lists no shards", collection, manifest)
    for s in shards:
        path = folder / str(s.get("file"))
        problem = _shard_problem(path, s.get("rows"), dim, s.get("bytes"))
        if problem:
            raise _damaged(path, problem, collection, manifest)
    ids = folder / IDS
    recorded = (manifest.get("ids") or {}).get("bytes")
    if not ids.is_file():
        raise _damaged(ids, "is missing", collection, manifest)
    if recorded is not None and ids.stat().st_size != recorded:
        raise _damaged(
            ids,
            f"holds {ids.stat().st_size:,} bytes where {recorded:,} were written",
            collection,
            manifest,
        )


@dataclass(frozen=True)
class DenseIndex(StoredIndex):
    """An encoded corpus that matches its collection's corpus."""

    _loaded: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def ids(self) -> list[str]:
        """The unit ids, in corpus order (checked against the manifest)."""
        return self.load()[0]

    def vectors(self) -> np.ndarray:
        """All unit vectors (n_units x dim, float32), in corpus order (checked)."""
        return self.load()[1]

    def load(self) -> tuple[list[str], np.ndarray]:
        """The ids and the vectors, read once, every byte checked against the sha256 the
        manifest records (:class:`DamagedEncoding` naming the file otherwise)."""
        if not self._loaded:
            self._loaded["data"] = self._read()
        return self._loaded["data"]

    def _read(self) -> tuple[list[str], np.ndarray]:
        m = self.manifest
        # under the folder's read lock: a re-encoding swapped in meanwhile is refused, never mixed
        with reading(self.path):
            now = _read_json(self.path / MANIFEST) or {}
            if now.get("index_id") != m.get("index_id"):
                raise CmrkitError(
                    "the encoding was replaced while this command ran; run the command again",
                    path=self.path,
                )
            check_files(self.collection, self.path, m)
            raw_ids = (self.path / IDS).read_bytes()
            parts = []
            hashes = []
            for s in m["shards"]:
                path = self.path / s["file"]
                data = path.read_bytes()
                digest = hashlib.sha256(data).hexdigest()
                if s.get("sha256", digest) != digest:
                    raise _damaged(
                        path, "differs from what was written (sha256)", self.collection, m
                    )
                hashes.append(digest)
                shape, _, _, offset = _npy_layout(path) or ((0, 0), False, None, 0)
                parts.append(np.frombuffer(data, dtype="<f4", offset=offset).reshape(shape))
        if _index_id(m.get("identity") or {}, hashes) != m.get("index_id"):
            raise _damaged(
                self.path / m["shards"][0]["file"],
                "or another shard differs from what was written (index id)",
                self.collection,
                m,
            )
        recorded = (m.get("ids") or {}).get("sha256")
        if recorded is not None and hashlib.sha256(raw_ids).hexdigest() != recorded:
            raise _damaged(
                self.path / IDS, "differs from what was written (sha256)", self.collection, m
            )
        try:
            ids = raw_ids.decode("utf-8").split("\n")[:-1]
        except UnicodeDecodeError:
            raise _damaged(self.path / IDS, "is not UTF-8 text", self.collection, m) from None
        vectors = np.concatenate(parts) if len(parts) > 1 else parts[0].copy()
        if len(ids) != vectors.shape[0] or len(set(ids)) != len(ids):
            raise _damaged(
                self.path / IDS,
                f"lists {len(ids):,} ids ({len(set(ids)):,} distinct) for {vectors.shape[0]:,} "
                "vectors",
                self.collection,
                m,
            )
        return ids, vectors


def store_tag(ref: ModelRef, passage_max_length: int, precision: str = "fp32") -> str:
    """The folder name of an encoding: the model's tag and the passage length (and ``-int8``
    for an encoding made with int8 linear layers)."""
    return f"{ref.tag}-p{passage_max_length}" + ("" if precision == "fp32" else f"-{precision}")


def dense_path(
    collection: Path, ref: ModelRef, passage_max_length: int, precision: str = "fp32"
) -> Path:
    return Path(collection) / DENSE_DIR / store_tag(ref, passage_max_length, precision)


def _identity(
    ref: ModelRef, corpus_sha: str, passage_max_length: int, shard_size: int, precision: str
) -> dict:
    found = {
        "format": FORMAT,
        "model": ref.identity(),
        "corpus_sha256": corpus_sha,
        "passage_max_length": passage_max_length,
        "shard_size": shard_size,
    }
    if precision != "fp32":  # fp32 encodings keep the identity they always had
        found["precision"] = precision
    return found


def encode_command(ref: ModelRef, collection: Path, passage_max_length: int, precision: str) -> str:
    """The ``cmrkit encode`` command that makes this encoding."""
    return (
        f"cmrkit encode {collection.as_posix()} --model {ref.name} --max-length "
        f"{passage_max_length}" + ("" if precision == "fp32" else f" --precision {precision}")
    )


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def state(collection: Path, ref: ModelRef, passage_max_length: int, precision: str = "fp32") -> str:
    """``missing``, ``foreign`` (not cmrkit's), ``stale`` (another corpus), ``damaged`` (a file
    missing or of the wrong size or shape: :func:`check_files`) or ``current``."""
    target = dense_path(collection, ref, passage_max_length, precision)
    found = stored.state(collection, target, MANIFEST, FORMAT)
    if found != "current":
        return found
    try:
        check_files(Path(collection), target, _read_json(target / MANIFEST) or {})
    except DamagedEncoding:
        return "damaged"
    return "current"


def open_dense(
    collection: str | Path, ref: ModelRef, passage_max_length: int, precision: str = "fp32"
) -> DenseIndex:
    """The current encoding of a collection's corpus by ``ref``; a clear error otherwise."""
    coll = collection_dir(collection)
    target = dense_path(coll, ref, passage_max_length, precision)
    command = encode_command(ref, coll, passage_max_length, precision)
    found = state(coll, ref, passage_max_length, precision)
    if found == "missing":
        raise CmrkitError(
            f"the corpus is not encoded with this model, passage length and precision; run "
            f"`{command}` (or drop --no-auto-index)",
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
            f"`{command} --force`",
            path=target,
        )
    manifest = _read_json(target / MANIFEST) or {}
    check_files(coll, target, manifest)
    return DenseIndex(coll, target, manifest, up_to_date=True)


def encode_corpus(
    collection: str | Path,
    ref: ModelRef,
    encoders: Any,
    dense: DenseOptions,
    *,
    passage_max_length: int,
    force: bool = False,
    progress: bool = True,
    loader: Any = None,
    work: RayWork | None = None,
) -> DenseIndex:
    """Encode every unit of the corpus with the passage encoder into ``dense/<model-tag>/``,
    in batches and shards of ``dense``'s sizes (``-int8`` or ``-onnx-int8`` appended for that
    ``dense.precision``: ``encoders`` must then run at it); with ``work`` (``--engine ray``),
    shard by shard on Ray workers: the same files but for the manifest's timings and its
    ``engine``.

    ``encoders`` is the loaded model, or None with ``loader`` (called once, only when there is
    work to do) returning it. An existing current encoding with the same settings is kept (its
    content checked); a stale, damaged or different one is refused unless ``force``.
    """
    batch_size, shard_size, precision = dense.batch_size, dense.shard_size, dense.precision
    coll = collection_dir(collection)
    target = dense_path(coll, ref, passage_max_length, precision)
    corpus_sha = sha256_file(corpus_path(coll))
    wanted = _identity(ref, corpus_sha, passage_max_length, shard_size, precision)
    if target.exists() and not force:
        kept = open_dense(coll, ref, passage_max_length, precision)
        if kept.manifest.get("identity") == wanted:
            kept.load()  # every byte checked: a damaged encoding is not "up to date"
            return kept
        raise CmrkitError(
            "an encoding with another shard size exists; pass --force to re-encode",
            path=target,
        )
    partial = target.with_name(target.name + ".partial")
    made = [p for p in (partial.parent,) if not p.exists()]
    partial.parent.mkdir(parents=True, exist_ok=True)
    # one encoder at a time on this target: the resumable folder is locked while it is written
    try:
        with OutputLock(partial):
            try:
                return _encode_into(
                    coll, ref, encoders, partial, target, wanted, corpus_sha,
                    passage_max_length=passage_max_length, batch_size=batch_size,
                    shard_size=shard_size, progress=progress, loader=loader, work=work,
                )  # fmt: skip
            except BaseException:
                # a failure before any shard was finished leaves nothing to resume: no debris
                if partial.is_dir() and not any(partial.glob("vectors-*.npy")):
                    shutil.rmtree(partial, ignore_errors=True)
                raise
    except BaseException:
        for folder in made:  # the dense/ folder this call created, when left empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def _encode_into(
    coll: Path,
    ref: ModelRef,
    encoders: Any,
    partial: Path,
    target: Path,
    wanted: dict[str, Any],
    corpus_sha: str,
    *,
    passage_max_length: int,
    batch_size: int,
    shard_size: int,
    progress: bool,
    loader: Any,
    work: RayWork | None = None,
) -> DenseIndex:
    from cmrkit.console import console

    started = time.perf_counter()
    records = _resumable(partial, wanted)
    ids, texts = _units(coll)
    shards = [f"vectors-{i:05d}.npy" for i in range((len(ids) + shard_size - 1) // shard_size)]
    done = _finished_shards(partial, shards, [len(p) for p in _parts(texts, shard_size)], records)
    if done and progress:
        console.print(
            f"resuming the encoding in {partial}: {len(done)} of {len(shards)} shards done"
        )
    if encoders is None:
        encoders = loader()  # on Ray too: the int8 weights are made once, here
    if work is not None:
        work.connect()
    timings = _encode_shards(
        encoders, partial, target, coll.name, wanted, shards, _parts(texts, shard_size), done,
        records, passage_max_length=passage_max_length, batch_size=batch_size, progress=progress,
        work=work,
    )  # fmt: skip
    ids_data = "".join(f"{docno}\n" for docno in ids).encode("utf-8")
    write_file(partial / IDS, ids_data)
    files = [records[s] for s in shards]
    timings = {k: round(v, 3) for k, v in timings.items()}
    timings["total"] = round(time.perf_counter() - started, 3)
    manifest = {
        "format": FORMAT,
        "identity": wanted,
        "index_id": _index_id(wanted, [f["sha256"] for f in files]),
        "model": {**ref.identity(), "path": str(ref.path), "tag": ref.tag},
        "tag": target.name,
        "corpus": corpus_path(coll).name,
        "corpus_sha256": corpus_sha,
        "n_units": len(ids),
        "dim": int(files[0]["dim"]),
        "dtype": "float32",
        "passage_max_length": passage_max_length,
        "shards": [{k: v for k, v in f.items() if k != "dim"} for f in files],
        "ids": {
            "file": IDS,
            "count": len(ids),
            "bytes": len(ids_data),
            "sha256": hashlib.sha256(ids_data).hexdigest(),
        },
        "device": _device(encoders, work),
        **encoders.precision_record(),
        "batch_size": batch_size,
        **({"engine": work.record()} if work is not None else {}),
        "resumed_shards": len(done),
        "versions": versions(),
        "seconds": timings,
    }
    # the checksums go in last: a manifest is there only when every file it names is complete
    write_file(partial / MANIFEST, (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
    # the finished folder goes in by rename; a previous encoding stays whole until then
    kinds = {target: "dense-encoding"}
    with StagedOutputs([target], force=True, anchor=target.parent, kinds=kinds) as staged:
        os.replace(partial, staged.path(target))
        (staged.path(target) / STATE).unlink()
        staged.commit()
    return DenseIndex(coll, target, manifest)


def _device(encoders: Any, work: RayWork | None) -> str:
    """The device the vectors were made on (the workers' on Ray, when they all had one)."""
    return work.device_made_on(encoders.device) if work is not None else str(encoders.device)


def _parts(texts: list[str], shard_size: int) -> list[list[str]]:
    """The texts of each shard."""
    return [texts[i : i + shard_size] for i in range(0, len(texts), shard_size)]


def _resumable(partial: Path, wanted: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The shards a partial encoding of the same identity recorded (a partial encoding of
    another is cleared, and a new one started)."""
    previous = _read_json(partial / STATE) if partial.exists() else None
    if previous is not None and previous.get("identity") != wanted:
        previous = None
    if previous is None:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        previous = {"identity": wanted, "shards": {}}
        write_file(partial / STATE, (json.dumps(previous, indent=2) + "\n").encode())
    for leftover in partial.glob("*.tmp"):  # a write cut short by a kill
        leftover.unlink(missing_ok=True)
    return dict(previous.get("shards") or {})


def _units(coll: Path) -> tuple[list[str], list[str]]:
    """The corpus's unit ids and texts, in corpus order (ids unique, at least one)."""
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
    return ids, texts


def _finished_shards(
    partial: Path, shards: list[str], rows: list[int], records: dict[str, dict[str, Any]]
) -> list[str]:
    """The shards of a partial encoding that are whole (``records`` updated); a shard that is
    missing, truncated or changed is removed, to be encoded again."""
    done = []
    for s, n in zip(shards, rows, strict=True):
        if not (partial / s).exists():
            continue
        rec = records.get(s)
        problem = _shard_problem(partial / s, n, None, rec["bytes"] if rec else None)
        if problem is None and rec is not None and sha256_file(partial / s) != rec["sha256"]:
            problem = "differs from what was written (sha256)"
        if problem is None and rec is None:
            layout = _npy_layout(partial / s)
            rec = _record(s, (partial / s).read_bytes(), n, layout[0][1] if layout else 0)
        if problem is not None:
            log.warning(f"{partial / s} {problem}: encoding it again")
            (partial / s).unlink(missing_ok=True)
            records.pop(s, None)
            continue
        records[s] = rec
        done.append(s)
    return done


def _encode_shards(
    encoders: Any,
    partial: Path,
    target: Path,
    name: str,
    wanted: dict[str, Any],
    shards: list[str],
    parts: list[list[str]],
    done: list[str],
    records: dict[str, dict[str, Any]],
    *,
    passage_max_length: int,
    batch_size: int,
    progress: bool,
    work: Any = None,
) -> dict[str, float]:
    """Encode the shards not ``done`` into ``partial``, recording each in the state file as it
    is written (on Ray workers when ``work`` is a :class:`RayWork`, in this process otherwise);
    the seconds spent tokenizing and encoding (summed over the workers)."""
    from cmrkit.console import progress_bar
    from cmrkit.retrieval.dense.encode import encode_ids, passage_ids

    timings: dict[str, float] = {"tokenize": 0.0, "encode": 0.0}

    def save(shard: str, vectors: np.ndarray) -> None:
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(vectors, dtype="<f4"))
        data = buffer.getvalue()
        write_file(partial / shard, data)
        records[shard] = _record(shard, data, vectors.shape[0], vectors.shape[1])
        state_now = {"identity": wanted, "shards": records}
        write_file(partial / STATE, (json.dumps(state_now, indent=2) + "\n").encode())

    todo = [(s, part) for s, part in zip(shards, parts, strict=True) if s not in done]
    with progress_bar(progress, f"encoding {name} ({target.name})") as bar:
        resumed = sum(len(part) for s, part in zip(shards, parts, strict=True) if s in done)
        task = bar.add_task("units", total=sum(len(p) for p in parts), completed=resumed)
        if work is not None:
            return work.encode_shards(
                todo, save, lambda k: bar.advance(task, k), passage_max_length, batch_size
            )
        for shard, part in todo:
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
            save(shard, vectors)
    return timings


@dataclass
class RayWork(NeuralWork):
    """The dense encoders' work on Ray workers (``--engine ray``) with the model ``ref``."""

    ref: Any = None  # ModelRef

    def encode_shards(
        self,
        todo: list[tuple[str, list[str]]],
        save: Any,
        advance: Any,
        max_length: int,
        batch_size: int,
    ) -> dict[str, float]:
        """Each shard of ``todo`` encoded by a task (a shard whose worker dies is encoded
        again, alone), saved as it arrives; the seconds the workers spent."""
        from cmrkit.retrieval.dense.workers import encode_task

        timings: dict[str, float] = {"tokenize": 0.0, "encode": 0.0}
        tasks = [
            (shard.removesuffix(".npy"), self.ref, self.device, self.precision, "passage", part,
             None, max_length, batch_size)
            for shard, part in todo
        ]  # fmt: skip

        def done(i: int, result: Any) -> None:
            vectors, seconds = result
            save(todo[i][0], vectors)
            for k, v in seconds.items():
                timings[k] += v
            advance(len(todo[i][1]))

        self.run(
            encode_task,
            tasks,
            what=lambda i: f"encoding shard {todo[i][0]}",
            done=done,
            lost="the finished shards are kept: run the command again to resume",
        )
        return timings

    def encode_queries(self, ids: list[list[int]], batch_size: int, advance: Any) -> np.ndarray:
        """Query vectors (input order) of token ``ids``, as ``encode.encode_ids`` makes them:
        the inputs sorted longest first, cut at batch boundaries into a piece per task."""
        from cmrkit.retrieval.dense.workers import encode_task
        from cmrkit.retrieval.distributed.engine import chunks
        from cmrkit.retrieval.neural import longest_first

        order = longest_first([len(x) for x in ids])
        pieces = chunks(len(order), self.workers * 4, batch_size, 64 * batch_size)
        tasks = [
            (f"queries-{i}", self.ref, self.device, self.precision, "query", None,
             [ids[order[j]] for j in piece], 0, batch_size)
            for i, piece in enumerate(pieces)
        ]  # fmt: skip

        found = self.run(
            encode_task,
            tasks,
            what=lambda i: f"encoding queries {pieces[i].start}..{pieces[i].stop - 1}",
            done=lambda i, _: advance(len(pieces[i])),
        )
        out = np.empty((len(ids), found[0][0].shape[1]), dtype=np.float32)
        for piece, (vectors, _) in zip(pieces, found, strict=True):
            out[[order[j] for j in piece]] = vectors
        return out


def _record(name: str, data: bytes, rows: int, dim: int) -> dict[str, Any]:
    """What the manifest records of a shard written as ``data``."""
    return {
        "file": name,
        "rows": int(rows),
        "dim": int(dim),
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def _index_id(identity: dict[str, Any], shard_hashes: list[str]) -> str:
    """The identity plus the vectors' bytes (each shard's sha256): another encoding, another
    id."""
    h = hashlib.sha256(json.dumps(identity, sort_keys=True).encode())
    for digest in shard_hashes:
        h.update(digest.encode())
    return h.hexdigest()


def encode(
    collection: str | Path,
    dense: DenseOptions | None = None,
    *,
    force: bool = False,
    progress: bool = True,
    engine: Any = None,
) -> DenseIndex:
    """``cmrkit encode``: the corpus encoded by ``dense.model`` (a :class:`DenseOptions`), on
    the Ray workers of ``engine`` (an ``EngineOptions``) when it is ``ray``."""
    from cmrkit.retrieval.dense.models import lengths, load_encoders, resolve_model
    from cmrkit.retrieval.neural import quiet_hub

    quiet_hub()
    dense = dense or DenseOptions()
    coll = collection_dir(collection)
    ref = resolve_model(dense.model, download=dense.download)
    _, passage_len = lengths(ref, dense)
    return encode_corpus(
        coll,
        ref,
        None,
        dense,
        passage_max_length=passage_len,
        force=force,
        progress=progress,
        loader=lambda: load_encoders(ref, local_device(dense.device, engine), dense.precision),
        work=ray_work(engine, ref, dense),
    )


def local_device(device: str, engine: Any) -> str:
    """Where this process loads the model: ``device``, but on the CPU when the work runs on Ray
    (it tokenizes and makes the int8 weights; the workers load their own)."""
    return "cpu" if engine is not None and engine.distributed else device


def ray_work(engine: Any, ref: ModelRef, dense: DenseOptions) -> RayWork | None:
    """The Ray side of a dense command (None: ``--engine local``)."""
    if engine is None or not engine.distributed:
        return None
    return RayWork(engine, dense.device, dense.precision, ref=ref)
