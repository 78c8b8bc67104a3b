"""Pools of candidates for relevance assessment: create, read, report, and test for bias.

A pool is the union of the top ``depth`` documents of several runs for each query, minus the
pairs already judged (known from the annotations or an earlier round). It is written as a JSONL
file: the first line is a header (format, the collection it came from, runs, parameters, query
list), every other line one query/candidate pair::

    {"qid": "q1", "docno": "P:7", "ranks": {"bm25": 3, "qe": 12}, "best_rank": 3, "sampled": true}

``ranks`` says which runs found the candidate and at what rank (trec_eval order). With a judging
budget (``sample``) only the ``sampled`` pairs are assessed; the others stay in the pool and end
up as ``-1`` (pooled, unjudged) in the final qrels so that infAP is well defined.
"""

from __future__ import annotations

import heapq
import json
import os
import random
import re
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmrkit.collection.layout import (
    collection_dir,
    corpus_path,
    read_manifest,
    topics_by_qid,
    topics_path,
)
from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_jsonl, iter_lines, sha256_file
from cmrkit.trec import Run, natural_key, ranked, read_qrels, read_run

if TYPE_CHECKING:
    from cmrkit.judgments.auto.pairs import Targets

POOL_FORMAT = "cmrkit-pool"
POOL_VERSION = 1


@dataclass
class PoolPair:
    """One query/candidate pair of a pool."""

    qid: str
    docno: str
    ranks: dict[str, int]
    sampled: bool = True
    needed: int | None = None
    order: int | None = None  # place in the strategy's order of selection (from 1)
    round: int | None = None  # adaptive strategies: the round that selected it
    arm: str | None = None  # adaptive strategies: the run it was drawn from
    label: int | None = None  # adaptive strategies: the judgment fed back (1, 0, -1 unknown)
    stratum: str | None = None  # strata: its stratum of best ranks, e.g. "11-30"
    inclusion: float | None = None  # strata: the probability that it was sampled
    judge_label: int | None = None  # hybrid judging: an automatic judge's Likert label
    judge_probability: float | None = None  # and its probability of relevance
    labelled_by: str | None = None  # "judge": the judge's label is taken, people skip it

    @property
    def best_rank(self) -> int:
        return min(self.ranks.values()) if self.ranks else 0

    def to_json(self) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "qid": self.qid,
            "docno": self.docno,
            "ranks": dict(sorted(self.ranks.items())),
            "best_rank": self.best_rank,
            "sampled": self.sampled,
        }
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value is not None:
                rec[name] = value
        return rec


_OPTIONAL = (
    "needed",
    "order",
    "round",
    "arm",
    "label",
    "stratum",
    "inclusion",
    "judge_label",
    "judge_probability",
    "labelled_by",
)
_OPTIONAL_TYPES = {
    "needed": int,
    "order": int,
    "round": int,
    "arm": str,
    "label": int,
    "stratum": str,
    "inclusion": float,
    "judge_label": int,
    "judge_probability": float,
    "labelled_by": str,
}


@dataclass
class Pool:
    """A pool: its header (provenance, parameters) and its pairs in a fixed order."""

    header: dict[str, Any]
    pairs: list[PoolPair] = field(default_factory=list)

    @property
    def queries(self) -> list[str]:
        return list(self.header["queries"])

    @property
    def run_names(self) -> list[str]:
        return [r["name"] for r in self.header["runs"]]

    def pair_index(self) -> dict[tuple[str, str], PoolPair]:
        return {(p.qid, p.docno): p for p in self.pairs}


# --- the collection a pool belongs to ------------------------------------------------------


def collection_identity(collection: str | os.PathLike) -> dict[str, Any]:
    """Name, path and checksums of a collection folder (``corpus.jsonl.gz`` + ``topics.jsonl``)."""
    root = Path(collection)
    if not root.is_dir():
        raise CmrkitError(
            "collection folder not found; build it with `cmrkit build-collection` or pass "
            "--collection collections/NAME",
            path=root,
        )
    corpus, topics = corpus_path(root), topics_path(root)
    for p in (corpus, topics):
        if not p.is_file():
            raise CmrkitError("missing from the collection folder; rebuild the collection", path=p)
    return {
        "name": root.resolve().name,
        "path": str(root),
        "corpus_sha256": sha256_file(corpus),
        "topics_sha256": sha256_file(topics),
    }


def check_collection(pool: Pool, collection: str | os.PathLike, pool_path: object) -> None:
    """Refuse a collection that is not the one the pool was made from."""
    mine = pool.header["collection"]
    corpus = corpus_path(collection)
    if not corpus.is_file():
        raise CmrkitError(
            f"the pool comes from collection {mine['name']!r} ({mine['path']}), whose corpus is "
            "not here; pass --collection with that collection's folder",
            path=corpus,
        )
    if sha256_file(corpus) != mine["corpus_sha256"]:
        raise CmrkitError(
            f"the pool was made from collection {mine['name']!r} (corpus sha256 "
            f"{mine['corpus_sha256'][:12]}...), not from {collection} (a different corpus); "
            "use the pool's own collection or pool again",
            path=pool_path,
        )


