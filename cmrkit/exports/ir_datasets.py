"""A built collection as ir_datasets datasets: ``cmrkit/<name>/<split>`` and ``cmrkit/<name>``.

``register("collections/sample")`` registers, in ir_datasets' registry, one dataset per split
(docs, queries and qrels) and one for the whole collection (docs and every query), read
straight from the collection's files (nothing is copied or downloaded)::

    import ir_datasets
    from cmrkit.exports.ir_datasets import register

    register("collections/sample")
    ds = ir_datasets.load("cmrkit/sample/test")
    for query in ds.queries_iter(): ...       # CmrkitQuery(query_id, text, context, span, ...)
    for doc in ds.docs_iter(): ...            # CmrkitDoc(doc_id, text, title, mentions, ...)
    for qrel in ds.qrels_iter(): ...          # TrecQrel(query_id, doc_id, relevance, iteration)

Mention spans survive: a doc's ``mentions`` holds ``(mention_id, cluster, start, end)``
character spans in its ``text``; a query's ``span`` is the mention in its ``context`` (the
text of its own unit, ``unit``, which a system should not return). ``docs_store()`` is an
in-memory lookup by doc id, built on first use.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from cmrkit.collection.layout import (
    collection_dir,
    corpus_path,
    qrels_file,
    read_manifest,
    split_order,
    topic_records,
)
from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_jsonl
from cmrkit.trec import read_qrels

PREFIX = "cmrkit"
_registered: dict[str, Path] = {}


class CmrkitDoc(NamedTuple):
    """A unit of the corpus."""

    doc_id: str
    text: str
    title: str
    source_doc_id: str | None
    kind: str
    mentions: tuple[tuple[str, str, int, int], ...]
    passage: str | None

    def default_text(self) -> str:
        return self.text


class CmrkitQuery(NamedTuple):
    """A query: the mention (``text``) in its unit's text (``context``) at ``span``."""

    query_id: str
    text: str
    context: str
    span: tuple[int, int]
    unit: str
    cluster: str
    split: str
    type: str | None

    def default_text(self) -> str:
        return self.text


def _doc(rec: dict[str, Any]) -> CmrkitDoc:
    mentions = tuple(
        (str(m["mention_id"]), str(m["cluster"]), int(m["start"]), int(m["end"]))
        for m in rec.get("mentions") or ()
    )
    return CmrkitDoc(
        rec["id"],
        rec["contents"],
        rec.get("title") or "",
        rec.get("doc_id"),
        rec.get("kind", ""),
        mentions,
        rec.get("passage"),
    )


def _query(rec: dict[str, Any]) -> CmrkitQuery:
    span = rec.get("span") or (0, 0)
    return CmrkitQuery(
        rec["qid"],
        rec.get("mention", ""),
        rec.get("context", ""),
        (int(span[0]), int(span[1])),
        rec.get("unit", ""),
        str(rec.get("cluster", "")),
        rec["split"],
        rec.get("type"),
    )


def _components(collection: Path, split: str | None, qrels: Path | None, n_docs: int | None):
    """The docs, queries and qrels handlers, built on ir_datasets' base classes."""
    from ir_datasets.formats import BaseDocs, BaseQrels, BaseQueries, TrecQrel

    corpus = corpus_path(collection)

    class _Store:
        def __init__(self, docs: Iterator[CmrkitDoc]):
            self._docs = {d.doc_id: d for d in docs}

        def get(self, doc_id: str) -> CmrkitDoc:
            return self._docs[doc_id]

        def get_many(self, doc_ids) -> dict[str, CmrkitDoc]:
            return {d: self._docs[d] for d in doc_ids if d in self._docs}

        def get_many_iter(self, doc_ids) -> Iterator[CmrkitDoc]:
            return (self._docs[d] for d in doc_ids if d in self._docs)

    class Docs(BaseDocs):
        _store: _Store | None = None

        def docs_iter(self) -> Iterator[CmrkitDoc]:
            return (_doc(rec) for _, rec in iter_jsonl(corpus, what="one unit object per line"))

        def docs_count(self) -> int | None:
            return n_docs

        def docs_cls(self) -> type:
            return CmrkitDoc

        def docs_lang(self) -> str:
            return "en"

        def docs_store(self, field: str = "doc_id") -> _Store:
            if self._store is None:
                self._store = _Store(self.docs_iter())
            return self._store

    class Queries(BaseQueries):
        def queries_iter(self) -> Iterator[CmrkitQuery]:
            return (
                _query(t) for t in topic_records(collection) if split is None or t["split"] == split
            )

        def queries_cls(self) -> type:
            return CmrkitQuery

        def queries_lang(self) -> str:
            return "en"

    class Qrels(BaseQrels):
        def qrels_iter(self) -> Iterator[TrecQrel]:
            for qid, docs in read_qrels(qrels).items():
                for docno, rel in docs.items():
                    yield TrecQrel(qid, docno, rel, "0")

        def qrels_path(self) -> str:
            return str(qrels)

        def qrels_cls(self) -> type:
            return TrecQrel

        def qrels_defs(self) -> dict[int, str]:
            return {1: "coreferent (same cluster)", 0: "not coreferent", -1: "pooled, unknown"}

    return Docs(), Queries(), (Qrels() if qrels is not None else None)


def register(
    collection: str | os.PathLike,
    name: str | None = None,
    *,
    qrels_dir: str | os.PathLike | None = None,
) -> list[str]:
    """Register ``cmrkit/<name>`` and ``cmrkit/<name>/<split>`` for a built collection (name:
    the folder's name); returns the dataset ids. A split without qrels gets docs and queries.
    Registering the same collection again is a no-op; another collection under a registered
    name is an error."""
    try:
        import ir_datasets
        from ir_datasets.datasets.base import Dataset
    except ImportError:
        raise CmrkitError(
            "ir_datasets is not installed; pip install ir-datasets (or cmrkit[ir])"
        ) from None
    coll = collection_dir(collection)
    name = name or coll.resolve().name
    n_docs = read_manifest(coll).get("counts", {}).get("corpus_units")
    splits = split_order({t["split"] for t in topic_records(coll)})
    ids = [f"{PREFIX}/{name}"] + [f"{PREFIX}/{name}/{s}" for s in splits]
    for dataset_id in ids:
        known = _registered.get(dataset_id)
        if known is not None and known != coll.resolve():
            raise CmrkitError(
                f"{dataset_id} is already registered for {known}; give another name", path=coll
            )
        if known is None and dataset_id in set(ir_datasets.registry):
            raise CmrkitError(f"{dataset_id} is already an ir_datasets dataset; give another name")
    docs, queries, _ = _components(coll, None, None, n_docs)
    for split, dataset_id in zip([None, *splits], ids, strict=True):
        if dataset_id in _registered:
            continue
        if split is not None:
            _, queries, qrels = _components(coll, split, qrels_file(coll, split, qrels_dir), n_docs)
            dataset = Dataset(docs, queries, qrels)
        else:
            dataset = Dataset(docs, queries)
        ir_datasets.registry.register(dataset_id, dataset)
        _registered[dataset_id] = coll.resolve()
    return ids
