"""Opening inputs (plain, .gz, or a member of a .zip) and writing outputs atomically."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import queue
import shutil
import tempfile
import threading
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from cmrkit.errors import CmrkitError


def split_zip_member(spec: str | os.PathLike) -> tuple[Path, str | None]:
    """`archive.zip::member/path.json` or `archive.zip` (single member) -> (archive, member)."""
    s = str(spec)
    if "::" in s:
        archive, member = s.split("::", 1)
        return Path(archive), member
    return Path(s), None


def display_name(spec: str | os.PathLike) -> str:
    return str(spec)


def _zip_member(path: Path, member: str | None) -> str:
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as e:
        raise CmrkitError(f"not a valid zip archive ({e}); check the download", path=path) from e
    with zf:
        names = [n for n in zf.namelist() if not n.endswith("/")]
    if member is None:
        if len(names) != 1:
            raise CmrkitError(
                f"the archive holds {len(names)} files; name one as ARCHIVE.zip::MEMBER "
                f"(members: {', '.join(names[:5])}{' ...' if len(names) > 5 else ''})",
                path=path,
            )
        return names[0]
    if member not in names:
        raise CmrkitError(f"no member {member!r} in the archive", path=path)
    return member


@contextlib.contextmanager
def open_text(spec: str | os.PathLike) -> Iterator[IO[str]]:
    """Open a plain, gzipped or zipped (``archive.zip::member``) text file for reading as UTF-8."""
    path, member = split_zip_member(spec)
    if not path.exists():
        raise CmrkitError("file not found; check the path", path=path)
    if path.is_dir():
        raise CmrkitError("is a directory, expected a file", path=path)
    if path.suffix == ".zip" or member is not None:
        name = _zip_member(path, member)
        zf = zipfile.ZipFile(path)
        raw = zf.open(name)
        inner: IO[bytes] = raw
        if name.endswith(".gz"):
            inner = gzip.GzipFile(fileobj=raw)
        f = io.TextIOWrapper(inner, encoding="utf-8")
        try:
            yield f
        finally:
            f.close()
            zf.close()
        return
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        f = gzip.open(path, "rt", encoding="utf-8")
    else:
        f = open(path, encoding="utf-8")
    try:
        yield f
    finally:
        f.close()


@contextlib.contextmanager
def _readable(spec: str | os.PathLike) -> Iterator[None]:
    """Turn a corrupt or truncated compressed file, or non-UTF-8 text, into a CmrkitError."""
    try:
        yield
    except (EOFError, gzip.BadGzipFile, zlib.error, zipfile.BadZipFile) as e:
        raise CmrkitError(
            f"corrupt or truncated compressed file ({e}); download it again", path=spec
        ) from e
    except UnicodeDecodeError as e:
        raise CmrkitError(f"not UTF-8 text (byte {e.start}); convert it to UTF-8", path=spec) from e


def read_text(spec: str | os.PathLike) -> str:
    """The whole text of an input; a truncated or corrupt gzip is a CmrkitError."""
    with _readable(spec), open_text(spec) as f:
        return f.read()


def iter_lines(spec: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without newline) of an input, streaming."""
    with _readable(spec), open_text(spec) as f:
        for n, line in enumerate(f, 1):
            yield n, line.rstrip("\n").rstrip("\r")


def iter_jsonl(
    spec: str | os.PathLike, *, what: str = "a JSON object per line"
) -> Iterator[tuple[int, dict]]:
    """(1-based line number, object) for every non-blank line of a JSON-lines file.

    A line that is not valid JSON, or not an object, is a CmrkitError naming the file and line;
    ``what`` says what the file should hold (e.g. "a pool file").
    """
    for n, line in iter_lines(spec):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise CmrkitError(
                f"malformed JSON ({e.msg} at column {e.colno}); expected {what}",
                path=spec,
                where=f"line {n}",
            ) from None
        if not isinstance(obj, dict):
            raise CmrkitError(f"expected {what}", path=spec, where=f"line {n}")
        yield n, obj