def read_query_ids(path: str | os.PathLike) -> list[str]:
    """Query ids of a topics file: ``topics.jsonl`` (JSON lines) or ``qid<TAB>text`` TSV."""
    qids: list[str] = []
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        if line.lstrip().startswith("{"):
            try:
                qids.append(str(json.loads(line)["qid"]))
            except (json.JSONDecodeError, KeyError, TypeError, RecursionError):
                raise CmrkitError(
                    "expected a JSON object with a 'qid'", path=path, where=f"line {n}"
                ) from None
        else:
            qids.append(line.split("\t", 1)[0].strip())
    if not qids:
        raise CmrkitError("no queries in the topics file", path=path)
    return qids


# --- sampling ------------------------------------------------------------------------------


def parse_sample_spec(spec: str) -> list[tuple[int, int, float]]:
    """``1-10:1.0,11-30:0.5`` -> [(1, 10, 1.0), (11, 30, 0.5)] (rank strata, share judged)."""
    strata: list[tuple[int, int, float]] = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*:\s*([0-9.]+)\s*", part)
        if not m:
            raise CmrkitError(
                f"--sample stratum {part.strip()!r} is not LO-HI:SHARE (e.g. 1-10:1.0,11-30:0.5)"
            )
        lo, hi, share = int(m[1]), int(m[2]), float(m[3])
        if lo < 1 or hi < lo or not 0.0 <= share <= 1.0:
            raise CmrkitError(
                f"--sample stratum {part.strip()!r}: ranks must satisfy 1 <= LO <= HI and the "
                "share must lie in 0..1"
            )
        for a, b, _ in strata:
            if lo <= b and a <= hi:
                raise CmrkitError(f"--sample strata {a}-{b} and {lo}-{hi} overlap")
        strata.append((lo, hi, share))
    return strata


def _apply_sample(pairs: list[PoolPair], strata: list[tuple[int, int, float]], seed: int) -> None:
    """Mark a stratified random subset of each query's pairs as sampled (by best rank)."""
    groups: dict[tuple[str, int], list[PoolPair]] = {}
    for p in pairs:
        p.sampled = False
        for i, (lo, hi, _) in enumerate(strata):
            if lo <= p.best_rank <= hi:
                groups.setdefault((p.qid, i), []).append(p)
                break
    for (qid, i), members in groups.items():
        share = strata[i][2]
        k = int(share * len(members) + 0.5)
        members.sort(key=lambda p: p.docno)
        rng = random.Random(f"{seed}:{qid}:{i}")
        for p in rng.sample(members, k):
            p.sampled = True


# --- creation ------------------------------------------------------------------------------


