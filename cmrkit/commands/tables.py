"""Tables that stay readable at the terminal's width, 80 columns included.

Numbers are never cut: a value column is exactly as wide as its longest value or its header
(or, when that is too wide, the header's longest word: headers wrap at spaces). Label columns
(the first ``keys`` columns, e.g. run or system names) wrap onto more lines past a third of the
width. When the value columns still do not fit, the table is split into several tables of the
same rows, each repeating the label columns, rather than squeezing any column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.console import Console

_BORDER = 3  # one rule and one space of padding on each side of a column


@dataclass
class Table:
    """Rows of string cells (a cell may hold several lines), with label and value columns."""

    title: str | None
    headers: Sequence[str]
    keys: int = 1
    caption: str | None = None
    left: Sequence[str] = ()  # value columns of text, aligned left (still never cut)
    rows: list[list[str]] = field(default_factory=list)
    styles: list[str | None] = field(default_factory=list)
    sections: set[int] = field(default_factory=set)  # a rule before these row indices

    def add_row(self, *cells: str, style: str | None = None) -> None:
        self.rows.append([str(c) for c in cells])
        self.styles.append(style)

    def add_section(self) -> None:
        self.sections.add(len(self.rows))


def cell(value: object) -> str:
    """A report's value as a cell: ``-`` for None, a float with 3 decimals, else as written."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _longest_line(text: str) -> int:
    return max((len(line) for line in text.split("\n")), default=0)


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def value_width(header: str, cells: Sequence[str], *, wrap_header: bool = False) -> int:
    """The width of a value column: its longest cell line, or its header (its longest word when
    the header may wrap)."""
    head = _longest_word(header) if wrap_header else len(header)
    return max([head, 1, *(_longest_line(c) for c in cells)])


def chunks(widths: Sequence[int], room: int) -> list[list[int]]:
    """Value columns (by index) packed in order into groups that fit in ``room`` characters."""
    groups: list[list[int]] = []
    used = room + 1
    for i, w in enumerate(widths):
        if groups and used + w + _BORDER <= room:
            groups[-1].append(i)
            used += w + _BORDER
        else:
            groups.append([i])
            used = w + _BORDER
    return groups


def render(table: Table, console: Console) -> None:
    """Print ``table`` on ``console`` within its width."""
    from rich.table import Table as RichTable

    width = console.width
    keys = list(range(table.keys))
    values = list(range(table.keys, len(table.headers)))

    def widths_of(columns: list[int], wrap_header: bool) -> list[int]:
        return [
            value_width(table.headers[c], [r[c] for r in table.rows], wrap_header=wrap_header)
            for c in columns
        ]

    key_widths = widths_of(keys, False)
    widths = widths_of(values, False)
    if 1 + sum(w + _BORDER for w in key_widths + widths) > width:
        key_cap = max(12, width // 3)
        key_widths = [min(key_cap, w) for w in widths_of(keys, True)]
        widths = widths_of(values, True)
    room = width - 1 - sum(w + _BORDER for w in key_widths)
    groups = chunks(widths, max(room, 1)) if values else [[]]
    if len(groups) == 1:  # one table: give spare room back to wrapped headers, left first
        spare = room - sum(w + _BORDER for w in widths)
        for i, v in enumerate(values):
            grow = min(spare, max(0, len(table.headers[v]) - widths[i]))
            widths[i] += grow
            spare -= grow
    for n, group in enumerate(groups):
        title = table.title
        if title and len(groups) > 1:
            title = f"{title} ({n + 1} of {len(groups)})"
        t = RichTable()
        for k, w in zip(keys, key_widths, strict=True):
            t.add_column(table.headers[k], max_width=w, overflow="fold")
        for i in group:
            v = values[i]
            justify = "left" if table.headers[v] in table.left else "right"
            t.add_column(table.headers[v], justify=justify, width=widths[i])
        for r, (row, style) in enumerate(zip(table.rows, table.styles, strict=True)):
            if r in table.sections:
                t.add_section()
            t.add_row(*(row[k] for k in keys), *(row[values[i]] for i in group), style=style)
        if title:
            _words(console, title, "table.title")
        console.print(t, soft_wrap=False)
        if table.caption and n == len(groups) - 1:
            _words(console, table.caption, "table.caption")


def _words(console: Console, text: str, style: str) -> None:
    """A title or caption at the console's width, broken only at spaces: a file name (a word
    longer than the table, or than the line) is never cut in two."""
    import textwrap

    from rich.text import Text

    for line in textwrap.wrap(
        text, max(console.width, 1), break_long_words=False, break_on_hyphens=False
    ):
        console.print(Text(line, style=style), no_wrap=True, crop=False, soft_wrap=True)


# --- the agreement of two rankings of the same systems (agree, judgments check) -----------


def _number(value: float | None) -> str:
    from cmrkit.evaluation.report import fixed

    return "-" if value is None else fixed(value)


def agreement_table(title: str, caption: str, result, labels: dict[str, str]) -> Table:
    """The statistics of a ranking agreement (``result``: its ``measures``, ``agreement`` and
    ``intervals`` per measure), a row each with its interval, and the runs the largest swap
    names (``labels``: statistic -> its label): what `agree` and `judgments check` print."""
    table = Table(title, ["statistic", *(m.name for m in result.measures)], caption=caption)
    for name, label in labels.items():
        cells = []
        for m in result.measures:
            value = getattr(result.agreement[m.name], name)
            ci = result.intervals[m.name][name]
            cells.append(_number(value) + (f"\n[{_number(ci[0])}, {_number(ci[1])}]" if ci else ""))
        table.add_row(label, *cells)
    table.add_row(
        "swapped runs",
        *(" / ".join(result.agreement[m.name].swapped or ("-",)) for m in result.measures),
    )
    return table
