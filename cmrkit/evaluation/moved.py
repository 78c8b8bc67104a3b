"""Public names of the evaluation modules that moved: the old import path keeps working for one
release, with a DeprecationWarning naming the new one.

A module that lost names keeps a table ``{old name: (new module, new name)}`` and a module
``__getattr__`` that calls :func:`moved`.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping


def moved(module: str, name: str, table: Mapping[str, tuple[str, str]]) -> object:
    """The object ``module.name`` now is (``table``: old name -> (module, name)), after a
    DeprecationWarning; AttributeError for a name the table lacks."""
    if name not in table:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    where, new = table[name]
    warnings.warn(
        f"{module}.{name} is now {where}.{new}; the old name goes in the next release",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(where), new)
