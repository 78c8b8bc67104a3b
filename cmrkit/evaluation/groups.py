"""Queries in groups (entity type, or any topic field): per-group aggregates."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.ranking import Result, aggregate
from cmrkit.fileio import iter_lines

NO_GROUP = "(none)"
NO_TOPIC = "(no topic)"


def load_groups(path: str | os.PathLike, field: str = "type") -> dict[str, str]:
    """qid -> group label, from a topics JSONL (``field`` of each object) or a text table.

    A text table has the qid in column 1 and is tab- or whitespace-separated, like the
    published CMR queries file ``query_id<TAB>type<TAB>...``: ``field`` is then ``type``
    (column 2) or a 1-based column number. A null or empty value becomes ``(none)``.
    """
    groups: dict[str, str] = {}
    jsonl: bool | None = None
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        if jsonl is None:
            jsonl = line.lstrip().startswith("{")
        if jsonl:
            qid, value = _group_from_json(line, field, path, n)
        else:
            qid, value = _group_from_columns(line, field, path, n)
        if qid in groups and groups[qid] != value:
            raise CmrkitError(
                f"query {qid} appears again with {field} {value!r} (was {groups[qid]!r})",
                path=path,
                where=f"line {n}",
            )
        groups[qid] = value
    if not groups:
        raise CmrkitError("no topics in the file", path=path)
    return groups


def _label(value: object) -> str:
    if value is None or value == "":
        return NO_GROUP
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _group_from_json(line: str, field: str, path: object, n: int) -> tuple[str, str]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise CmrkitError(f"not valid JSON ({e.msg})", path=path, where=f"line {n}") from None
    except RecursionError:
        raise CmrkitError("JSON nested too deeply", path=path, where=f"line {n}") from None
    if not isinstance(obj, dict) or "qid" not in obj:
        raise CmrkitError("expected a JSON object with a 'qid' field", path=path, where=f"line {n}")
    if field not in obj:
        keys = ", ".join(sorted(obj))
        raise CmrkitError(
            f"no field {field!r} to group by (fields: {keys}); choose --by from these",
            path=path,
            where=f"line {n}",
        )
    return str(obj["qid"]), _label(obj[field])


def _group_from_columns(line: str, field: str, path: object, n: int) -> tuple[str, str]:
    columns = line.rstrip().split("\t") if "\t" in line else line.split()
    if field.isdigit():
        col = int(field)
    elif field == "type":
        col = 2
    else:
        raise CmrkitError(
            f"--by {field!r}: a text topics file ('qid type ...') groups by 'type' or a column "
            "number",
            path=path,
            where=f"line {n}",
        )
    if col < 2 or col > len(columns):
        raise CmrkitError(
            f"no column {col} to group by (the line has {len(columns)})",
            path=path,
            where=f"line {n}",
        )
    return columns[0].strip(), _label(columns[col - 1].strip())


@dataclass
class GroupResult:
    """Aggregate values of one group of queries."""

    group: str
    queries: list[str]
    aggregate: dict[str, float]


def by_group(result: Result, groups: Mapping[str, str]) -> list[GroupResult]:
    """Each group's aggregate over the result's queries, groups sorted by label.

    Queries the mapping lacks fall in the group ``(no topic)``.
    """
    members: dict[str, list[str]] = {}
    for qid in result.per_query:
        members.setdefault(groups.get(qid, NO_TOPIC), []).append(qid)
    out = []
    for label in sorted(members):
        qids = members[label]
        agg = {m.name: aggregate(m, result.values(m, qids)) for m in result.measures}
        out.append(GroupResult(label, qids, agg))
    return out
