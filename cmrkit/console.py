"""Shared console output, progress bars, and the error boundary every command goes through."""

from __future__ import annotations

import functools
import logging
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


def progress_bar(
    enabled: bool = True,
    description: str = "{task.description}",
    *,
    transient: bool = False,
    spinner: bool = False,
    eta: bool = True,
) -> Any:
    """The progress bar every command shows on stderr (a rich ``Progress``; disabled when
    ``enabled`` is false): the description, a bar, done/total and, with ``eta``, the time left."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeRemainingColumn,
    )

    columns: list[Any] = [SpinnerColumn()] if spinner else []
    columns += [TextColumn(description), BarColumn(), MofNCompleteColumn()]
    if eta:
        columns.append(TimeRemainingColumn())
    return Progress(*columns, console=console, disable=not enabled, transient=transient)


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
