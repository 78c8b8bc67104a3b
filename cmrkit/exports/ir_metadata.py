"""A run with its ir_metadata block (https://www.ir-metadata.org, schema 0.1): the PRIMAD
metadata of the run, as YAML in ``#`` comment lines at the top of the run file, between
``# ir_metadata.start`` and ``# ir_metadata.end`` (as repro_eval's MetadataHandler writes and
reads it; trec_eval 10.0 and cmrkit skip those lines, trec_eval 9.0.8 reads them as data).

Built from the run's cmrkit sidecar alone, so the same sidecar gives the same bytes: Platform
(the software versions the run recorded), Implementation (the exact command that makes the
run), Method (the system, its parameters, the tie-breaking, the index), Data (the collection,
split, qrels and the hashes of topics and corpus). The sidecar records no hardware, Actor or
Research goal: those components are left for the user to add.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from cmrkit.errors import CmrkitError

START = "# ir_metadata.start"
END = "# ir_metadata.end"
SCHEMA_VERSION = 0.1
JAVA_SIDE = ("anserini", "lucene", "java")  # versions of the JVM side of a Lucene run
TOOLKITS = ("anserini", "pyserini")


def _libraries(versions: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(python, java) ``name==version`` lines of a sidecar's ``versions``; a nested mapping
    (spaCy's) gives its own lines, its ``model`` with its ``model_version``."""
    python, java = [], []
    for name, value in versions.items():
        if isinstance(value, Mapping):
            for key, version in value.items():
                if key == "model":
                    python.append(f"{version}=={value.get('model_version', '')}".rstrip("="))
                elif key != "model_version":
                    python.append(f"{key}=={version}")
        elif value is not None:
            (java if name in JAVA_SIDE else python).append(f"{name}=={value}")
    return sorted(python), sorted(java)


def metadata(sidecar: Mapping[str, Any], qrels: str | None = None) -> dict[str, Any]:
    """The ir_metadata of a run from its cmrkit sidecar (``qrels``: where its split's qrels
    lie, when known)."""
    versions = sidecar.get("versions") or {}
    python, java = _libraries(versions)
    software: dict[str, Any] = {"libraries": {"python": python, **({"java": java} if java else {})}}
    toolkits = [f"{name}=={versions[name]}" for name in TOOLKITS if versions.get(name)]
    if toolkits:
        software["retrieval toolkit"] = toolkits
    out: dict[str, Any] = {
        "schema-version": SCHEMA_VERSION,
        "run-version": 1.0,
        "tag": sidecar.get("tag") or sidecar.get("name"),
        "platform": {"software": software},
    }
    command = sidecar.get("command")
    implementation: dict[str, Any] = {}
    if isinstance(command, list) and all(isinstance(c, str) for c in command):
        implementation["executable"] = {"cmd": shlex.join(command)}
    implementation["source"] = {
        "lang": ["python", "java"] if java else ["python"],
        "version": f"cmrkit=={versions.get('cmrkit')}" if versions.get("cmrkit") else None,
    }
    out["implementation"] = _pruned(implementation)
    retrieval = {
        "name": sidecar.get("name"),
        "method": sidecar.get("system"),
        "params": sidecar.get("parameters"),
    }
    index = sidecar.get("index") or {}
    method = {
        "automatic": True,
        "score ties": (sidecar.get("ranking") or {}).get("tie_break"),
        "indexing": {
            "index": index.get("path"),
            "index id": index.get("index_id"),
            "corpus sha256": index.get("corpus_sha256"),
        },
        "retrieval": [retrieval],
    }
    out["method"] = _pruned(method)
    identity = sidecar.get("identity") or {}
    collection = sidecar.get("collection")
    out["data"] = _pruned(
        {
            "test collection": {
                "name": Path(collection).name if isinstance(collection, str) else None,
                "source": collection,
                "split": sidecar.get("split"),
                "qrels": qrels,
                "topics sha256": identity.get("topics_sha256"),
            }
        }
    )
    return _pruned(out)


def _pruned(value: Any) -> Any:
    """``value`` without the None entries (nor the mappings and lists left empty)."""
    if isinstance(value, Mapping):
        kept = {k: _pruned(v) for k, v in value.items() if v is not None}
        return {k: v for k, v in kept.items() if v not in ({}, [])}
    if isinstance(value, list):
        return [_pruned(v) for v in value if v is not None]
    return value


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_ .\-]*[A-Za-z0-9_]|[A-Za-z_]")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def _key(key: Any) -> str:
    text = str(key)
    if _PLAIN_KEY.fullmatch(text) and text.lower() not in _YAML_WORDS:
        return text
    return json.dumps(text)


