"""Writing outputs: staged beside their targets, put in place atomically, under locks."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import json
import logging
import os
import queue
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import cmrkit.interrupts as interrupts
from cmrkit.errors import CmrkitError, EnvironmentFault


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


# --- outputs: names, locks, staging, replacement --------------------------------------------
#
# Every output is written into a staging folder beside its target (same folder, so the final
# rename never crosses file systems) and put in place by rename once complete. An existing target
# is first renamed aside, then the new one renamed in, then the old one deleted: it is never
# half-deleted. Each target is locked while it is written (``.NAME.cmrkit-lock`` beside it, holding
# the writer's process id); a staging folder holds an ``owner`` file locked by its process, so
# one whose process died is recognised and cleaned (or its replacement finished) by the next
# command that writes in that folder.

STAGING_PREFIX = ".cmrkit-staging-"
LEGACY_STAGING_PREFIX = ".cmrkit-tmp-"
LOCK_SUFFIX = ".cmrkit-lock"
MARKER = ".cmrkit"
_OWNER = "owner"
_TARGETS = "targets.json"
_COMMITTING = "committing"
LOCK_WAIT = 30.0  # seconds a replacement waits for readers of its folder
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+=,-]{0,127}")

log = logging.getLogger("cmrkit")


def safe_name(name: str, what: str) -> str:
    """``name`` when it is safe as (part of) a file name: letters, digits and ``_ . + = , -``,
    not starting with a dot or dash, at most 128 characters; else a CmrkitError."""
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name) or ".." in name:
        raise CmrkitError(
            f"{what} {name!r} cannot be part of a file name: use letters, digits and _ . + = , - "
            "(not starting with '.' or '-', no '..', at most 128 characters)"
        )
    return name


def shown_path(path: str | os.PathLike) -> str:
    """A path as users know it: a path inside a staging folder shown as the output it becomes,
    a lock file as its folder."""
    parts = str(path).split("/")
    shown: list[str] = []
    for i, part in enumerate(parts):
        if part.startswith(STAGING_PREFIX) or (part.endswith(LOCK_SUFFIX) and i == len(parts) - 1):
            continue
        if part == "new" and i and parts[i - 1].startswith(STAGING_PREFIX):
            continue
        shown.append(part)
    return "/".join(shown) or ("/" if str(path).startswith("/") else ".")


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
    pid, _, rest = text.partition(" ")
    return (
        f"process {pid} ({rest})" if pid.isdigit() and rest else (f"process {pid}" if pid else "")
    )


def _me() -> str:
    program = os.path.basename(sys.argv[0]) or "python"
    words = ["cmrkit" if program == "__main__.py" else program, *sys.argv[1:]]
    command = " ".join(words)
    if len(command) > 100:
        command = command[:97] + "..."
    return f"{os.getpid()} {command}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n"


class OutputLock:
    """An exclusive lock on one output path (``.NAME.cmrkit-lock`` beside it, with the holder's
    process id and command). The kernel releases it when the process dies, however it dies; a
    lock file left behind is then recognised as stale and taken over."""

    def __init__(self, target: Path):
        self.target = Path(target)
        self.path = self.target.parent / f".{self.target.name}{LOCK_SUFFIX}"
        self.fd: int | None = None

    def acquire(self) -> None:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd) or "another process"
                os.close(fd)
                raise EnvironmentFault(
                    f"being written by {holder}; wait for it to finish or write elsewhere",
                    path=self.target,
                ) from None
            except OSError as e:
                os.close(fd)
                if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    log.warning(
                        f"{self.path.parent}: the file system has no locks; "
                        "two commands writing the same output are not detected there"
                    )
                    with contextlib.suppress(OSError):
                        os.unlink(self.path)
                    return
                raise
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if not same:  # its previous holder removed it meanwhile: lock the new one
                os.close(fd)
                continue
            previous = _holder(fd)
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, _me().encode("utf-8", "replace"), 0)  # a full disk fails here
            except BaseException as e:
                with contextlib.suppress(OSError):
                    os.unlink(self.path)  # ours while we hold it: never left behind
                os.close(fd)
                if isinstance(e, OSError) and e.filename is None:
                    raise OSError(e.errno, e.strerror, os.fspath(self.target)) from None
                raise
            if previous:
                log.warning(
                    f"{self.target}: took over the lock left by {previous}, which ended "
                    "without releasing it"
                )
            self.fd = fd
            return

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> OutputLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


SWAP_PREFIX = ".cmrkit-swap-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _swap_waiting(folder: Path) -> bool:
    """Whether a live process waits to replace an output in ``folder``."""
    try:
        names = [e.name for e in os.scandir(folder) if e.name.startswith(SWAP_PREFIX)]
    except OSError:
        return False
    pids = [n[len(SWAP_PREFIX) :] for n in names]
    return any(p.isdigit() and _alive(int(p)) for p in pids)


@contextlib.contextmanager
def _folder_lock(folder: Path, exclusive: bool, timeout: float = LOCK_WAIT) -> Iterator[None]:
    """A lock on a folder itself: shared for readers that open several files of an output in
    it, exclusive for the renames that replace an output in it. Waits (interruptibly) up to
    ``timeout`` seconds. A waiting replacement announces itself (``.cmrkit-swap-PID``), and new
    readers let it go first, so a stream of readers cannot starve it."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        yield
        return
    intent = folder / f"{SWAP_PREFIX}{os.getpid()}"
    try:
        end = time.monotonic() + timeout
        if exclusive:
            intent.touch()
        else:
            while _swap_waiting(folder) and time.monotonic() < end:
                time.sleep(0.01)
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > end:
                    raise EnvironmentFault(
                        f"still busy after {timeout:.0f} s (another cmrkit command is "
                        f"{'reading' if exclusive else 'replacing'} an output there); try again",
                        path=folder,
                    ) from None
                time.sleep(0.01)
            except OSError as e:
                if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                    break
                raise
        yield
    finally:
        if exclusive:
            with contextlib.suppress(OSError):
                intent.unlink()
        os.close(fd)


