"""Helpers shared by the readers: JSON loading with located errors, typed field access."""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.fileio import read_text

_SPLIT_WORDS = {"train": "train", "dev": "dev", "valid": "dev", "validation": "dev", "test": "test"}


def load_json(path: str | os.PathLike) -> Any:
    """Parse a whole JSON file; a syntax error names its line and column."""
    text = read_text(path)
    if not text.strip():
        raise CmrkitError("the file is empty; expected JSON", path=path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CmrkitError(
            f"malformed JSON ({e.msg}); fix or re-download the file",
            path=path,
            where=f"line {e.lineno} column {e.colno}",
        ) from None
    except RecursionError:
        raise CmrkitError(
            f"JSON nested more than about {sys.getrecursionlimit()} levels deep; fix the file",
            path=path,
        ) from None


class Record:
    """Typed access to one input record, with errors that say where and which field."""

    def __init__(self, obj: Any, path: object, where: str):
        if not isinstance(obj, dict):
            raise CmrkitError(
                f"expected a JSON object, found {type(obj).__name__}", path=path, where=where
            )
        self.obj = obj
        self.path = path
        self.where = where

    def error(self, message: str) -> CmrkitError:
        return CmrkitError(message, path=self.path, where=self.where)

    def get(
        self,
        field: str,
        types: type | tuple[type, ...],
        *,
        required: bool = True,
        default: Any = None,
    ) -> Any:
        if field not in self.obj or self.obj[field] is None:
            if required:
                raise self.error(f"missing field '{field}'")
            return default
        value = self.obj[field]
        # bool is an int subclass: never accept it where a number or string is meant
        if isinstance(value, bool) and bool not in (
            types if isinstance(types, tuple) else (types,)
        ):
            raise self.error(f"field '{field}' is a boolean, expected {_names(types)}")
        if not isinstance(value, types):
            raise self.error(
                f"field '{field}' is {type(value).__name__} ({_short(value)}), "
                f"expected {_names(types)}"
            )
        return value

    def str_list(self, field: str) -> list[str]:
        value = self.get(field, list)
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(f"field '{field}'[{i}] is {type(item).__name__}, expected str")
        return value

    def int_list(self, field: str) -> list[int]:
        value = self.get(field, list)
        if not value:
            raise self.error(f"field '{field}' is empty")
        for i, item in enumerate(value):
            if not isinstance(item, int) or isinstance(item, bool):
                raise self.error(f"field '{field}'[{i}] is {type(item).__name__}, expected int")
        return value


def _names(types: type | tuple[type, ...]) -> str:
    if isinstance(types, tuple):
        return " or ".join(t.__name__ for t in types)
    return types.__name__


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def split_from_name(path: str | os.PathLike) -> str | None:
    """'train', 'dev' or 'test' from a word of the file name, the first that names a split:
    ``Dev_Event_gold_mentions_validated.json`` -> dev, ``Test_..._validated.json`` -> test."""
    for word in re.split(r"[^a-z]+", os.path.basename(str(path)).lower()):
        if word in _SPLIT_WORDS:
            return _SPLIT_WORDS[word]
    return None


def parse_input_spec(spec: str) -> tuple[str | None, str]:
    """``SPLIT=PATH`` names the split explicitly; a plain PATH infers it from the file name."""
    m = re.match(r"^([A-Za-z][A-Za-z0-9_-]*)=(.+)$", spec)
    if m and not os.path.exists(spec):
        return m.group(1), m.group(2)
    return None, spec


def clean_id(value: str) -> str:
    """An id usable as a TREC qid/docno: whitespace becomes '_'."""
    return "_".join(str(value).split())


def join_tokens(tokens: list[str]) -> tuple[str, list[int], list[int]]:
    """Tokens joined by single spaces, and each token's start and end offsets in that text.

    Whitespace inside a token (real WEC/ECB+ tokens hold tabs and thin spaces) is trimmed at
    its ends and collapsed to one space inside, so the text has no tabs or newlines.
    """
    clean = [" ".join(tok.split()) for tok in tokens]
    starts, ends = [], []
    pos = 0
    for tok in clean:
        starts.append(pos)
        ends.append(pos + len(tok))
        pos += len(tok) + 1
    return " ".join(clean), starts, ends
