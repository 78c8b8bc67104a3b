"""Signals sent from defined points of indexing, for the interrupt tests (unset in normal use).

``CMRKIT_TEST_SIGNAL_AT=POINT[,SIGNAL[,group]]`` makes the process send itself ``SIGNAL`` (a
name such as ``SIGTERM``; default ``SIGINT``), or with ``group`` its whole process group as a
terminal's Ctrl-C does, the first time the index build reaches ``POINT``:

- ``ner``: spaCy has recognised its first batch of texts (in this process) or its first worker
  task (while the other workers still recognise);
- ``shards``: the units are written for Lucene, Lucene not started yet;
- ``lucene``: Lucene is indexing (its ``write.lock`` is in the new index), the main thread
  inside Java;
- ``manifest``: the index and its manifest are written, not yet in place.

A test then interrupts the build for certain at each point, however fast the machine, instead
of guessing a delay from a timing. The variable is dropped once the signal is sent (workers
started later never see it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

ENV = "CMRKIT_TEST_SIGNAL_AT"
POINTS = ("ner", "shards", "lucene", "manifest")


def _wanted(point: str) -> tuple[int, bool] | None:
    """(signal, to the group) when the variable names ``point``, else None."""
    spec = os.environ.get(ENV, "")
    if not spec:
        return None
    name, *rest = [x.strip() for x in spec.split(",")]
    if name != point:
        return None
    signum = getattr(signal, rest[0]) if rest and rest[0] else signal.SIGINT
    return int(signum), len(rest) > 1 and rest[1] == "group"


def _send(signum: int, group: bool) -> None:
    os.environ.pop(ENV, None)
    if group:
        os.killpg(os.getpgrp(), signum)
    else:
        os.kill(os.getpid(), signum)


def reached(point: str) -> None:
    """The build is at ``point``: send the signal if the variable asks for it here."""
    wanted = _wanted(point)
    if wanted is not None:
        _send(*wanted)


@contextlib.contextmanager
def once_exists(point: str, path: Path) -> Iterator[None]:
    """Inside: send the signal (if asked for at ``point``) from a helper thread as soon as
    ``path`` exists, while the main thread runs the block (a call into Java that cannot take a
    signal itself)."""
    wanted = _wanted(point)
    if wanted is None:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.005):
            if path.exists():
                _send(*wanted)
                return

    thread = threading.Thread(target=watch, name="cmrkit-signal-point", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
