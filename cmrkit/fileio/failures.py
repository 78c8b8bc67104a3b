"""The file system saying no: one line (path, cause, what to do) and the exit code."""

from __future__ import annotations

import errno
import os
import re

from cmrkit.fileio.outputs import _active, _dropped, _names, _written, shown_path

# --- the file system saying no --------------------------------------------------------------

# errno -> (what happened, what to do, exit code); 1 where the environment is at fault
_OS_ERRORS: dict[int, tuple[str, str, int]] = {
    errno.ENOSPC: ("no space left on the device", "free some space and rerun", 1),
    errno.EDQUOT: ("disk quota exceeded", "free some space and rerun", 1),
    errno.EFBIG: ("file too large for this file system or limit", "write elsewhere", 1),
    errno.EIO: ("input/output error", "check the disk", 1),
    errno.ENOMEM: ("out of memory", "free memory and rerun", 1),
    errno.EMFILE: ("too many open files", "raise the limit (ulimit -n)", 1),
    errno.ENFILE: ("too many open files in the system", "close other programs", 1),
    errno.EACCES: ("permission denied", "choose a path you may use", 2),
    errno.EPERM: ("operation not permitted", "choose a path you may use", 2),
    errno.EROFS: ("read-only file system", "write to a writable folder", 2),
    errno.ENOENT: ("no such file or folder", "check the path", 2),
    errno.ENOTDIR: ("a part of the path is not a folder", "check the path", 2),
    errno.EISDIR: ("is a folder, expected a file", "name a file", 2),
    errno.ELOOP: ("too many levels of symbolic links", "check the links on the path", 2),
    errno.ENAMETOOLONG: ("file name too long", "choose a shorter name", 2),
    errno.EEXIST: ("already exists", "choose another path", 2),
    errno.ENOTEMPTY: ("folder not empty", "choose another path", 2),
    errno.EXDEV: ("cannot move across file systems", "keep outputs on one file system", 2),
}


def describe_os_error(error: OSError) -> tuple[str, int]:
    """One line for an operating-system error (path, cause, what to do) and the exit code."""
    what, todo, code = _OS_ERRORS.get(
        error.errno or 0, (error.strerror or str(error), "check the path and the disk", 1)
    )
    if error.filename is not None:
        where = shown_path(os.fsdecode(error.filename))
        if error.filename2 is not None:
            where += f" -> {shown_path(os.fsdecode(error.filename2))}"
    else:
        pending = [t for s in _active for t in s.targets] + [t for t, _ in _dropped]
        where = f"writing {_names(pending)}" if pending else ""
    nothing = "; nothing was written" if not _written else ""
    prefix = f"{where}: " if where else ""
    return f"{prefix}{what}{nothing}; {todo}", code


# errno strings as other libraries' errors carry them (Rust's "(os error 28)", C's strerror)
_FOREIGN_ERRNO = re.compile(r"\(os error (\d+)\)|(No space left on device|Disk quota exceeded)")


def as_os_error(error: BaseException, path: str | os.PathLike) -> OSError | None:
    """An operating-system error hidden in another library's exception (safetensors, numpy's
    ``tofile``: "N requested and M written", which is a full disk), as an OSError naming
    ``path``; None when ``error`` says nothing of the kind."""
    if isinstance(error, OSError) and error.errno is not None:
        if error.filename is None:
            return OSError(error.errno, error.strerror or str(error), os.fspath(path))
        return error
    text = str(error)
    match = _FOREIGN_ERRNO.search(text)
    if match:
        number = int(match.group(1)) if match.group(1) else errno.ENOSPC
        if match.group(2) == "Disk quota exceeded":
            number = errno.EDQUOT
        return OSError(number, os.strerror(number), os.fspath(path))
    if isinstance(error, OSError) and re.search(r"\d+ requested and \d+ written", text):
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(path))
    return None
