"""The JVM's signal handlers kept across Ray's start and stop in this process.

The JVM (Lucene through Pyserini) handles SIGSEGV, SIGBUS, SIGFPE and SIGILL itself: they are
how compiled Java code meets null checks and safepoints. Ray's core worker replaces these
handlers with its crash reporter when it connects, and resets them to the default when it
disconnects; Java code run afterwards in the same process then dies of its first ordinary
SIGSEGV. :func:`kept_signal_handlers` saves the native handlers before and puts them back after.
"""

from __future__ import annotations

import ctypes
import signal
from collections.abc import Iterator
from contextlib import contextmanager

_SIZE = 512  # larger than any platform's struct sigaction: saved and restored as opaque bytes
_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGTRAP", "SIGABRT", "SIGTERM")
    if hasattr(signal, name)
)


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.sigaction  # noqa: B018 (absent on platforms without POSIX signals)
    except (OSError, AttributeError):
        return None
    return libc


@contextmanager
def kept_signal_handlers() -> Iterator[None]:
    """Whatever runs inside leaves the process's native handlers of the JVM's signals as they
    were (nothing is done where ``sigaction`` is not available)."""
    libc = _libc()
    if libc is None:
        yield
        return
    saved = {}
    for number in _SIGNALS:
        buffer = ctypes.create_string_buffer(_SIZE)
        if libc.sigaction(number, None, buffer) == 0:
            saved[number] = buffer
    try:
        yield
    finally:
        for number, buffer in saved.items():
            libc.sigaction(number, buffer, None)