def _scalar(value: Any) -> str:
    """A YAML scalar: strings as JSON strings (a double-quoted YAML scalar, ASCII only, so no
    line of the block ends in '#' or breaks), numbers as written, true/false, null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    return json.dumps(str(value))


def yaml_lines(value: Mapping[str, Any], indent: int = 0) -> list[str]:
    """A mapping as block-style YAML lines, lists as the ir_metadata examples write them."""
    pad = " " * indent
    lines = []
    for key, item in value.items():
        head = f"{pad}{_key(key)}:"
        if isinstance(item, Mapping) and item:
            lines += [head, *yaml_lines(item, indent + 2)]
        elif isinstance(item, list) and item:
            lines.append(head)
            lines += _sequence(item, indent)
        elif isinstance(item, Mapping | list):
            lines.append(f"{head} {'{}' if isinstance(item, Mapping) else '[]'}")
        else:
            lines.append(f"{head} {_scalar(item)}")
    return lines


def _sequence(items: list, indent: int) -> list[str]:
    pad = " " * indent
    lines = []
    for item in items:
        if isinstance(item, Mapping) and item:
            inner = yaml_lines(item, indent + 2)
            lines += [f"{pad}- {inner[0].lstrip()}", *inner[1:]]
        elif isinstance(item, Mapping | list):
            lines.append(f"{pad}- {json.dumps(item, ensure_ascii=True, sort_keys=True)}")
        else:
            lines.append(f"{pad}- {_scalar(item)}")
    return lines


def block(meta: Mapping[str, Any]) -> str:
    """The ir_metadata block: each YAML line behind ``# ``, between the start and end marks."""
    return "".join(f"{line}\n" for line in (START, *(f"# {y}" for y in yaml_lines(meta)), END))


def without_block(lines: Iterable[tuple[int, str]], path: object = None) -> Iterator[str]:
    """A run's lines (numbered, without their newline) without an ir_metadata block that
    opens it (a run exported again gets one block, the new one). The spec's block starts on
    the first line and its end mark is the last line of the header, before any result: a
    result line before the end mark, or no end mark, is refused naming the lines (issue 42:
    such a run was exported without a single result)."""
    opened = None
    for n, line in lines:
        if opened is None:
            opened = n if line == START else 0
            if opened:
                continue
        if opened:
            if line == END:
                opened = 0
            elif line.strip() and not line.lstrip().startswith("#"):
                raise CmrkitError(
                    f"a result line inside the ir_metadata block that line {opened} opens "
                    f"({START!r}), which has no {END!r} before it: end the block with that "
                    "line, or remove its start",
                    path=path,
                    where=f"line {n}",
                )
            continue
        yield line
    if opened:
        raise CmrkitError(
            f"the ir_metadata block that line {opened} opens ({START!r}) never ends: the file "
            f"holds no {END!r} line (a cut-off file?); end the block with that line",
            path=path,
        )


MAX_BLOCK_LINES = 10_000  # a header longer than this is not read back


def read_block(path: str | Path) -> dict[str, Any] | None:
    """The ir_metadata of a run file that opens with a block, as YAML (PyYAML's safe loader);
    None when it has none, or one that never ends or is not a YAML mapping."""
    lines = []
    with open(path, encoding="utf-8", errors="replace") as f:
        if f.readline().rstrip("\r\n") != START:
            return None
        for line in f:
            line = line.rstrip("\r\n")
            if line == END:
                break
            if not line.startswith("#") or len(lines) >= MAX_BLOCK_LINES:
                return None
            lines.append(line[2:] if line.startswith("# ") else line[1:])
        else:
            return None
    import yaml

    try:
        meta = yaml.safe_load("\n".join(lines))
    except (yaml.YAMLError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None


def system_of(meta: Mapping[str, Any]) -> str | None:
    """What a block says the run is: its method's first retrieval method, else its tag."""
    method = meta.get("method")
    retrieval = method.get("retrieval") if isinstance(method, Mapping) else None
    if isinstance(retrieval, list) and retrieval and isinstance(retrieval[0], Mapping):
        name = retrieval[0].get("method")
        if isinstance(name, str) and name:
            return name
    tag = meta.get("tag")
    return tag if isinstance(tag, str) and tag else None