def sha256_file(spec: str | os.PathLike) -> str:
    path, _ = split_zip_member(spec)
    if not path.is_file():
        raise CmrkitError("file not found; check the path", path=path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class GzipTextWriter:
    """A text writer producing a deterministic gzip (no file name, mtime 0).

    Text is buffered and compressed on a background thread (zlib releases the GIL), so
    building the lines and compressing them use both cores; the output bytes are the same as a
    plain ``gzip.GzipFile`` at the same level.
    """

    _CHUNK = 1 << 20

    def __init__(self, path: str | os.PathLike, compresslevel: int = 1):
        self._raw = open(path, "wb")
        self._gz = gzip.GzipFile(
            filename="", mode="wb", fileobj=self._raw, compresslevel=compresslevel, mtime=0
        )
        self._parts: list[str] = []
        self._size = 0
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=4)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            block = self._queue.get()
            if block is None:
                return
            if self._error is None:
                try:
                    self._gz.write(block)
                except BaseException as e:  # re-raised in the writing thread
                    self._error = e

    def write(self, text: str) -> int:
        self._parts.append(text)
        self._size += len(text)
        if self._size >= self._CHUNK:
            self._flush()
        return len(text)

    def _flush(self) -> None:
        if self._error is not None:
            raise self._error
        if self._parts:
            self._queue.put("".join(self._parts).encode("utf-8"))
            self._parts = []
            self._size = 0

    def close(self) -> None:
        try:
            self._flush()
        finally:
            self._queue.put(None)
            self._thread.join()
            self._gz.close()
            self._raw.close()
        if self._error is not None:
            raise self._error

    def __enter__(self) -> GzipTextWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def gzip_writer(path: str | os.PathLike, compresslevel: int = 1) -> GzipTextWriter:
    """A deterministic gzip text writer (see :class:`GzipTextWriter`)."""
    return GzipTextWriter(path, compresslevel)


class StagedOutputs:
    """Write a set of outputs under a temporary folder, then move them into place together.

    Nothing is visible at the final paths until :meth:`commit`; on error the staging folder is
    removed. Existing targets are refused unless ``force``.
    """

    def __init__(self, targets: list[Path], *, force: bool = False, anchor: Path | None = None):
        self.targets = [Path(t) for t in targets]
        if not force:
            existing = [t for t in self.targets if t.exists()]
            if existing:
                raise CmrkitError("already exists; pass --force to overwrite it", path=existing[0])
        base = anchor or self.targets[0].parent
        base.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=".cmrkit-tmp-", dir=base))

    def path(self, target: Path) -> Path:
        """The staging path for a target (same relative name, under the temporary folder)."""
        i = self.targets.index(Path(target))
        p = self.tmp / str(i) / Path(target).name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def commit(self) -> None:
        for i, target in enumerate(self.targets):
            staged = self.tmp / str(i) / target.name
            if not staged.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                if target.is_dir():
                    shutil.rmtree(target)
                else:
                    target.unlink()
            os.replace(staged, target)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> StagedOutputs:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


def _same_file(a: Path, b: Path) -> bool:
    """Equal bytes (files), or the same files with equal bytes (folders)."""
    if a.is_dir() and b.is_dir():
        names = sorted(p.relative_to(a) for p in a.rglob("*"))
        if names != sorted(p.relative_to(b) for p in b.rglob("*")):
            return False
        return all((a / n).is_dir() or _same_file(a / n, b / n) for n in names)
    if not (a.is_file() and b.is_file()) or a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


class RepeatableOutputs:
    """Staged outputs of a step whose outputs follow from its inputs and options alone.

    Run again, a step that writes exactly the files already there is up to date: nothing is
    moved and :attr:`up_to_date` is True (the command says so and exits 0). A target that exists
    with other content is refused unless ``force``; nothing is written then either.
    """

    def __init__(self, targets: list[Path], *, force: bool = False, anchor: Path | None = None):
        self.targets = [Path(t) for t in targets]
        self.force = force
        self.up_to_date = False
        self._staged = StagedOutputs(self.targets, force=True, anchor=anchor)

    def path(self, target: Path) -> Path:
        """The staging path for a target."""
        return self._staged.path(target)

    def __enter__(self) -> RepeatableOutputs:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self._staged.abort()
            return
        if not self.force:
            staged = {t: self._staged.tmp / str(i) / t.name for i, t in enumerate(self.targets)}
            existing = [t for t in self.targets if t.exists()]
            differ = [t for t in existing if not _same_file(staged[t], t)]
            if differ:
                self._staged.abort()
                raise CmrkitError(
                    "already exists with other content (made from other inputs or options); "
                    "pass --force to replace it",
                    path=differ[0],
                )
            if len(existing) == len(self.targets):
                self.up_to_date = True
                self._staged.abort()
                return
        self._staged.commit()
