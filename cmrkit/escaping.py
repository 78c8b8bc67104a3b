"""Text from data files and the command line, made inert for the formats it lands in.

CSV cells (the MTurk batch, judgments, the page's export, evaluation tables): a spreadsheet
evaluates a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return as a
formula. Such a cell is written with a leading apostrophe (``'=1+1``), which spreadsheets show as
text; plain numbers (``-0.25``, ``+3``, ``1e-5``) are left as they are. A cell that itself starts
with an apostrophe followed by one of those characters, or by another apostrophe, gets one more
apostrophe, so :func:`csv_value` (used by every CSV reader of cmrkit) removes exactly one and
gives back the original text. CSV cells holding HTML (the MTurk fragments) neutralise the first
character with a character reference instead (``&#61;`` for ``=``), which the HIT shows as the
character itself.

Templates: :func:`fill` replaces every ``{{NAME}}`` placeholder in one pass, so text put in is
never read as a placeholder, whatever it holds.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from typing import IO

FORMULA_START = frozenset("=+-@\t\r")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_PLACEHOLDER = re.compile(r"\{\{([A-Z][A-Z0-9_]*)\}\}")


def _formula(text: str) -> bool:
    return text[:1] in FORMULA_START and not _NUMBER.fullmatch(text)


def csv_cell(text: str) -> str:
    """A CSV cell that no spreadsheet evaluates; :func:`csv_value` undoes it exactly."""
    if _formula(text) or (text[:1] == "'" and (text[1:2] == "'" or _formula(text[1:]))):
        return "'" + text
    return text


def csv_value(cell: str) -> str:
    """The text of a cell written by :func:`csv_cell` (other cells are returned unchanged)."""
    if cell[:1] == "'" and (cell[1:2] == "'" or _formula(cell[1:])):
        return cell[1:]
    return cell


def csv_row(values: Iterable[object]) -> list[object]:
    """A CSV row with every text cell made inert (numbers are written as they are)."""
    return [csv_cell(v) if isinstance(v, str) else v for v in values]


class _SafeWriter:
    def __init__(self, f: IO[str]):
        self._w = csv.writer(f, lineterminator="\n")

    def writerow(self, row: Iterable[object]) -> None:
        self._w.writerow(csv_row(row))

    def writerows(self, rows: Iterable[Iterable[object]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(f: IO[str]) -> _SafeWriter:
    """A ``csv.writer`` (``\n`` line ends) whose text cells go through :func:`csv_cell`."""
    return _SafeWriter(f)


def html_cell(fragment: str) -> str:
    """An HTML fragment for a CSV cell: a formula-like first character becomes a character
    reference, which renders the same."""
    if fragment[:1] in FORMULA_START and not _NUMBER.fullmatch(fragment):
        return f"&#{ord(fragment[0])};{fragment[1:]}"
    return fragment


def fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with each ``{{NAME}}`` replaced by ``values[NAME]``, in a single pass."""
    missing = sorted(set(_PLACEHOLDER.findall(template)) - set(values))
    if missing:
        raise KeyError(f"no value for the template placeholder(s) {', '.join(missing)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
