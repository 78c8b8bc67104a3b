"""The one exception type users see: a message that names the file, record and field."""

from __future__ import annotations


class CmrkitError(Exception):
    """A user-facing error: printed as one line by the CLI, which then exits with code 2."""

    exit_code = 2

    def __init__(self, message: str, *, path: object | None = None, where: str | None = None):
        parts = []
        if path is not None:
            parts.append(str(path))
        if where:
            parts.append(where)
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class EnvironmentFault(CmrkitError):
    """The environment, not the input, is at fault (a full disk, a busy output): exit code 1."""

    exit_code = 1


def check_range(value: float, low: float, high: float, what: str) -> None:
    """Refuse a number outside ``low..high`` (NaN included) with one line naming ``what``."""
    if not low <= value <= high:
        raise CmrkitError(f"{what} must lie in {low:g}..{high:g}, got {value}")
