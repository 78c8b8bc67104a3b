"""The working folders a session leaves behind, read back without opening a file by hand.

``collections/NAME/`` (corpus, topics, manifest, index), ``qrels/NAME.SPLIT.txt``,
``runs/NAME/SYSTEM.SPLIT.trec`` with their JSON sidecars, and ``pools/`` (pool files from
``cmrkit pool create``, judgment CSVs). Everything here is cheap: no JVM, no spaCy; the only
expensive step is hashing a corpus to tell whether its index is current (the check that
``cmrkit run`` makes).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cmrkit.collection.layout import qrels_file, read_manifest, split_order, topic_records
from cmrkit.errors import CmrkitError
from cmrkit.fileio import describe_os_error, regular_files
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
    from cmrkit.retrieval.runfile import read_sidecar  # loads retrieval/: only where runs are

    found = []
    for path in regular_files(folder.glob("*.trec")):  # never a FIFO: it would block
        try:
            sidecar = read_sidecar(path) or {}
        except (CmrkitError, OSError) as e:  # one broken sidecar does not hide the others
            text = str(e) if isinstance(e, CmrkitError) else describe_os_error(e)[0]
            logging.getLogger("cmrkit").warning(f"{text}; the run is listed without it")
            sidecar = {}
        name, split = _run_name(path, sidecar)
        found.append(
            RunInfo(
                path=path,
                name=name,
                system=str(sidecar.get("system") or _exported_system(path) or "?"),
                split=split,
                date=datetime.fromtimestamp(path.stat().st_mtime),
                sidecar=sidecar,
            )
        )
    return found


def _exported_system(path: Path) -> str | None:
    """The system of a run without a sidecar that carries an ir_metadata block (`export
    ir-metadata` writes one, and no sidecar): ``bm25 (ir_metadata)``."""
    from cmrkit.exports.ir_metadata import read_block, system_of

    try:
        meta = read_block(path)
    except OSError:
        return None
    system = system_of(meta) if meta else None
    return f"{system} (ir_metadata)" if system else None


def _run_name(path: Path, sidecar: dict[str, Any]) -> tuple[str, str]:
    """A run's name and split as its file says them: ``NAME.SPLIT.trec`` gives NAME (the
    sidecar's split, else SPLIT); any other file name (``run fuse -o runs/w/fused.trec``) is
    the name itself, whatever the sidecar calls the run (its method, for a fused run)."""
    stem, _, split = path.stem.rpartition(".")
    recorded = str(sidecar.get("split") or "")
    if stem and (split == recorded or not recorded):
        return stem, split
    return path.name, recorded or "?"


@dataclass
class Headline:
    """One measure of a run against its split's qrels, averaged over every qrels query (0 where
    the run has no ranking, as ``trec_eval -c``), so runs of one split share their queries."""

    measure: str
    value: float | None
    queries: int  # the qrels queries averaged over
    note: str = ""
    answered: int = 0  # of those, the queries the run ranks documents for
    cached: bool = False  # read from the run's sidecar, not computed


HEADLINE = "headline"  # the sidecar field where status keeps its figures


def _run_stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def headline(
    run: RunInfo,
    qrels: Qrels | None,
    measure: str | None = None,
    *,
    qrels_sha256: str | None = None,
) -> Headline:
    """``measure`` (default: AP, or infAP when the qrels hold pooled but unjudged grades) of
    the run over every query of the qrels, as ``cmrkit eval --all-queries`` computes it.

    With ``qrels_sha256``, the figures are kept in the run's sidecar (field ``headline``: the
    qrels' sha256, the run file's size and modification time, the trec_eval version whose
    numbers they are, and each measure's value,
    queries and queries answered) and read back while the qrels and the run file are those
    they were computed from; a sidecar that cannot be written just is not cached into.
    """
    from cmrkit.evaluation import evaluate, parse_measure
    from cmrkit.trec import read_run_columns

    if qrels is None:
        return Headline(measure or "", None, 0, "no qrels")
    if measure is None:
        pooled = any(rel < 0 for docs in qrels.values() for rel in docs.values())
        measure = "infAP" if pooled else "AP"
    m = parse_measure(measure)
    stamp = _run_stamp(run.path)
    kept = run.sidecar.get(HEADLINE)
    if (
        qrels_sha256 is not None
        and isinstance(kept, dict)
        and kept.get("qrels_sha256") == qrels_sha256
        and kept.get("run_file") == stamp
        and kept.get("trec_eval") == _trec_eval()
        and isinstance(kept.get("scores"), dict)
    ):
        figures = kept["scores"].get(m.name)
        if isinstance(figures, list) and len(figures) == 3:
            value, queries, answered = figures
            return Headline(m.name, value, queries, "", answered, cached=True)
    try:
        result = evaluate(read_run_columns(run.path), qrels, [m], all_queries=True)
    except CmrkitError as e:
        why = "no query in the qrels" if "no query in common" in str(e) else "unreadable"
        return Headline(m.name, None, 0, why)
    answered = result.queries - len(result.missing_from_run)
    h = Headline(m.name, result.aggregate[m.name], result.queries, "", answered)
    if qrels_sha256 is not None:
        _keep_headline(run, qrels_sha256, stamp, h)
    return h


def _trec_eval() -> str:
    """The trec_eval whose numbers the headline figures are (evaluate's default version)."""
    from cmrkit.evaluation.measures.trec import DEFAULT_VERSION, VERSION_NAMES

    return VERSION_NAMES[DEFAULT_VERSION]


def _keep_headline(run: RunInfo, qrels_sha256: str, stamp: list[int], h: Headline) -> None:
    """Add ``h`` to the run's sidecar (staged and renamed; skipped when the run has no
    sidecar of cmrkit's, or it cannot be written now)."""
    from cmrkit.fileio import StagedOutputs
    from cmrkit.retrieval.runfile import sidecar_of

    sidecar_path = sidecar_of(run.path)
    if "identity" not in run.sidecar or not sidecar_path.is_file():
        return
    kept = run.sidecar.get(HEADLINE)
    same = (
        isinstance(kept, dict)
        and kept.get("qrels_sha256") == qrels_sha256
        and kept.get("run_file") == stamp
        and kept.get("trec_eval") == _trec_eval()
        and isinstance(kept.get("scores"), dict)
    )
    scores = dict(kept["scores"]) if same else {}  # type: ignore[index]
    scores[h.measure] = [h.value, h.queries, h.answered]
    updated = {
        **run.sidecar,
        HEADLINE: {
            "qrels_sha256": qrels_sha256,
            "run_file": stamp,
            "trec_eval": _trec_eval(),
            "scores": scores,
        },
    }
    try:
        with StagedOutputs([sidecar_path], force=True) as staged:  # locked from here
            # a run written again since it was read is not overwritten with the old sidecar
            current = json.loads(sidecar_path.read_text(encoding="utf-8"))
            if current != run.sidecar or _run_stamp(run.path) != stamp:
                raise _Changed
            with open(staged.path(sidecar_path), "w", encoding="utf-8") as f:
                f.write(json.dumps(updated, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    except (_Changed, CmrkitError, OSError, ValueError):
        return  # changed, busy (a run being written), read-only: the figures are not kept
    run.sidecar = updated


class _Changed(Exception):
    """The run or its sidecar changed while status read it."""


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
    for path in regular_files(folder.rglob("*.jsonl")):
        with open(path, encoding="utf-8", errors="replace") as f:
            first = f.readline()
            rest = sum(1 for line in f if line.strip())
        try:
            header = json.loads(first)
        except (json.JSONDecodeError, RecursionError):
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
    """Judgment CSVs under ``pools_dir``: ``query_id,doc_id,worker_id,label`` files (simple),
    ``pair_id,worker_id,label`` files (blind: the offline page's answers, ``assess export``)
    and MTurk batch results (``HITId``, ``WorkerId``, ``Answer.*`` columns)."""
    import csv

    folder = Path(pools_dir)
    if not folder.is_dir():
        return []
    found = []
    for path in regular_files(folder.rglob("*.csv")):
        with open(path, encoding="utf-8", errors="replace", newline="") as f:
            reader = csv.reader(f)
            header = next(reader, [])
            rows = sum(1 for _ in reader)
        if {"query_id", "doc_id", "label"} <= set(header):
            found.append(JudgmentsInfo(path, "simple", rows))
        elif {"pair_id", "worker_id", "label"} <= set(header):  # the page's, `assess export`'s
            found.append(JudgmentsInfo(path, "blind", rows))
        elif "WorkerId" in header and any(h.startswith("Answer.") for h in header):
            found.append(JudgmentsInfo(path, "mturk", rows))
    return found


def other_qrels(name: str, qrels_dir: str | os.PathLike = "qrels") -> list[Path]:
    """``qrels/NAME.*.txt`` files: the built splits' and any others (e.g. pooled judgments)."""
    folder = Path(qrels_dir)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob(f"{name}.*.txt") if p.is_file())