@contextlib.contextmanager
def reading(output: str | os.PathLike) -> Iterator[None]:
    """Read an output made of several files (an index) while no command swaps it: inside this
    block the output at that path is either the old one or the new one, never a mix."""
    with _folder_lock(Path(output).parent, exclusive=False):
        yield


# --- what kind of output a folder is ------------------------------------------------------
#
# A folder cmrkit writes carries the mark ``.cmrkit`` recording its kind, and ``--force`` (or a
# writer replacing its own output, as an index rebuilt) replaces a folder only with an output of
# the same kind: never a collection by a reader. A mark written before kinds were recorded (or no
# mark, for the kinds written before the mark) is read by the one file each kind has always
# held, its signature below (tests check them against their owners' constants); a folder that
# signatures do not tell apart is of unknown kind, and nothing replaces it.


@dataclass(frozen=True)
class OutputKind:
    """A kind of folder output: ``what`` it is, in words; ``signature``, the file every folder of
    this kind has held since before kinds were recorded."""

    what: str
    signature: str


KINDS: dict[str, OutputKind] = {
    "collection": OutputKind("a collection", "manifest.json"),
    "index": OutputKind("a Lucene index", "cmrkit-index.json"),
    "dense-encoding": OutputKind("a dense encoding", "cmrkit-dense.json"),
    "dense-model": OutputKind("a dense model", "cmrkit-model.json"),
    "reader": OutputKind("a reader", "cmrkit-reader.json"),
    "coref-model": OutputKind("a coreference model", "cmrkit-coref-model.json"),
    "beir": OutputKind("a BEIR export", "queries.jsonl"),
}
# a folder a writer naming no kind writes (only another such writer replaces it)
UNNAMED = "output"
_UNNAMED = OutputKind("a cmrkit output of no named kind", "")
# kinds recognised without a mark: those written before the mark existed
_BEFORE_MARKS = ("collection", "index", "dense-encoding")


def _read_json(path: Path) -> object:
    try:
        with open(path, encoding="utf-8") as f:
            return json.loads(f.read(1 << 20))
    except (OSError, ValueError, RecursionError):
        return None


def _has_signature(folder: Path, kind: str) -> bool:
    name = KINDS[kind].signature
    if kind == "collection":  # a manifest.json alone is too common a name
        manifest = _read_json(folder / name)
        return isinstance(manifest, dict) and "cmrkit_version" in manifest
    return (folder / name).is_file()


