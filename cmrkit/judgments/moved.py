"""The import paths the judgments had before they came here (0.5: ``cmrkit.judgments`` the
module, ``cmrkit.judging``, ``cmrkit.pooling.assessors``): each keeps working for one release,
with a DeprecationWarning naming the new one, and gives the same object.

A module at an old path keeps only ``__getattr__ = moved(__name__, ...)``.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable, Mapping

Where = str | tuple[str, str]  # the new module (the same name), or (module, name)


def moved(
    old: str, table: Mapping[str, Where] | None = None, *, to: str | None = None
) -> Callable[[str], object]:
    """The ``__getattr__`` of module ``old``, whose names moved: ``table`` maps a name to its new
    home; every other name is found in module ``to`` (a whole module moved). A name found in
    neither, or a dunder name, is an AttributeError as before."""
    table = dict(table or {})

    def __getattr__(name: str) -> object:
        return _resolve(old, name, table, to)

    return __getattr__


def _resolve(old: str, name: str, table: Mapping[str, Where], to: str | None) -> object:
    where = table.get(name)
    if where is None and to is not None and not name.startswith("__"):
        module = importlib.import_module(to)
        if hasattr(module, name):
            where = to
    if where is None:
        raise AttributeError(f"module {old!r} has no attribute {name!r}")
    module_name, new_name = (where, name) if isinstance(where, str) else where
    # `from package import name` asks twice: import's own hasattr() probe, then the statement
    if sys._getframe(2).f_code.co_name != "_handle_fromlist":
        warnings.warn(
            f"{old}.{name} is now {module_name}.{new_name}; the old path goes in the next release",
            DeprecationWarning,
            stacklevel=3,
        )
    return getattr(importlib.import_module(module_name), new_name)
