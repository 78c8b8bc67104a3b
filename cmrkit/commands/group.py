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


class _LightCoercion:
    """A parameter's value coercion that leaves pydantic unloaded where Typer's own functions
    do the work. Typer (0.2x) coerces every value through a pydantic TypeAdapter made on first
    use, even for an option left out, and importing pydantic costs about 0.1 s per command.

    A left-out option (None) needs no coercion; text, choices (enums) and paths are what
    Typer's adapters compute with Typer's functions (``coerce_cli_choice``,
    ``coerce_cli_path``), with the same messages. Anything else (numbers, parsers, other
    types) goes to Typer's own adapter, made when first needed."""

    def __init__(self, param: Any, build: Any, kind: str, t: Any) -> None:
        self.param = param
        self.build = build
        self.kind = kind
        self.t = t
        self.real = None

    def _real(self) -> Any:
        if self.real is None:
            self.real = self.build(self.param.type_descriptor)
        return self.real

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        multi = param.multiple or param.nargs == -1
        if value is None:
            return () if multi else None
        if self.kind == "other" or (multi and isinstance(value, str)):
            return self._real().coerce(value, param=param, ctx=ctx)
        if multi:
            if not isinstance(value, (list, tuple)):
                value = [value]
            return [self._one(v, param, ctx) for v in value]
        return self._one(value, param, ctx)

    def _one(self, value: Any, param: Any, ctx: Any) -> Any:
        from pathlib import Path

        t = self.t
        info = self.param.type_descriptor.parameter_info
        if self.kind == "str" and isinstance(value, str):
            return value
        if self.kind == "path" and isinstance(value, (str, Path)):
            return t.coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
        if self.kind == "choice":
            try:
                return t.coerce_cli_choice(
                    value,
                    choices=list(self.param.type_descriptor.annotation),
                    case_sensitive=info.case_sensitive,
                    ctx=ctx,
                )
            except ValueError as e:  # worded as pydantic words an error in a validator
                raise t.BadParameter(t.escape(f"Value error, {e}"), ctx=ctx, param=param) from None
        return self._real()._coerce_value(value, param=param, ctx=ctx)


def _light_kind(desc: Any, t: Any) -> str:
    """What :class:`_LightCoercion` does with a parameter of this type descriptor."""
    from enum import Enum
    from pathlib import Path
    from typing import get_args, get_origin

    info = desc.parameter_info
    annotation = desc.annotation
    if desc.file_annotation is not None or info.parser is not None:
        return "other"
    if get_origin(annotation) is list:
        args = get_args(annotation)
        annotation = args[0] if len(args) == 1 else None
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "choice"
    if annotation is str:
        return "str"
    if annotation is Path and info.path_type is None and t.routes_to_path(annotation, info):
        return "path"
    return "other"


LIGHT_COERCION_TYPER = ("0.29.",)
"""Typer releases whose internals :class:`_LightCoercion` was checked against (tests/test_cli_help
compares every command's errors both ways); another release keeps Typer's own coercion."""


def _install_light_coercion() -> None:
    """Give Typer's parameters :class:`_LightCoercion`, when Typer has the internals it relies
    on (otherwise Typer stays as it is)."""
    import os
    import types

    if os.environ.get("CMRKIT_TYPER_COERCION") == "typer":  # Typer's own way (tests compare)
        return
    if not typer.__version__.startswith(LIGHT_COERCION_TYPER):  # internals checked on these
        return
    try:
        from typer import _coercion, _param_types, core
        from typer._display import _escape_control_characters

        build = _coercion.build_runtime_param
        cls = core._TyperParameter
        original = cls.get_runtime_param
        t = types.SimpleNamespace(
            coerce_cli_path=_param_types.coerce_cli_path,
            coerce_cli_choice=_param_types.coerce_cli_choice,
            routes_to_path=_param_types.routes_to_path,
            BadParameter=core._click.exceptions.BadParameter,
            escape=_escape_control_characters,
        )
    except (ImportError, AttributeError):
        return

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            try:
                kind = _light_kind(self.type_descriptor, t)
            except Exception:  # a descriptor of another shape: Typer's own way
                return original(self)
            self._runtime_param = _LightCoercion(self, build, kind, t)
        return self._runtime_param

    cls.get_runtime_param = get_runtime_param


_install_light_coercion()