def output_kind(folder: str | os.PathLike) -> str | None:
    """What output ``folder`` is: the kind its mark records (a key of :data:`KINDS`, or
    ``UNNAMED``); for one written before kinds were recorded, the one kind whose signature it
    holds, else ``""`` (cmrkit wrote it, of unknown kind); None when cmrkit did not write it."""
    folder = Path(folder)
    marked = (folder / MARKER).is_file()
    if marked:
        mark = _read_json(folder / MARKER)
        kind = mark.get("kind") if isinstance(mark, dict) else None
        if isinstance(kind, str) and (kind in KINDS or kind == UNNAMED):
            return kind
    found = [k for k in (KINDS if marked else _BEFORE_MARKS) if _has_signature(folder, k)]
    if len(found) == 1:
        return found[0]
    return "" if marked or found else None


def is_own_output(folder: Path) -> bool:
    """Whether a folder was written by cmrkit (see :func:`output_kind`)."""
    return output_kind(folder) is not None


def _what(kind: str) -> str:
    return KINDS[kind].what if kind in KINDS else _UNNAMED.what


def _enclosing_output(path: Path) -> tuple[Path, str] | None:
    """The folder output of cmrkit's (and its kind) that ``path`` lies inside, if any (named as
    ``path`` names it)."""
    path = Path(path)
    folders = list(path.parents)
    if not path.is_absolute():
        folders += list(Path.cwd().parents)
    for folder in folders:
        kind = output_kind(folder)
        if kind is not None:
            return folder, kind
    return None


