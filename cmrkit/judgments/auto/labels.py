"""The labels file an automatic judge writes (``cmrkit judgments auto ... -o LABELS.csv``).

A CSV that ``judgments aggregate`` reads as its simple CSV, with one column more::

    query_id,doc_id,worker_id,label,probability
    q12,doc_3_s4,auto:reader,5,0.973214
    q12,doc_9_s1,auto:llm,2,

One row per judged pair, sorted by (natural order of the query id, doc id); ``worker_id`` is
``auto:<judge kind>`` (a person's worker id never starts with ``auto:``); ``label`` is Likert
1..5 (4-5 relevant); ``probability`` the calibrated P(relevant) with 6 decimals, empty where the
judge gives none. Beside it, ``LABELS.csv.json`` (the sidecar) records the judge, the pool or
run judged and the counts (see docs/judging.md).
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.escaping import csv_writer
from cmrkit.fileio import read_csv_rows, read_text
from cmrkit.judgments.scale import LABELS, LABELS_TEXT
from cmrkit.trec import natural_key

LABELS_COLUMNS = ("query_id", "doc_id", "worker_id", "label", "probability")
AUTO_PREFIX = "auto:"
SIDECAR_SUFFIX = ".json"
LABELS_FORMAT = "cmrkit-judge-labels"
LABELS_VERSION = 1


@dataclass(frozen=True)
class Label:
    """A judge's label for one (query, unit) pair; ``line`` is where it was read (0: made)."""

    qid: str
    docno: str
    judge: str  # the worker id, auto:<kind>
    label: int  # Likert 1..5
    probability: float | None  # calibrated P(relevant), None where the judge gives none
    line: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return (self.qid, self.docno)


def sort_key(label: Label) -> tuple:
    """The order of a labels file: natural order of the query id, then the doc id."""
    return (natural_key(label.qid), label.docno)


def judge_worker(kind: str) -> str:
    """The worker id of a judge kind (``reader`` -> ``auto:reader``)."""
    return f"{AUTO_PREFIX}{kind}"


def probability_text(p: float | None) -> str:
    """A probability as the file holds it: 6 decimals, empty for None."""
    return "" if p is None else f"{p:.6f}"


def labels_text(labels: Iterable[Label]) -> str:
    """The bytes of a labels file (sorted), as :func:`write_labels` writes them."""
    out = io.StringIO(newline="")
    w = csv_writer(out)
    w.writerow(LABELS_COLUMNS)
    for lb in sorted(labels, key=sort_key):
        w.writerow([lb.qid, lb.docno, lb.judge, lb.label, probability_text(lb.probability)])
    return out.getvalue()


def write_labels(labels: Iterable[Label], path: str | os.PathLike) -> None:
    """Write a labels file at ``path`` (a staged path: callers put it in place)."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(labels_text(labels))


def _header(header: list[str], path: object) -> None:
    missing = [c for c in LABELS_COLUMNS[:4] if c not in header]
    if missing:
        raise CmrkitError(
            f"not a labels file: the header lacks {', '.join(missing)}; expected "
            f"{','.join(LABELS_COLUMNS)} (as `cmrkit judgments auto` writes)",
            path=path,
            where="line 1",
        )
    repeated = sorted({h for h in header if header.count(h) > 1 and h})
    if repeated:
        raise CmrkitError(
            f"column {repeated[0]!r} appears more than once in the header; keep one",
            path=path,
            where="line 1",
        )


def _probability(text: str, path: object, line: int) -> float | None:
    text = text.strip()
    if not text:
        return None
    try:
        p = float(text)
    except ValueError:
        p = math.nan
    if not (0.0 <= p <= 1.0):  # refuses nan too
        raise CmrkitError(
            f"probability {text!r} is not a number in 0..1 (or empty)",
            path=path,
            where=f"line {line}",
        )
    return p


def _parse_row(row: dict[str, str], path: object, line: int) -> Label:
    values = {c: row.get(c, "").strip() for c in LABELS_COLUMNS}
    for c in LABELS_COLUMNS[:3]:
        if not values[c]:
            raise CmrkitError(f"empty {c}", path=path, where=f"line {line}")
    text = values["label"]
    label = int(text) if text.isascii() and text.isdigit() else 0
    if label not in LABELS:
        raise CmrkitError(
            f"label {text!r} is not one of {LABELS_TEXT} in ASCII digits",
            path=path,
            where=f"line {line}",
        )
    prob = _probability(values["probability"], path, line)
    return Label(values["query_id"], values["doc_id"], values["worker_id"], label, prob, line)


def read_labels(path: str | os.PathLike) -> list[Label]:
    """The labels of a labels file, in file order. A missing column, an empty field, a label
    outside 1..5, a probability outside 0..1 or a pair labelled twice is one error naming the
    file, line and field."""
    header, rows = read_csv_rows(
        path,
        empty=f"empty labels file; expected the header {','.join(LABELS_COLUMNS)}",
        what="labels",
    )
    _header(header, path)
    out: list[Label] = []
    seen: dict[tuple[str, str], int] = {}
    for line, row in rows:
        lb = _parse_row(row, path, line)
        if lb.key in seen:
            raise CmrkitError(
                f"pair {lb.qid} {lb.docno} is labelled twice (first on line "
                f"{seen[lb.key]}); a labels file holds one label per pair",
                path=path,
                where=f"line {line}",
            )
        seen[lb.key] = line
        out.append(lb)
    return out


# --- the sidecar --------------------------------------------------------------------------


def sidecar_path(path: str | os.PathLike) -> Path:
    """The sidecar beside a labels file: ``LABELS.csv.json``."""
    p = Path(path)
    return p.with_name(p.name + SIDECAR_SUFFIX)


def sidecar_text(sidecar: Mapping[str, Any]) -> str:
    """The bytes of a sidecar (keys in the order given, 2-space indent, final newline)."""
    return json.dumps(dict(sidecar), indent=2, ensure_ascii=False) + "\n"


def read_labels_sidecar(path: str | os.PathLike) -> dict[str, Any] | None:
    """The sidecar of a labels file (``path`` is the labels file), None when there is none;
    an unreadable one is an error naming it."""
    side = sidecar_path(path)
    if not side.exists():
        return None
    try:
        data = json.loads(read_text(side))
    except json.JSONDecodeError as e:
        raise CmrkitError(
            f"the labels' sidecar is not JSON ({e.msg}, line {e.lineno}); rerun "
            "`cmrkit judgments auto` to write it again",
            path=side,
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("judge"), dict):
        raise CmrkitError(
            "not a labels sidecar (no judge object); rerun `cmrkit judgments auto`", path=side
        )
    return data
