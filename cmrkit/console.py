"""Shared console output, progress bars, and the error boundary every command goes through."""

from __future__ import annotations

import functools
import logging
import math
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

import cmrkit.interrupts as interrupts
from cmrkit.errors import CmrkitError

# markup off: paths, run names and query ids printed here are data, never console markup
console = Console(stderr=True, highlight=False, markup=False)
out = Console(highlight=False, soft_wrap=True, markup=False)


# Where stderr is not a terminal (a log file, a pipe, nohup), a bar cannot redraw: a plain line
# is printed instead when a task passes another PLAIN_STEP of its total and PLAIN_MIN_SECONDS
# have passed since its last line, or PLAIN_MAX_SECONDS have passed whatever it did; and a last
# line when the work is done.
PLAIN_STEP = 0.1
PLAIN_MIN_SECONDS = 5.0
PLAIN_MAX_SECONDS = 60.0


def progress_bar(
    enabled: bool = True,
    description: str = "{task.description}",
    *,
    transient: bool = False,
    spinner: bool = False,
    eta: bool = True,
) -> Any:
    """The progress bar every command shows on stderr (a rich ``Progress``; disabled when
    ``enabled`` is false): the description, a bar, done/total and, with ``eta``, the time left.
    Where stderr is no terminal, plain lines now and then instead (:data:`PLAIN_STEP`), and one
    when the work is done (none for a ``transient`` bar, none when the work failed)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeRemainingColumn,
    )

    if enabled and (not console.is_terminal or console.is_dumb_terminal):
        return _plain_progress(Progress, description, transient=transient, eta=eta)
    columns: list[Any] = [SpinnerColumn()] if spinner else []
    columns += [TextColumn(description), BarColumn(), MofNCompleteColumn()]
    if eta:
        columns.append(TimeRemainingColumn())
    return Progress(*columns, console=console, disable=not enabled, transient=transient)


def _clock(seconds: float | None) -> str:
    s = int(seconds or 0)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def plain_line(task: Any, description: str, *, eta: bool = True, final: bool = False) -> str:
    """A task's progress as one line of text: ``what: 120/6,754 (1%), 0:01:10 elapsed, 1:02:00
    left``; when ``final``, ``what: 6,754/6,754 done in 0:58:10``."""
    try:
        what = description.format(task=task)
    except (KeyError, IndexError, ValueError, AttributeError):
        what = str(task.description)
    done, total = int(task.completed), task.total
    count = f"{done:,}" if total is None else f"{done:,}/{int(total):,}"
    if final:
        took = task.finished_time if task.finished_time is not None else task.elapsed
        return f"{what}: {count} done in {_clock(took)}"
    share = f" ({int(100 * done / total)}%)" if total else ""
    left = task.time_remaining
    rest = f", {_clock(left)} left" if eta and left is not None else ""
    return f"{what}: {count}{share}, {_clock(task.elapsed)} elapsed{rest}"


def _plain_progress(base: type, description: str, *, transient: bool, eta: bool) -> Any:
    """A rich ``Progress`` that draws nothing and prints :func:`plain_line` lines instead."""

    class PlainProgress(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__(console=console, disable=True, transient=transient)
            self._said: dict[Any, tuple[float, float]] = {}  # task -> (time, share) last said

        def _tick(self, task_id: Any) -> None:
            now = self.get_time()
            with self._lock:
                task = self._tasks[task_id]
                since, share = self._said.get(task_id, (task.start_time or now, 0.0))
                done = task.completed / task.total if task.total else 0.0
                stepped = done >= share + PLAIN_STEP and now - since >= PLAIN_MIN_SECONDS
                if not (stepped or now - since >= PLAIN_MAX_SECONDS) or task.finished:
                    return
                self._said[task_id] = (now, math.floor(done / PLAIN_STEP + 1e-9) * PLAIN_STEP)
                text = plain_line(task, description, eta=eta)
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)

        def update(self, task_id: Any, **kwargs: Any) -> None:
            super().update(task_id, **kwargs)
            self._tick(task_id)

        def advance(self, task_id: Any, advance: float = 1) -> None:
            super().advance(task_id, advance)
            self._tick(task_id)

        def __exit__(self, exc_type: Any, *rest: Any) -> None:
            super().__exit__(exc_type, *rest)
            if exc_type is None and not transient:
                for task in self.tasks:
                    if task.visible:
                        line = plain_line(task, description, eta=eta, final=True)
                        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    return PlainProgress()


F = TypeVar("F", bound=Callable)

# Exit codes: 0 done; 1 the environment is at fault (full disk, I/O error, an output busy with
# another command, out of memory); 2 the input, an option or a path is wrong; 3 an internal error
# (a bug: please report it); 128 + N a signal (130 Ctrl-C, 143 SIGTERM).
INTERNAL_ERROR = 3


class _Notes(logging.Handler):
    """cmrkit's log warnings (a stale lock taken over, a staging folder cleaned) as
    ``note: ...`` lines on the current stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"note: {record.getMessage()}", file=sys.stderr)