def check_replaceable(target: Path, kind: str | None) -> None:
    """Refuse (whatever ``--force`` says) to replace what exists at ``target`` with an output of
    another kind. ``kind``: the folder output written there (a key of :data:`KINDS`), or None
    for a file or a folder of no named kind. A folder is replaced only by a folder of its kind
    that cmrkit wrote, and a file inside a folder output (a collection's topics) not at all."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown output kind {kind!r}")
    if not os.path.lexists(target) or target.is_symlink():
        return
    if not stat.S_ISDIR(target.lstat().st_mode):
        if kind is not None:
            raise CmrkitError(f"is a file, not {_what(kind)}; choose another path", path=target)
        inside = _enclosing_output(target)
        if inside is not None:
            folder, found = inside
            what = _what(found) if found else "an output of cmrkit's"
            raise CmrkitError(
                f"is part of {what} ({shown_path(folder)}); --force never replaces a file "
                "inside another output: choose another path",
                path=target,
            )
        return
    wanted = _what(kind or UNNAMED)
    found = output_kind(target)
    if found is None:
        raise CmrkitError(
            "is a folder that cmrkit did not write; --force replaces only cmrkit's own "
            "outputs: move it away yourself or choose another path",
            path=target,
        )
    if found == "":
        raise CmrkitError(
            "is a folder an earlier cmrkit wrote without recording what it is (its files do "
            f"not say); --force replaces only {wanted}: remove it yourself if you mean to "
            "replace it, or choose another path",
            path=target,
        )
    if found != (kind or UNNAMED):
        raise CmrkitError(
            f"is {_what(found)}, not {wanted}; --force replaces only {wanted}: move it "
            "away yourself or choose another path",
            path=target,
        )


def _mark(folder: Path, kind: str) -> None:
    from cmrkit._version import __version__

    text = json.dumps(
        {"kind": kind, "written_by": "cmrkit", "version": __version__}, sort_keys=True
    )
    (folder / MARKER).write_text(text + "\n", encoding="utf-8")


def _size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.0f} kB"


def _clean_stale(parent: Path, held: set[str]) -> None:
    """Finish or remove the staging folders in ``parent`` whose process has died.

    A folder whose process died while putting its outputs in place has its replacement finished
    (its outputs were complete by then); any other is removed. ``held`` are target names whose
    locks this process holds already. Folders of older cmrkit versions are reported."""
    try:
        entries = list(os.scandir(parent))
    except FileNotFoundError:
        return
    for entry in entries:
        pid = entry.name[len(SWAP_PREFIX) :]
        if entry.name.startswith(SWAP_PREFIX) and pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
            continue
        if entry.name.startswith(LEGACY_STAGING_PREFIX) and entry.is_dir(follow_symlinks=False):
            log.warning(
                f"{entry.path}: staging folder of an interrupted run of an earlier cmrkit "
                f"({_megabytes(_size(Path(entry.path)))}); delete it"
            )
            continue
        if not entry.name.startswith(STAGING_PREFIX) or not entry.is_dir(follow_symlinks=False):
            continue
        stage = Path(entry.path)
        try:
            fd = os.open(stage / _OWNER, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            if time.time() - entry.stat(follow_symlinks=False).st_mtime < 60:
                continue  # a staging folder being set up right now
            fd = None
        locks: list[OutputLock] = []
        try:
            if fd is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # its process is alive
            owner = _holder(fd) if fd is not None else ""
            try:
                names = json.loads((stage / _TARGETS).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                names = []
            try:
                for name in names:
                    if name not in held:
                        lock = OutputLock(parent / name)
                        lock.acquire()
                        locks.append(lock)
            except EnvironmentFault:
                continue  # another live process writes one of its targets now
            size = _size(stage)
            finished = []
            if (stage / _COMMITTING).exists():
                for name in names:
                    new, old, target = stage / "new" / name, stage / "old" / name, parent / name
                    if os.path.lexists(new):
                        if os.path.lexists(target):
                            os.rename(target, old if not os.path.lexists(old) else stage / "trash")
                        os.rename(new, target)
                        finished.append(str(target))
                    elif os.path.lexists(old) and not os.path.lexists(target):
                        os.rename(old, target)
            shutil.rmtree(stage, ignore_errors=True)
            who = f" of {owner}" if owner else ""
            if finished:
                log.warning(f"finished the interrupted replacement of {', '.join(finished)}{who}")
            else:
                log.warning(
                    f"removed {stage.name} in {parent}, left by an interrupted run{who} "
                    f"({_megabytes(size)})"
                )
        finally:
            for lock in locks:
                lock.release()
            if fd is not None:
                os.close(fd)


def _remove_stage(stage: Path) -> None:
    """Delete a staging folder, its ``owner`` file last: a deletion cut short (the process
    killed) leaves a folder the next writer still recognises as stale and removes at once."""
    try:
        entries = list(os.scandir(stage))
    except OSError:
        return
    for entry in entries:
        if entry.name == _OWNER:
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
    shutil.rmtree(stage, ignore_errors=True)


class StagedOutputs:
    """Write a set of outputs beside their targets, then put them in place together.

    On creation each target is locked (another command writing it fails with one line naming
    it), checked (an existing target needs ``force``; a symbolic link is refused; a folder is
    replaced only when cmrkit wrote it) and the stale staging folders of dead processes in its
    folder are cleaned. Nothing is visible at the final paths until :meth:`commit`, which renames
    each existing target aside, renames the new one in and only then deletes the old one; on
    error (or an interrupt) the staging folders are removed and the targets stay as they were.
    ``anchor`` names the folder whose staging folder holds the scratch space :attr:`tmp`
    (default: the first target's folder). ``kinds`` names the kind (a key of :data:`KINDS`) of
    each folder output: recorded in its mark, and an existing output of another kind is refused,
    ``force`` or not (see :func:`check_replaceable`).
    """

    def __init__(
        self,
        targets: list[Path],
        *,
        force: bool = False,
        anchor: Path | None = None,
        kinds: Mapping[Path, str] | None = None,
    ):
        self.targets = [Path(t) for t in targets]
        self.kinds = {Path(t): k for t, k in (kinds or {}).items()}
        if not set(self.kinds) <= set(self.targets):
            raise ValueError("a kind is named for a path that is no output")
        if len({os.path.abspath(t) for t in self.targets}) != len(self.targets):
            raise CmrkitError(
                "the same path is named for two outputs; name different files",
                path=self.targets[0],
            )
        self.force = force
        self.existed = {t: os.path.lexists(t) for t in self.targets}
        self.committed = False
        self.committing = False
        self._locks: list[OutputLock] = []
        self._stages: dict[Path, Path] = {}
        self._owners: list[int] = []
        self._created: list[Path] = []
        folders = list(dict.fromkeys(t.parent for t in self.targets))
        scratch = Path(anchor) if anchor is not None else folders[0]
        try:
            for folder in dict.fromkeys([*folders, scratch]):
                self._make_folder(folder)
            for t in sorted(self.targets):
                lock = OutputLock(t)
                lock.acquire()
                self._locks.append(lock)
            for t in self.targets:
                self.existed[t] = os.path.lexists(t)
                self._check(t)
            for folder in dict.fromkeys([*folders, scratch]):
                names = [t.name for t in self.targets if t.parent == folder]
                _clean_stale(folder, set(names))
                self._stages[folder] = self._new_stage(folder, names)
        except BaseException:
            self._drop()
            raise
        self.tmp = self._stages[scratch]
        _active.append(self)

    def _make_folder(self, folder: Path) -> None:
        p = folder
        while not os.path.lexists(p) and p != p.parent:
            self._created.append(p)  # before the mkdir: those it made are removed if it fails
            p = p.parent
        folder.mkdir(parents=True, exist_ok=True)

    def _check(self, target: Path) -> None:
        if not os.path.lexists(target):
            return
        if target.is_symlink():
            raise CmrkitError(
                "is a symbolic link; cmrkit does not write through links: remove the link or "
                "name the real path",
                path=target,
            )
        st = target.lstat()
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            raise CmrkitError("is not a regular file; choose another path", path=target)
        check_replaceable(target, self.kinds.get(target))  # --force does not help there
        if not self.force:
            raise CmrkitError("already exists; pass --force to overwrite it", path=target)

    def _new_stage(self, folder: Path, names: list[str]) -> Path:
        stage = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=folder))
        try:
            fd = os.open(stage / _OWNER, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._owners.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.pwrite(fd, _me().encode("utf-8", "replace"), 0)
            (stage / _TARGETS).write_text(json.dumps(names), encoding="utf-8")
            (stage / "new").mkdir()
        except BaseException as e:
            _remove_stage(stage)  # a full disk fails here: the half-made folder goes too
            if isinstance(e, OSError) and e.filename is None:
                where = folder / names[0] if names else folder
                raise OSError(e.errno, e.strerror, os.fspath(where)) from None
            raise
        return stage

    def path(self, target: Path) -> Path:
        """The staging path for a target (same name, in the staging folder beside it)."""
        target = Path(target)
        if target not in self.existed:
            raise ValueError(f"{target} is not one of the outputs")
        return self._stages[target.parent] / "new" / target.name

    def commit(self) -> None:
        """Put every staged output in place (all or nothing against errors and interrupts);
        when it fails, the staged outputs are dropped and the targets stay as they were."""
        if self.committed:
            return
        try:
            self._commit()
        finally:
            self._drop()

    def _commit(self) -> None:
        staged = [(t, self.path(t)) for t in self.targets if os.path.lexists(self.path(t))]
        for t, s in staged:
            if not os.path.lexists(t):
                continue
            if not self.force:
                raise CmrkitError(
                    "was created by another program while this command ran; pass --force to "
                    "overwrite it",
                    path=t,
                )
            if t.is_dir() != s.is_dir():
                kind = "folder" if t.is_dir() else "file"
                raise CmrkitError(
                    f"is a {kind}; cmrkit would replace it with a "
                    f"{'file' if kind == 'folder' else 'folder'}; choose another "
                    "path",
                    path=t,
                )
        for t, s in staged:
            if s.is_dir() and not s.is_symlink():
                _mark(s, self.kinds.get(t, UNNAMED))
        folders = sorted({t.parent for t, _ in staged})
        with contextlib.ExitStack() as stack:
            for folder in folders:
                stack.enter_context(_folder_lock(folder, exclusive=True))
            with interrupts.critical():
                self.committing = True
                for folder in folders:
                    (self._stages[folder] / _COMMITTING).touch()
                done: list[tuple[Path, Path, Path | None]] = []
                try:
                    for t, s in staged:
                        old = None
                        if os.path.lexists(t):
                            old = self._stages[t.parent] / "old" / t.name
                            old.parent.mkdir(exist_ok=True)
                            os.rename(t, old)
                        done.append((t, s, old))
                        os.rename(s, t)
                except BaseException:
                    self._undo(done)
                    self.committing = False
                    raise
                self.committed = True
                self.committing = False  # all in place: what is left in staging is only debris
                _written.extend(t for t, _ in staged)

    @staticmethod
    def _undo(done: list[tuple[Path, Path, Path | None]]) -> None:
        for t, s, old in reversed(done):
            with contextlib.suppress(OSError):
                if not os.path.lexists(s) and os.path.lexists(t):
                    os.rename(t, s)
                if old is not None and os.path.lexists(old):
                    os.rename(old, t)

    def abort(self) -> None:
        """Drop the staged outputs; the targets stay as they were."""
        if not self.committed:
            self._drop()

    def _drop(self) -> None:
        # a signal waits for the clean-up (deleting a replaced collection takes a moment): an
        # interrupt never leaves a half-deleted staging folder, its locks, or a line saying
        # both "wrote" and "kept"
        with interrupts.critical():
            self._release()

    def _release(self) -> None:
        for stage in self._stages.values():
            old = stage / "old"
            if not self.committed and old.is_dir() and any(old.iterdir()):
                log.warning(f"could not put back the previous version of an output; it is in {old}")
                continue
            _remove_stage(stage)
        for fd in self._owners:
            os.close(fd)
        self._owners = []
        for lock in self._locks:
            lock.release()
        self._locks = []
        if not self.committed:
            for folder in self._created:
                with contextlib.suppress(OSError):
                    folder.rmdir()
        self._created = []
        if self in _active:
            _active.remove(self)
            if not self.committed:
                _dropped.extend((t, self.existed[t]) for t in self.targets)

    def emergency(self) -> None:
        """Drop the staging folders from another thread while the process ends; an output half
        renamed into place is left for the next command to finish."""
        if self.committing:
            return
        for stage in list(self._stages.values()):
            _remove_stage(stage)
        for lock in list(self._locks):
            with contextlib.suppress(OSError):
                os.unlink(lock.path)
        if not self.committed:
            for folder in list(self._created):  # deepest first; only when left empty
                with contextlib.suppress(OSError):
                    folder.rmdir()

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
        # cmrkit's mark is added when a folder is put in place: not part of the comparison
        names = sorted(p.relative_to(a) for p in a.rglob("*") if p.name != MARKER)
        if names != sorted(p.relative_to(b) for p in b.rglob("*") if p.name != MARKER):
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

    def __init__(
        self,
        targets: list[Path],
        *,
        force: bool = False,
        anchor: Path | None = None,
        kinds: Mapping[Path, str] | None = None,
    ):
        self.targets = [Path(t) for t in targets]
        self.force = force
        self.up_to_date = False
        self._staged = StagedOutputs(self.targets, force=True, anchor=anchor, kinds=kinds)

    def path(self, target: Path) -> Path:
        """The staging path for a target."""
        return self._staged.path(target)

    def __enter__(self) -> RepeatableOutputs:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self._staged.abort()
            return
        try:
            if not self.force:
                staged = {t: self._staged.path(t) for t in self.targets}
                existing = [t for t in self.targets if t.exists()]
                differ = [t for t in existing if not _same_file(staged[t], t)]
                if differ:
                    raise CmrkitError(
                        "already exists with other content (made from other inputs or "
                        "options); pass --force to replace it",
                        path=differ[0],
                    )
                if len(existing) == len(self.targets):
                    self.up_to_date = True
                    self._staged.abort()
                    return
            self._staged.commit()
        except BaseException:  # the comparison failing too: nothing staged or locked stays
            self._staged.abort()
            raise


_active: list[StagedOutputs] = []  # being written by this process
_written: list[Path] = []  # put in place by this command
_dropped: list[tuple[Path, bool]] = []  # given up by this command (target, whether it existed)


def _names(paths: list[Path]) -> str:
    shown = [str(p) for p in paths[:3]]
    more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
    return ", ".join(shown) + more


class _Outputs:
    """What the interrupt line says about outputs (see :mod:`cmrkit.interrupts`)."""

    def reset(self) -> None:
        _written.clear()
        _dropped.clear()

    def summary(self) -> str:
        parts = []
        if _written:
            parts.append(f"wrote {_names(_written)}")
        pending = [
            *_dropped,
            *((t, s.existed[t]) for s in _active if not s.committed for t in s.targets),
        ]
        kept = [t for t, existed in pending if existed]
        new = [t for t, existed in pending if not existed]
        if kept:
            parts.append(f"kept {_names(kept)} as {'it was' if len(kept) == 1 else 'they were'}")
        if new:
            parts.append(f"did not write {_names(new)}")
        if not parts:
            return ""
        if not _written:
            parts[0] = "nothing written: " + parts[0]
        return "; ".join(parts)

    def emergency(self) -> None:
        for s in list(_active):
            s.emergency()


interrupts.watch(_Outputs())


def usual_modes(folder: str | os.PathLike) -> None:
    """Give every file under ``folder`` the mode any other output gets (0644 under the usual
    umask): libraries that write through a private temporary file (safetensors: 0600) leave
    files only their owner can read."""
    mask = os.umask(0)
    os.umask(mask)
    for path in Path(folder).rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(0o666 & ~mask)


def write_file(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (a ``.tmp`` beside it, renamed in; removed
    when writing fails, so a full disk is not kept full by it). An operating-system error names
    ``path``."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.errno is not None and e.filename is None:
            raise OSError(e.errno, e.strerror, os.fspath(path)) from None  # name the file
        raise
