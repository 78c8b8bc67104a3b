"""Opening inputs: plain, .gz, or a member of a .zip; decoding them, naming the bad line."""

from __future__ import annotations

import contextlib
import csv
import gzip
import hashlib
import io
import json
import os
import sys
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from cmrkit.errors import CmrkitError
from cmrkit.escaping import csv_value


def split_zip_member(spec: str | os.PathLike) -> tuple[Path, str | None]:
    """`archive.zip::member/path.json` or `archive.zip` (single member) -> (archive, member)."""
    s = str(spec)
    if "::" in s:
        archive, member = s.split("::", 1)
        return Path(archive), member
    return Path(s), None


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


MAX_NAMESAKES = 10_000  # names of a folder compared with a missing one, at most


def near_namesake(path: str | os.PathLike) -> Path | None:
    """An existing path whose missing parts each differ by a letter or two from ``path``'s
    (``runs/sample/bm25.tset.trec`` -> ``runs/sample/bm25.test.trec``, ``run/...`` ->
    ``runs/...``), written as ``path`` is (relative stays relative); None when there is none
    or ``path`` exists."""
    import difflib

    given = Path(path)
    if given.exists():
        return None
    parts = given.parts
    found = Path(parts[0]) if given.is_absolute() else Path()
    for part in parts[1:] if given.is_absolute() else parts:
        step = found / part
        if not step.exists():
            try:
                with os.scandir(found) as entries:
                    names = [e.name for _, e in zip(range(MAX_NAMESAKES), entries, strict=False)]
            except OSError:
                return None
            close = difflib.get_close_matches(part, names, n=1, cutoff=0.8)
            if not close:
                return None
            step = found / close[0]
        found = step
    return found if found.exists() and found != given else None


def missing_file(path: str | os.PathLike) -> CmrkitError:
    """The one line for an input that does not exist, naming its near namesake if one
    exists (did you mean ...)."""
    near = near_namesake(path)
    hint = f" (did you mean {str(near)!r}?)" if near is not None else ""
    return CmrkitError(f"file not found{hint}; check the path", path=path)


@contextlib.contextmanager
def open_binary(spec: str | os.PathLike) -> Iterator[IO[bytes]]:
    """Open a plain, gzipped or zipped (``archive.zip::member``) file for reading its bytes
    (gzip undone)."""
    path, member = split_zip_member(spec)
    if not path.exists():
        raise missing_file(path)
    if path.is_dir():
        raise CmrkitError("is a folder, expected a file; name a file", path=path)
    if path.suffix == ".zip" or member is not None:
        name = _zip_member(path, member)
        with zipfile.ZipFile(path) as zf, zf.open(name) as raw:
            if name.endswith(".gz"):
                with gzip.GzipFile(fileobj=raw) as inner:
                    yield inner
            else:
                yield raw
        return
    with open(path, "rb") as f:
        magic = f.read(2)
        f.seek(0)
        if magic == b"\x1f\x8b":
            with gzip.GzipFile(fileobj=f) as inner:
                yield inner
        else:
            yield f


@contextlib.contextmanager
def open_text(spec: str | os.PathLike) -> Iterator[IO[str]]:
    """Open a plain, gzipped or zipped (``archive.zip::member``) text file for reading as UTF-8.

    A byte-order mark at the start is accepted as such (never part of the first line's text).
    """
    with open_binary(spec) as raw:
        f = io.TextIOWrapper(raw, encoding="utf-8-sig")
        try:
            yield f
        finally:
            f.detach()


