"""Opening inputs (plain, .gz, or a member of a .zip) and writing outputs atomically."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import shutil
import tempfile
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


def read_text(spec: str | os.PathLike) -> str:
    """The whole text of an input; a truncated or corrupt gzip is a CmrkitError."""
    try:
        with open_text(spec) as f:
            return f.read()
    except (EOFError, gzip.BadGzipFile, zlib.error, zipfile.BadZipFile) as e:
        raise CmrkitError(
            f"corrupt or truncated compressed file ({e}); download it again", path=spec
        ) from e
    except UnicodeDecodeError as e:
        raise CmrkitError(f"not UTF-8 text (byte {e.start}); convert it to UTF-8", path=spec) from e


def iter_lines(spec: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without newline) of an input, streaming."""
    try:
        with open_text(spec) as f:
            for n, line in enumerate(f, 1):
                yield n, line.rstrip("\n").rstrip("\r")
    except (EOFError, gzip.BadGzipFile, zlib.error, zipfile.BadZipFile) as e:
        raise CmrkitError(
            f"corrupt or truncated compressed file ({e}); download it again", path=spec
        ) from e
    except UnicodeDecodeError as e:
        raise CmrkitError(f"not UTF-8 text (byte {e.start}); convert it to UTF-8", path=spec) from e


def sha256_file(spec: str | os.PathLike) -> str:
    path, _ = split_zip_member(spec)
    if not path.is_file():
        raise CmrkitError("file not found; check the path", path=path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def gzip_writer(path: str | os.PathLike, compresslevel: int = 6) -> IO[str]:
    """A text writer producing a deterministic gzip (no file name, mtime 0)."""
    raw = open(path, "wb")
    gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=compresslevel, mtime=0)
    writer = io.TextIOWrapper(gz, encoding="utf-8", newline="\n")
    # closing the wrapper closes the GzipFile, which does not close a fileobj it was given
    orig_close = writer.close

    def close() -> None:
        orig_close()
        raw.close()

    writer.close = close  # type: ignore[method-assign]
    return writer


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
