"""Shared console output and the error boundary every command goes through."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TypeVar

import typer
from rich.console import Console

from cmrkit.errors import CmrkitError

console = Console(stderr=True, highlight=False)
out = Console(highlight=False, soft_wrap=True)

F = TypeVar("F", bound=Callable)


def user_errors(func: F) -> F:
    """Turn a CmrkitError into one line on stderr and exit code 2 (no traceback)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except CmrkitError as e:
            print(f"error: {e}", file=sys.stderr)
            raise typer.Exit(code=e.exit_code) from None

    return wrapper  # type: ignore[return-value]
