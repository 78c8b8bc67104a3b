"""The pairs a judge labels, and the texts it reads: a pool's sampled pairs, a run's top k, or
the judged pairs a calibration is fitted on."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cmrkit.collection.layout import (
    Topic,
    iter_corpus,
    qrels_file,
    read_topics,
)
from cmrkit.errors import CmrkitError
from cmrkit.fileio import sha256_file
from cmrkit.judgments.auto.cache import pair_sha256
from cmrkit.retrieval.runfile import (
    check_run_of,
    collection_of,
    own_document_units,
    read_sidecar,
)
from cmrkit.trec import natural_key, ranked, read_qrels, read_run

Pair = tuple[str, str]  # qid, docno


@dataclass
class PairTexts:
    """The texts of the pairs to judge: each query's topic and each unit's text."""

    coll: Path
    topics: dict[str, Topic]
    texts: dict[str, str]

    def key(self, pair: Pair) -> tuple[str, str, str]:
        """The cache key of a pair: its ids and the sha256 of its texts."""
        t = self.topics[pair[0]]
        return (pair[0], pair[1], pair_sha256(t.context, t.span, self.texts[pair[1]]))


@dataclass
class Targets:
    """The pairs to label (sorted as the labels file), where they come from (``source``: the
    sidecar's ``pool`` or ``run`` entry) and their collection."""

    pairs: list[Pair]
    coll: Path
    source: dict[str, Any] = field(default_factory=dict)


def sort_pairs(pairs: Iterable[Pair]) -> list[Pair]:
    return sorted(set(pairs), key=lambda p: (natural_key(p[0]), p[1]))


def top_pairs(
    run: Mapping[str, Mapping[str, float]],
    topics: Mapping[str, Topic],
    coll: Path,
    depth: int,
    path: object,
) -> list[Pair]:
    """Each query's top ``depth`` units of a run, never its own unit nor (TAC) its document's."""
    for qid in run:
        if qid not in topics:
            raise CmrkitError(
                f"query {qid!r} of the run is no topic of {coll} (a run of another collection?)",
                path=path,
            )
    own_docs = own_document_units(coll, [topics[q] for q in run])
    pairs: list[Pair] = []
    for qid, docs in run.items():
        ban = {topics[qid].unit} | set(own_docs.get(qid, frozenset()))
        top = [d for d, _ in ranked(docs) if d not in ban][:depth]
        pairs += [(qid, d) for d in top]
    return pairs


def run_targets(
    path: str | os.PathLike, depth: int, collection: str | os.PathLike | None = None
) -> Targets:
    """The top ``depth`` units of each query of a run (its collection from its sidecar)."""
    if depth < 1:
        raise CmrkitError(f"--depth must be at least 1, got {depth}")
    run_path = Path(path)
    if not run_path.is_file():
        raise CmrkitError("no such run file", path=run_path)
    coll = collection_of(run_path, read_sidecar(run_path), collection)
    topics = {t.qid: t for t in read_topics(coll)}
    pairs = sort_pairs(top_pairs(read_run(run_path), topics, coll, depth, run_path))
    if not pairs:
        raise CmrkitError("the run ranks no unit to judge", path=run_path)
    source = {"run": {"path": str(run_path), "sha256": sha256_file(run_path), "depth": depth}}
    return Targets(pairs, coll, source)


def load_texts(coll: Path, pairs: Iterable[Pair], path: object = None) -> PairTexts:
    """The topics and unit texts of ``pairs``; a query or unit the collection lacks is an
    error naming it."""
    pairs = list(pairs)
    topics = {t.qid: t for t in read_topics(coll)}
    wanted = {d for _, d in pairs}
    texts: dict[str, str] = {}
    for _, record in iter_corpus(coll):
        if record["id"] in wanted:
            texts[record["id"]] = record["contents"]
    for qid, docno in pairs:
        if qid not in topics:
            raise CmrkitError(f"query {qid!r} is no topic of {coll}", path=path)
        if docno not in texts:
            raise CmrkitError(
                f"unit {docno!r} (query {qid}) is not in the corpus of {coll}", path=path
            )
    return PairTexts(coll, topics, texts)


# --- calibration pairs ---------------------------------------------------------------------


@dataclass
class Judged:
    """Pairs with a known binary label, to fit a calibration on, and what they are."""

    labels: dict[Pair, int]  # 1 relevant, 0 not
    fitted_on: dict[str, Any]


def split_judged(
    coll: Path,
    split: str,
    run: str | os.PathLike,
    depth: int,
    qrels_dir: str | os.PathLike | None = None,
    queries: int | None = None,
) -> Judged:
    """The top ``depth`` candidates of a run of ``split``, labelled by the split's qrels (a
    unit the qrels do not list as relevant is not: a collection's qrels are complete), for
    ``queries`` of its judged queries evenly spread over their natural order (None: all)."""
    run_path = Path(run)
    if not run_path.is_file():
        raise CmrkitError("no such run file (--calibrate-run)", path=run_path)
    check_run_of(run_path, read_sidecar(run_path), collection=coll, split=split,
                 what="--calibrate-run")  # fmt: skip
    qpath = qrels_file(coll, split, qrels_dir)
    if qpath is None:
        raise CmrkitError(
            f"no qrels of split {split!r} of {coll} to calibrate on; pass --qrels-dir or "
            "calibrate on people's labels (--calibrate-on FILE)"
        )
    qrels = read_qrels(qpath)
    topics = {t.qid: t for t in read_topics(coll, split)}
    ranking = {q: docs for q, docs in read_run(run_path).items() if q in topics and q in qrels}
    if not ranking:
        raise CmrkitError(
            f"the run ranks none of the judged queries of split {split!r} (a run of another "
            "split?); give a run of that split",
            path=run_path,
        )
    if queries is not None:
        if queries < 1:
            raise CmrkitError(f"--calibrate-queries must be at least 1, got {queries}")
        qids = sorted(ranking, key=natural_key)
        n = min(queries, len(qids))
        chosen = {qids[i * len(qids) // n] for i in range(n)}
        ranking = {q: ranking[q] for q in chosen}
    pairs = top_pairs(ranking, topics, coll, depth, run_path)
    labels = {(q, d): int(qrels[q].get(d, 0) > 0) for q, d in pairs}
    fitted_on = {
        "split": split,
        "queries": len(ranking),
        "qrels": {"path": str(qpath), "sha256": sha256_file(qpath)},
        "run": {"path": str(run_path), "sha256": sha256_file(run_path), "depth": depth},
    }
    return Judged(labels, fitted_on)


def feedback_judged(labels: Mapping[Pair, int], path: str | os.PathLike) -> Judged:
    """People's labels (or qrels) already read to binary labels (1, 0; -1 unknown, left out)."""
    kept = {p: int(v) for p, v in labels.items() if v >= 0}
    return Judged(kept, {"labels": {"path": str(path), "sha256": sha256_file(path)}})
