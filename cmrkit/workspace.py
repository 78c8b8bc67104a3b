"""The working folders a session leaves behind, read back without opening a file by hand.

``collections/NAME/`` (corpus, topics, manifest, index), ``qrels/NAME.SPLIT.txt``,
``runs/NAME/SYSTEM.SPLIT.trec`` with their JSON sidecars, and ``pools/`` (pool files from
``cmrkit pool create``, judgment CSVs). Everything here is cheap: no JVM, no spaCy; the only
expensive step is hashing a corpus to tell whether its index is current (the check that
``cmrkit run`` makes).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cmrkit.collection.layout import qrels_file, read_manifest, split_order, topic_records
from cmrkit.errors import CmrkitError
from cmrkit.trec import Qrels


def index_state(collection: Path) -> str:
    """``current``, ``stale`` (built from another corpus), ``foreign`` (not cmrkit's) or
    ``missing``: the check ``cmrkit run`` makes, without starting the JVM."""
    from cmrkit.retrieval.index import index_state as state

    return state(collection)


@dataclass
class SplitInfo:
    """One split of a collection: its queries, mean known relevant, and its qrels file."""

    split: str
    queries: int
    mean_relevant: float | None
    qrels: Path | None


@dataclass
class CollectionInfo:
    """A collection folder at a glance."""

    name: str
    path: Path
    units: int | None
    index: str
    splits: list[SplitInfo]


def describe_collection(
    collection: Path, qrels_dir: str | os.PathLike | None = None
) -> CollectionInfo:
    """Splits and counts from the manifest (else the topics), the index state, the qrels."""
    manifest = read_manifest(collection)
    stats = manifest.get("splits") if isinstance(manifest.get("splits"), dict) else {}
    if not stats:
        for rec in topic_records(collection):
            stats.setdefault(rec["split"], {"queries": 0})["queries"] += 1
    units = manifest.get("counts", {}).get("corpus_units")
    splits = [
        SplitInfo(
            s,
            int(stats[s].get("queries", 0)),
            stats[s].get("mean_relevant"),
            qrels_file(collection, s, qrels_dir),
        )
        for s in split_order(list(stats))
    ]
    return CollectionInfo(
        collection.resolve().name,
        collection,
        units if isinstance(units, int) else None,
        index_state(collection),
        splits,
    )


@dataclass
class RunInfo:
    """A run file under ``runs/NAME/`` and what its sidecar says about it."""

    path: Path
    name: str
    system: str
    split: str
    date: datetime
    sidecar: dict[str, Any] = field(default_factory=dict)


def collection_runs(name: str, runs_dir: str | os.PathLike = "runs") -> list[RunInfo]:
    """The ``*.trec`` runs of a collection, by file name; run name, system and split from the
    sidecar (else from the file name ``NAME.SPLIT.trec``)."""
    folder = Path(runs_dir) / name
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.glob("*.trec")):
        sidecar: dict[str, Any] = {}
        try:
            obj = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
            sidecar = obj if isinstance(obj, dict) else {}
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            pass
        stem, _, split = path.stem.rpartition(".")
        found.append(
            RunInfo(
                path=path,
                name=str(sidecar.get("name") or stem or path.stem),
                system=str(sidecar.get("system") or "?"),
                split=str(sidecar.get("split") or split),
                date=datetime.fromtimestamp(path.stat().st_mtime),
                sidecar=sidecar,
            )
        )
    return found


@dataclass
class Headline:
    """One measure of a run against its split's qrels, over the queries in both."""

    measure: str
    value: float | None
    queries: int
    note: str = ""


def headline(run: RunInfo, qrels: Qrels | None, measure: str | None = None) -> Headline:
    """``measure`` (default: AP, or infAP when the qrels hold pooled but unjudged grades) of
    the run, averaged over the queries in both run and qrels, as ``cmrkit eval`` does."""
    from cmrkit.evaluation import evaluate, parse_measure
    from cmrkit.trec import read_run_columns

    if qrels is None:
        return Headline(measure or "", None, 0, "no qrels")
    if measure is None:
        pooled = any(rel < 0 for docs in qrels.values() for rel in docs.values())
        measure = "infAP" if pooled else "AP"
    m = parse_measure(measure)
    try:
        result = evaluate(read_run_columns(run.path), qrels, [m])
    except CmrkitError as e:
        why = "no query in the qrels" if "no query in common" in str(e) else "unreadable"
        return Headline(m.name, None, 0, why)
    return Headline(m.name, result.aggregate[m.name], result.queries)


@dataclass
class PoolInfo:
    """A pool file from ``cmrkit pool create``: its collection, depth, runs and size."""

    path: Path
    collection: str
    depth: int | None
    runs: int
    queries: int
    pairs: int


@dataclass
class JudgmentsInfo:
    """A judgments CSV (simple or MTurk results): its rows."""

    path: Path
    kind: str
    rows: int


def find_pools(pools_dir: str | os.PathLike = "pools") -> list[PoolInfo]:
    """Pool files (JSONL with a cmrkit pool header) anywhere under ``pools_dir``."""
    folder = Path(pools_dir)
    if not folder.is_dir():
        return []
    pools = []
    for path in sorted(folder.rglob("*.jsonl")):
        with open(path, encoding="utf-8", errors="replace") as f:
            first = f.readline()
            rest = sum(1 for line in f if line.strip())
        try:
            header = json.loads(first)
        except json.JSONDecodeError:
            continue
        if not isinstance(header, dict) or header.get("format") != "cmrkit-pool":
            continue
        coll = header.get("collection") or {}
        pools.append(
            PoolInfo(
                path=path,
                collection=str(coll.get("name", "?")) if isinstance(coll, dict) else "?",
                depth=header.get("depth"),
                runs=len(header.get("runs") or []),
                queries=len(header.get("queries") or []),
                pairs=rest,
            )
        )
    return pools


def find_judgments(pools_dir: str | os.PathLike = "pools") -> list[JudgmentsInfo]:
    """Judgment CSVs under ``pools_dir``: ``query_id,doc_id,worker_id,label`` files and MTurk
    batch results (``HITId``, ``WorkerId``, ``Answer.*`` columns)."""
    import csv

    folder = Path(pools_dir)
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.rglob("*.csv")):
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            reader = csv.reader(f)
            header = next(reader, [])
            rows = sum(1 for _ in reader)
        if {"query_id", "doc_id", "label"} <= set(header):
            found.append(JudgmentsInfo(path, "simple", rows))
        elif "WorkerId" in header and any(h.startswith("Answer.") for h in header):
            found.append(JudgmentsInfo(path, "mturk", rows))
    return found


def other_qrels(name: str, qrels_dir: str | os.PathLike = "qrels") -> list[Path]:
    """``qrels/NAME.*.txt`` files: the built splits' and any others (e.g. pooled judgments)."""
    folder = Path(qrels_dir)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob(f"{name}.*.txt") if p.is_file())
