"""Ctrl-C, SIGTERM and SIGHUP: every command ends within about two seconds, saying what was kept.

A signal normally raises :class:`Interrupted` in the main thread, which unwinds the command
(staged outputs are dropped, existing outputs stay as they were) up to the command line, which
prints one line and exits with 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM).

The main thread cannot take a signal while it waits inside Java (a Lucene search or indexing
run) or any other long call into native code. A watchdog thread, woken through the signal
module's wakeup file descriptor, covers that case: when the main thread has not taken the
signal within :data:`GRACE` seconds, or the process still runs :data:`DEADLINE` seconds after
it, the watchdog drops the staged outputs itself, prints the line and ends the process. A second
signal ends it at once. The watchdog never interrupts the few renames that put finished outputs
in place (:func:`critical`): a signal arriving then waits for them to finish.

This module only knows signals; what was written and what was kept comes from the watchers
registered with :func:`watch` (``cmrkit.fileio`` registers the outputs it stages).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, Protocol

GRACE = 1.0
DEADLINE = 2.0
SIGNALS: dict[int, str] = {
    signal.SIGINT: "Ctrl-C (SIGINT)",
    signal.SIGTERM: "SIGTERM",
    signal.SIGHUP: "SIGHUP",
}


class Interrupted(BaseException):
    """A signal asked the command to stop (a BaseException, so ``except Exception`` passes it)."""

    def __init__(self, signum: int):
        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(SIGNALS.get(signum, f"signal {signum}"))


class Watcher(Protocol):
    """What the interrupt line reports, and what to drop when the process must end at once."""

    def reset(self) -> None:
        """Forget what earlier commands of this process did."""

    def summary(self) -> str:
        """What was written and what was kept, in a few words."""

    def emergency(self) -> None:
        """Drop unfinished work before the process ends without unwinding (any thread)."""


_watchers: list[Watcher] = []


def watch(watcher: Watcher, *, first: bool = False) -> None:
    """Register a watcher (once per watcher); ``first`` puts it before those registered so far
    (its emergency runs before theirs: the processes that write outputs stop before the staged
    outputs are dropped)."""
    if watcher not in _watchers:
        _watchers.insert(0 if first else len(_watchers), watcher)


def reset() -> None:
    """Start a new command: the watchers forget what earlier commands of this process did."""
    for w in _watchers:
        w.reset()


class _State:
    def __init__(self) -> None:
        self.depth = 0  # nesting of critical sections
        self.pending: int | None = None  # a signal held back by a critical section
        self.first: int | None = None
        self.taken = threading.Event()  # the main thread has seen the signal
        self.reported = False
        self.ending = threading.Lock()
        self.err_fd = -1


_state: _State | None = None


def line(signum: int) -> str:
    """The one line printed when a signal ends a command."""
    what = "; ".join(s for s in (w.summary() for w in _watchers) if s) or "nothing was written"
    return f"interrupted by {SIGNALS.get(signum, f'signal {signum}')}: {what}"


def report(error: Interrupted) -> None:
    """Print the interrupt line for ``error`` on stderr (once)."""
    st = _state
    if st is not None:
        if st.reported:
            return
        st.reported = True
    sys.stderr.flush()
    print(line(error.signum), file=sys.stderr, flush=True)


def behind(error: BaseException) -> Interrupted | None:
    """The interrupt behind an unexpected error, if one is: compiled code that a signal's
    exception passes through may hand it on wrapped (Ray's ``CoreWorker.wait``: "SystemError:
    ... returned a result with an exception set"), or lose it once a signal was taken."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        if isinstance(e, Interrupted):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    st = _state
    if st is not None and st.first is not None:
        return Interrupted(st.first)
    return None


def taken(signum: int) -> None:
    """Called from a command's own handler for a signal it stops on by itself (a server that
    finishes the requests in flight): the command then has :data:`DEADLINE` seconds, as for a
    signal the main thread took, and ends with 128 + ``signum`` by raising
    ``Interrupted(signum)``; a second signal still ends the process at once."""
    st = _state
    if st is not None:
        if st.first is None:
            st.first = signum
        st.taken.set()


def _end_now(signum: int) -> None:
    """End the process without unwinding: drop staged work, print the line, exit."""
    st = _state
    if st is None or not st.ending.acquire(blocking=False):
        return
    for w in list(_watchers):
        try:
            w.emergency()
        except Exception:  # the process ends anyway; what is left is cleaned by the next run
            pass
    text = "" if st.reported else line(signum) + "\n"
    st.reported = True
    try:
        if os.isatty(st.err_fd):
            text = "\r\x1b[?25h" + text  # a progress bar may have hidden the cursor
        os.write(st.err_fd, text.encode("utf-8", "replace"))
    except OSError:
        pass
    os._exit(128 + signum)


def give_up(message: str, code: int) -> None:
    """End the process now from any thread, as the watchdog does (staged work dropped by the
    watchers), printing ``error: message``: for a main thread stuck in native code past a
    deadline (a Ray cluster that never answers)."""
    st = _state
    for w in list(_watchers):
        try:
            w.emergency()
        except Exception:  # the process ends anyway
            pass
    fd = st.err_fd if st is not None else 2
    try:
        os.write(fd, f"error: {message}\n".encode("utf-8", "replace"))
    except OSError:
        pass
    os._exit(code)


def _handler(signum: int, frame: object) -> None:
    st = _state
    if st is None:
        raise Interrupted(signum)
    st.taken.set()
    if st.first is not None:
        _end_now(st.first)
    st.first = signum
    if st.depth:
        st.pending = signum
        return
    raise Interrupted(signum)


def _watchdog(read_fd: int) -> None:
    st = _state
    started: float | None = None
    signum = 0
    while True:
        timeout = None
        if started is not None:
            limit = DEADLINE if st.taken.is_set() else GRACE
            timeout = max(0.0, started + limit - time.monotonic())
        ready, _, _ = select.select([read_fd], [], [], timeout)
        if ready:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:
                return
            for b in data:
                if b not in SIGNALS:
                    continue
                if started is None:
                    started, signum = time.monotonic(), b
                else:
                    _end_now(signum)
        elif started is not None:
            limit = DEADLINE if st.taken.is_set() else GRACE
            if time.monotonic() >= started + limit:
                _end_now(signum)


def _unraisable(args: Any) -> None:
    """``sys.unraisablehook`` while commands are handled: a signal taken inside code whose
    exceptions Python prints and drops (a weakref callback such as importlib's module-lock
    cleanup, a ``__del__``) raised :class:`Interrupted` there, and the command went on. No
    traceback for it: the signal counts as taken, so the watchdog ends the process after
    :data:`DEADLINE` seconds with the one line if it has not ended by then (a command that was
    about to finish finishes), and a second signal ends it at once. Anything else goes to the
    hook that was there before."""
    if isinstance(args.exc_value, Interrupted) and _state is not None:
        return
    _previous_unraisable(args)


_previous_unraisable = sys.unraisablehook


@contextlib.contextmanager
def handling() -> Iterator[None]:
    """Install the handlers and the watchdog for the duration of a command (main thread only;
    nested use is a no-op). After a signal, handlers and watchdog stay until the process ends,
    so a hang on the way out still ends at the deadline and a further signal ends it at once."""
    global _state
    if _state is not None or threading.current_thread() is not threading.main_thread():
        yield
        return
    reset()
    st = _State()
    st.err_fd = os.dup(2)
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    _state = st
    # a signal ignored by whoever started us (nohup, a background job) stays ignored
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for s, h in previous.items():
        if h is not signal.SIG_IGN:
            signal.signal(s, _handler)
    global _previous_unraisable
    _previous_unraisable, sys.unraisablehook = sys.unraisablehook, _unraisable
    old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    dog = threading.Thread(target=_watchdog, args=(read_fd,), name="cmrkit-watchdog", daemon=True)
    dog.start()
    try:
        yield
    finally:
        if st.first is None:
            signal.set_wakeup_fd(old_wakeup)
            sys.unraisablehook = _previous_unraisable
            for s, h in previous.items():
                if h is not None:
                    signal.signal(s, h)
            os.close(write_fd)  # the watchdog reads end-of-file and returns
            dog.join()
            os.close(read_fd)
            os.close(st.err_fd)
            _state = None


@contextlib.contextmanager
def critical() -> Iterator[None]:
    """A section a signal must not split (renames that put outputs in place, fd swaps): a signal
    arriving inside it is raised when the outermost section ends."""
    st = _state
    if st is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    st.depth += 1
    try:
        yield
    finally:
        st.depth -= 1
        if st.depth == 0 and st.pending is not None:
            signum, st.pending = st.pending, None
            raise Interrupted(signum)