def _undecodable_line(spec: str | os.PathLike) -> int | None:
    """The number of the first line that is not UTF-8 (None when it cannot be told)."""
    try:
        with open_binary(spec) as f:
            for n, raw in enumerate(f, 1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError:
                    return n
    except Exception:  # the caller already reports the decoding error
        return None
    return None


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
        n = _undecodable_line(spec)
        hint = "UTF-16 text" if e.object[:2] in (b"\xff\xfe", b"\xfe\xff") else "not UTF-8 text"
        raise CmrkitError(
            f"{hint} (byte 0x{e.object[e.start]:02x}); convert the file to UTF-8",
            path=spec,
            where=None if n is None else f"line {n}",
        ) from None


def read_text(spec: str | os.PathLike) -> str:
    """The whole text of an input; a truncated or corrupt gzip is a CmrkitError."""
    with _readable(spec), open_text(spec) as f:
        return f.read()


def iter_lines(spec: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without newline) of an input, streaming."""
    with _readable(spec), open_text(spec) as f:
        for n, line in enumerate(f, 1):
            yield n, line.rstrip("\n").rstrip("\r")


def parse_json(
    text: str, *, path: object = None, where: str | None = None, what: str = "JSON"
) -> Any:
    """Parse JSON text; malformed JSON, or nesting deeper than the interpreter's recursion
    limit (about 1000 levels), is a CmrkitError naming ``path`` and ``where``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        at = f"line {e.lineno} column {e.colno}" if where is None else f"column {e.colno}"
        raise CmrkitError(
            f"malformed JSON ({e.msg} at {at}); expected {what}", path=path, where=where
        ) from None
    except RecursionError:
        raise CmrkitError(
            f"JSON nested more than about {sys.getrecursionlimit()} levels deep; expected {what}",
            path=path,
            where=where,
        ) from None


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
        obj = parse_json(line, path=spec, where=f"line {n}", what=what)
        if not isinstance(obj, dict):
            raise CmrkitError(f"expected {what}", path=spec, where=f"line {n}")
        yield n, obj


def sha256_file(spec: str | os.PathLike) -> str:
    path, _ = split_zip_member(spec)
    if path.is_dir():
        raise CmrkitError("is a folder, expected a file; name a file", path=path)
    if not path.is_file():
        raise missing_file(path)
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def regular_files(paths: Iterable[Path]) -> list[Path]:
    """The regular files among ``paths`` (symbolic links to them included), sorted: what a
    command scanning a folder may open. A FIFO, device or socket named like an input would
    block the scan for ever, or read something else entirely."""
    return sorted(p for p in paths if p.is_file())


def read_csv_rows(
    path: str | os.PathLike, *, empty: str, what: str
) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """The header and the non-blank rows (line number, {column: text}) of a CSV file with a header
    line (judgments, labels); ``empty`` says what a blank file lacks, ``what`` what its rows are.

    Cells are read back as :func:`cmrkit.escaping.csv_value` (a spreadsheet-safe apostrophe
    removed); a duplicated column, a field longer than the csv module's limit or malformed
    quoting is an error naming the line."""
    text = read_text(path)
    if not text.strip():
        raise CmrkitError(empty, path=path)
    # strict: a quote left open is an error where it opened, not a field swallowing the rest
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows = []
    start = 1  # the line the record being read starts on (a quoted field may span lines)
    try:
        header = [h.strip() for h in next(reader)]
        repeated = sorted(h for h, n in Counter(header).items() if n > 1 and h)
        if repeated:
            raise CmrkitError(
                f"column {repeated[0]!r} appears more than once in the header; keep one",
                path=path,
                where="line 1",
            )
        start = reader.line_num + 1
        for values in reader:
            if len(values) > len(header):
                raise CmrkitError(
                    f"more fields than the {len(header)} header columns",
                    path=path,
                    where=f"line {start}",
                )
            if any(v.strip() for v in values):
                values += [""] * (len(header) - len(values))
                rows.append((start, {k: csv_value(v) for k, v in zip(header, values, strict=True)}))
            start = reader.line_num + 1
    except csv.Error as e:
        if "end of data" in str(e) or reader.line_num > start:
            # the record starting at `start` ran on: a quote opened there is never closed
            cause = (
                "a quoted field opened on this line is never closed (it runs to "
                + ("the end of the file" if "end of data" in str(e) else f"line {reader.line_num}")
                + ")"
            )
            raise CmrkitError(
                f"malformed CSV: {cause}; check the quoting", path=path, where=f"line {start}"
            ) from None
        raise CmrkitError(
            f"malformed CSV ({e}); check the quoting, or split a field longer than "
            f"{csv.field_size_limit():,} characters",
            path=path,
            where=f"line {reader.line_num}",
        ) from None
    if not rows:
        raise CmrkitError(f"no {what} in the file (only a header line)", path=path)
    return header, rows