def _run_name(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".trec", ".txt", ".run"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name or path.name


def _top(docs: Mapping[str, float], k: int) -> list[tuple[str, float]]:
    """The first ``k`` of :func:`cmrkit.trec.ranked` without sorting the whole ranking."""
    if len(docs) <= 4 * k:
        return ranked(docs)[:k]
    items = list(docs.items())
    single = array("f", [score for _, score in items]).tolist()
    best = heapq.nlargest(k, range(len(items)), key=lambda i: (single[i], items[i][0]))
    return [items[i] for i in best]


def infer_collection(runs: Sequence[str | os.PathLike]) -> Path:
    """``runs/NAME/system.trec`` -> ``collections/NAME`` when that folder exists."""
    for r in runs:
        for p in (Path(r), Path(r).resolve()):
            if p.parent.parent.name == "runs":
                guess = p.parent.parent.parent / "collections" / p.parent.name
                if guess.is_dir():
                    return guess
    raise CmrkitError(
        "cannot tell which collection the runs belong to; pass --collection collections/NAME"
    )


def create_pool(
    runs: Sequence[str | os.PathLike],
    collection: str | os.PathLike,
    *,
    depth: int = 30,
    exclude: Sequence[str | os.PathLike] = (),
    topics: str | os.PathLike | None = None,
    sample: str | None = None,
    seed: int = 0,
    preloaded: Mapping[str, Run] | None = None,
) -> Pool:
    """Pool the top ``depth`` of each run per query, minus pairs judged in ``exclude`` qrels.

    The query's own unit is never a candidate: it is removed before ranks are counted.
    ``topics`` restricts the pool to its queries.
    ``sample`` (e.g. ``1-10:1.0,11-30:0.5``) marks a stratified random subset, by best rank, as
    the pairs to judge. ``preloaded`` holds runs already read, by the path given in ``runs``.
    """
    if depth < 1:
        raise CmrkitError(f"--depth must be at least 1, not {depth}")
    if not runs:
        raise CmrkitError("give at least one run file to pool")
    strata = parse_sample_spec(sample) if sample else None
    identity = collection_identity(collection)
    topic_records = topics_by_qid(collection)
    wanted = set(read_query_ids(topics)) if topics is not None else None

    run_meta: list[dict[str, Any]] = []
    loaded: list[tuple[str, Run]] = []
    for r in runs:
        name = _run_name(Path(r))
        if any(m["name"] == name for m in run_meta):
            raise CmrkitError(
                f"two runs are named {name!r}; pool runs with distinct file names", path=r
            )
        run = preloaded[str(r)] if preloaded is not None and str(r) in preloaded else read_run(r)
        for qid in sorted(run, key=natural_key):
            if qid not in topic_records:
                raise CmrkitError(
                    f"query {qid} is not a topic of collection {identity['name']!r}; "
                    "is this run from another collection?",
                    path=r,
                )
        run_meta.append({"name": name, "path": str(r), "sha256": sha256_file(r)})
        loaded.append((name, run))

    known: dict[tuple[str, str], int] = {}
    excluded_meta = []
    for q in exclude:
        qrels = read_qrels(q)
        for qid, docs in qrels.items():
            for docno, rel in docs.items():
                known[(qid, docno)] = rel
        excluded_meta.append({"path": str(q), "sha256": sha256_file(q)})

    found: dict[tuple[str, str], dict[str, int]] = {}
    queries: set[str] = set()
    n_excluded = 0
    excluded_seen: set[tuple[str, str]] = set()
    for name, run in loaded:
        for qid, docs in run.items():
            if wanted is not None and qid not in wanted:
                continue
            queries.add(qid)
            own_unit = topic_records[qid].get("unit")
            candidates = [d for d, _ in _top(docs, depth + 1) if d != own_unit]
            for rank, docno in enumerate(candidates[:depth], 1):
                if (qid, docno) in known:
                    if (qid, docno) not in excluded_seen:
                        excluded_seen.add((qid, docno))
                        n_excluded += 1
                    continue
                found.setdefault((qid, docno), {})[name] = rank
    if not queries:
        raise CmrkitError("no query of the runs is in --topics; nothing to pool", path=topics)

    pairs = [PoolPair(qid, docno, ranks) for (qid, docno), ranks in found.items()]
    order = {q: natural_key(q) for q in queries}
    pairs.sort(key=lambda p: (order[p.qid], p.best_rank, p.docno))
    if strata:
        _apply_sample(pairs, strata, seed)
    header = {
        "format": POOL_FORMAT,
        "version": POOL_VERSION,
        "collection": identity,
        "depth": depth,
        "runs": run_meta,
        "excluded_qrels": excluded_meta,
        "excluded_pairs": n_excluded,
        "sample": {"spec": sample, "seed": seed} if sample else None,
        "queries": sorted(queries, key=natural_key),
    }
    return Pool(header, pairs)


# --- reading and writing -------------------------------------------------------------------


def write_pool(pool: Pool, path: str | os.PathLike) -> None:
    """Write a pool as JSONL (header line, then one line per pair)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(pool.header, sort_keys=True, ensure_ascii=False) + "\n")
        for p in pool.pairs:
            f.write(json.dumps(p.to_json(), sort_keys=True, ensure_ascii=False) + "\n")


def read_pool(path: str | os.PathLike) -> Pool:
    """Read and validate a pool file written by :func:`write_pool`."""
    header: dict[str, Any] | None = None
    pairs: list[PoolPair] = []
    seen: set[tuple[str, str]] = set()
    for n, rec in iter_jsonl(path, what="a pool file from `cmrkit pool create`"):
        if header is None:
            if rec.get("format") != POOL_FORMAT:
                raise CmrkitError(
                    "not a cmrkit pool file (no pool header on the first line); "
                    "make one with `cmrkit pool create`",
                    path=path,
                    where="line 1",
                )
            if rec.get("version") != POOL_VERSION:
                raise CmrkitError(
                    f"pool format version {rec.get('version')} is not supported "
                    f"(expected {POOL_VERSION})",
                    path=path,
                    where="line 1",
                )
            header = rec
            continue
        try:
            pair = PoolPair(
                str(rec["qid"]),
                str(rec["docno"]),
                {str(k): int(v) for k, v in rec["ranks"].items()},
                bool(rec.get("sampled", True)),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            raise CmrkitError(
                "a pool pair needs 'qid', 'docno' and 'ranks' {run: rank}",
                path=path,
                where=f"line {n}",
            ) from None
        for name, kind in _OPTIONAL_TYPES.items():
            value = rec.get(name)
            if value is None:
                continue
            try:
                setattr(pair, name, kind(value))
            except (TypeError, ValueError):
                raise CmrkitError(
                    f"pool pair field {name!r} must be a {kind.__name__}, not {value!r}",
                    path=path,
                    where=f"line {n}",
                ) from None
        key = (pair.qid, pair.docno)
        if key in seen:
            raise CmrkitError(
                f"pair {pair.qid} {pair.docno} appears twice", path=path, where=f"line {n}"
            )
        seen.add(key)
        pairs.append(pair)
    if header is None:
        raise CmrkitError("empty pool file", path=path)
    return Pool(header, pairs)


def subset_pool(
    pool: Pool, keep: Mapping[tuple[str, str], int | None], extra: Mapping[str, Any]
) -> Pool:
    """A pool of only the pairs in ``keep`` (all sampled; ``keep`` maps each to the number of
    assessments it still needs, or None), with ``extra`` added to its header."""
    pairs = [
        PoolPair(p.qid, p.docno, dict(p.ranks), True, keep[(p.qid, p.docno)])
        for p in pool.pairs
        if (p.qid, p.docno) in keep
    ]
    header = dict(pool.header)
    header.update(extra)
    header["sample"] = None
    header["queries"] = sorted({p.qid for p in pairs}, key=natural_key)
    return Pool(header, pairs)


# --- report --------------------------------------------------------------------------------


def pool_report(pool: Pool) -> dict[str, Any]:
    """Candidates per query, unique contributions per run and pairwise overlap between runs."""
    per_query = {q: 0 for q in pool.queries}
    sampled = 0
    for p in pool.pairs:
        per_query[p.qid] = per_query.get(p.qid, 0) + 1
        sampled += p.sampled
    counts = list(per_query.values()) or [0]
    names = pool.run_names
    contributed = {n: 0 for n in names}
    unique = {n: 0 for n in names}
    shared = {a: {b: 0 for b in names} for a in names}
    for p in pool.pairs:
        runs = sorted(p.ranks)
        for a in runs:
            contributed[a] += 1
            for b in runs:
                shared[a][b] += 1
        if len(runs) == 1:
            unique[runs[0]] += 1
    overlap = {}
    for a in names:
        for b in names:
            if a < b:
                union = contributed[a] + contributed[b] - shared[a][b]
                overlap[f"{a}|{b}"] = {
                    "shared": shared[a][b],
                    "jaccard": shared[a][b] / union if union else 0.0,
                }
    judge = pool.header.get("judge")
    return {
        "queries": len(per_query),
        "pairs": len(pool.pairs),
        "sampled": sampled,
        **({"judge_labelled": judge["judge_labelled"]} if isinstance(judge, dict) else {}),
        "excluded_known": pool.header.get("excluded_pairs", 0),
        "per_query": {
            "mean": sum(counts) / len(counts),
            "min": min(counts),
            "max": max(counts),
        },
        "runs": {n: {"contributed": contributed[n], "unique": unique[n]} for n in names},
        "overlap": overlap,
    }


def annotated_pairs(pool: Pool, collection: str | os.PathLike) -> dict[str, int]:
    """For each qrels file the collection's manifest lists: how many of the pool's pairs it
    already judges (pairs a pool made without ``--qrels`` would send to assessors again)."""
    try:
        files = [Path(p) for p in read_manifest(collection)["files"]["qrels"].values()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    pairs = {(p.qid, p.docno) for p in pool.pairs}
    found = {}
    for path in files:
        if path.is_file():
            n = sum(1 for qid, docs in read_qrels(path).items() for d in docs if (qid, d) in pairs)
            if n:
                found[str(path)] = n
    return found


def pool_targets(path: str | os.PathLike, collection: str | os.PathLike | None = None) -> Targets:
    """The sampled pairs of a pool (the pairs people would judge) as an automatic judge's
    targets, on the pool's collection (or ``collection``, checked to be it)."""
    from cmrkit.judgments.auto.pairs import Targets, sort_pairs

    pool = read_pool(path)
    if collection is not None:
        coll = collection_dir(collection)
        check_collection(pool, coll, path)
    else:
        recorded_path = (pool.header.get("collection") or {}).get("path")
        if not isinstance(recorded_path, str):
            raise CmrkitError(
                "the pool's header names no collection folder; pass --collection", path=path
            )
        coll = collection_dir(recorded_path)
        check_collection(pool, coll, path)
    pairs = sort_pairs((p.qid, p.docno) for p in pool.pairs if p.sampled)
    if not pairs:
        raise CmrkitError("the pool has no sampled pair to judge", path=path)
    return Targets(pairs, coll, {"pool": {"path": str(path), "sha256": sha256_file(path)}})
