"""The JVM's signal handlers kept across Ray's start and stop in this process.

The JVM (Lucene through Pyserini) handles SIGSEGV, SIGBUS, SIGFPE and SIGILL itself: they are
how compiled Java code meets null checks and safepoints. Ray's core worker replaces these
handlers with its crash reporter when it connects, and resets them to the default when it
disconnects; Java code run afterwards in the same process then dies of its first ordinary
SIGSEGV. Ray's start also sets its own Python handler for SIGTERM (``sys.exit``), which would
bypass cmrkit's handling of signals (:mod:`cmrkit.interrupts`). :func:`kept_signal_handlers`
saves the native handlers and the Python ones before and puts them back after.
"""

from __future__ import annotations

import ctypes
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_SIZE = 512  # larger than any platform's struct sigaction: saved and restored as opaque bytes
_PYTHON = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
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
    """Whatever runs inside leaves the process's native handlers of the JVM's signals, and the
    Python handlers of SIGINT, SIGTERM and SIGHUP, as they were (native ones: where
    ``sigaction`` is available; Python ones: in the main thread)."""
    libc = _libc()
    saved = {}
    for number in _SIGNALS if libc is not None else ():
        buffer = ctypes.create_string_buffer(_SIZE)
        if libc.sigaction(number, None, buffer) == 0:
            saved[number] = buffer
    python = {}
    if threading.current_thread() is threading.main_thread():
        python = {number: signal.getsignal(number) for number in _PYTHON}
    try:
        yield
    finally:
        for number, buffer in saved.items():
            libc.sigaction(number, buffer, None)
        for number, handler in python.items():
            if handler is not None:  # None: set outside Python, kept natively above
                signal.signal(number, handler)