def _show_notes() -> None:
    log = logging.getLogger("cmrkit")
    if not any(isinstance(h, _Notes) for h in log.handlers):
        log.addHandler(_Notes(logging.WARNING))
        log.propagate = False


def _fail(text: str, code: int) -> typer.Exit:
    print(f"error: {text}", file=sys.stderr)
    return typer.Exit(code=code)


def user_errors(func: F) -> F:
    """Turn a CmrkitError, or the operating system refusing (full disk, read-only folder,
    permission), into one line on stderr and its exit code (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        from cmrkit.fileio import describe_os_error

        _show_notes()
        interrupts.reset()
        try:
            return func(*args, **kwargs)
        except CmrkitError as e:
            raise _fail(str(e), e.exit_code) from None
        except BrokenPipeError:
            # the reader of stdout went away (`cmrkit eval ... | head`): stop quietly
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(code=1) from None
        except OSError as e:
            text, code = describe_os_error(e)
            raise _fail(text, code) from None
        except MemoryError:
            raise _fail("out of memory; free memory or use a smaller input", 1) from None
        except RecursionError:
            raise _fail("an input is nested too deeply to read (e.g. JSON in JSON)", 2) from None

    return wrapper  # type: ignore[return-value]


def run(app: Callable[[], object]) -> None:
    """Run the command line as a process: signals end it cleanly (exit 128 + N, one line), and
    an unexpected error is one line too (exit 3; CMRKIT_TRACEBACK=1 shows the traceback).

    The process ends as soon as the command has (outputs are all in place or all dropped by
    then), without the interpreter's and a started JVM's teardown: that takes seconds, during
    which a signal could only kill the process without a word. A signal arriving at any instant
    on the way there, even while the outcome is being reported, ends it the same way: one line,
    never a traceback."""
    with interrupts.handling():
        try:
            code = 0
            try:
                code = _outcome(app)
            finally:
                _end(code)
        except interrupts.Interrupted as e:  # in the instant before _end took over
            interrupts.report(e)
            _end(e.exit_code)


def _outcome(app: Callable[[], object]) -> int:
    """Run the command; its exit code, with its one line printed where it failed."""
    try:
        try:
            app()
        except SystemExit as e:
            code = e.code
        except Exception as e:
            if (stop := interrupts.behind(e)) is not None:
                raise stop from None
            shown = bool(os.environ.get("CMRKIT_TRACEBACK"))
            if shown:  # the details, then the same line and exit code as without them
                import traceback

                traceback.print_exc(file=sys.stderr)
            print(
                f"error: internal error ({type(e).__name__}: {str(e)[:200]}); please report it "
                "with the command that caused it"
                + ("" if shown else " (CMRKIT_TRACEBACK=1 shows the details)"),
                file=sys.stderr,
            )
            code = INTERNAL_ERROR
        if isinstance(code, str):
            print(code, file=sys.stderr)
            code = 1
        return int(code or 0)
    except interrupts.Interrupted as e:  # during the command, or while its outcome was told
        interrupts.report(e)
        return e.exit_code


def _end(code: int) -> None:
    """Flush and end the process now (a signal arriving meanwhile waits: the outcome stands)."""
    with interrupts.critical():
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:
            pass
        logging.shutdown()
        os._exit(code)
