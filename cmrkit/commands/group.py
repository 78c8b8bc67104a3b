"""How the command groups present themselves: commands in the pipeline's order, and option
placeholders in words rather than Python types.

Every ``typer.Typer`` of cmrkit is made with :func:`group`: plain help text (wrapped to the
terminal, never cut), flags without a value placeholder, ``--depth INTEGER`` rather than
``--depth <int>``, arguments named by their metavar alone.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

_WORDS = {int: "INTEGER", float: "FLOAT", str: "TEXT", bool: "BOOLEAN"}


def _placeholder(param: Any) -> str:
    desc = param.type_descriptor
    if desc.is_choice:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices or ()) + "]"
    if desc.is_path:
        return "PATH"
    annotation = desc.annotation
    for arg in getattr(annotation, "__args__", None) or (annotation,):
        if arg in _WORDS:
            return _WORDS[arg]
    return "VALUE"


def _no_type(ctx: Any = None) -> None:
    return None


def tidy(params: list[Any]) -> None:
    """Give options word placeholders and arguments upper-case names without a type."""
    for p in params:
        if p.param_type_name == "option":
            if not (getattr(p, "is_flag", False) or getattr(p, "count", False)) and (
                p.metavar is None
            ):
                p.metavar = _placeholder(p)
        elif p.param_type_name == "argument":
            if p.metavar is None:
                p.metavar = p.name.upper()
            # the argument's name says what it holds; typer would add "<path>"
            p.display_type_rich = _no_type


class PipelineGroup(TyperGroup):
    """A command group listing its commands in ``order``, then the others as they were added."""

    order: tuple[str, ...] = ()

    def list_commands(self, ctx: Any) -> list[str]:
        known = [n for n in self.order if n in self.commands]
        return known + [n for n in self.commands if n not in known]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None:
            tidy(cmd.params)
        return cmd

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Each command with its first sentence, wrapped (click would cut it at 45 characters)."""
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        tidy(params)
        return params


def group(order: tuple[str, ...] = (), **kwargs: Any) -> typer.Typer:
    """A ``typer.Typer`` with cmrkit's help conventions (see the module docstring), listing
    the commands named in ``order`` first, in that order."""
    kwargs.setdefault("no_args_is_help", True)
    cls = type("Group", (PipelineGroup,), {"order": tuple(order)})
    return typer.Typer(cls=cls, rich_markup_mode=None, **kwargs)
