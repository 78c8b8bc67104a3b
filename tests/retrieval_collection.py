"""Writes tiny collections in the layout of docs/collection-format.md for the retrieval tests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from cmrkit.fileio import gzip_writer, sha256_file


def unit(
    docno: str,
    text: str,
    *,
    doc_id: str | None = None,
    title: str | None = None,
    passage: str | None = None,
    annotated: bool = False,
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": docno,
        "contents": text,
        "doc_id": doc_id,
        "title": title,
        "kind": "annotated" if annotated else "distractor",
    }
    if annotated:
        record["mentions"] = []
    if passage is not None:
        record["passage"] = passage
    return record


def topic(
    qid: str, split: str, mention: str, context: str, own_unit: str, cluster: str = "c"
) -> dict[str, Any]:
    start = context.index(mention)
    return {
        "qid": qid,
        "split": split,
        "cluster": cluster,
        "cluster_title": None,
        "mention": mention,
        "span": [start, start + len(mention)],
        "context": context,
        "unit": own_unit,
        "doc_id": None,
        "title": None,
        "type": None,
        "n_relevant": 1,
        "source": {"file": "test", "record": 1, "mention_id": qid},
    }


def write_collection(
    root: Path,
    name: str,
    units: Iterable[Mapping[str, Any]],
    topics: Iterable[Mapping[str, Any]],
    qrels: Mapping[str, Mapping[str, Iterable[str]]] | None = None,
) -> Path:
    """Write collections/NAME (corpus, topics, per-split TSV, manifest) and qrels/NAME.SPLIT.txt.

    ``qrels`` maps split -> qid -> relevant docnos.
    """
    coll = root / "collections" / name
    coll.mkdir(parents=True, exist_ok=True)
    with gzip_writer(coll / "corpus.jsonl.gz") as f:
        for u in units:
            f.write(json.dumps(dict(u), ensure_ascii=False) + "\n")
    topics = list(topics)
    with open(coll / "topics.jsonl", "w", encoding="utf-8") as f:
        for t in topics:
            f.write(json.dumps(dict(t), ensure_ascii=False) + "\n")
    for split in sorted({t["split"] for t in topics}):
        with open(coll / f"topics.{split}.tsv", "w", encoding="utf-8") as f:
            for t in topics:
                if t["split"] == split:
                    f.write(f"{t['qid']}\t{t['mention']}\n")
    manifest = {"name": name, "corpus_sha256": sha256_file(coll / "corpus.jsonl.gz")}
    (coll / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    for split, per_query in (qrels or {}).items():
        (root / "qrels").mkdir(exist_ok=True)
        with open(root / "qrels" / f"{name}.{split}.txt", "w", encoding="utf-8") as f:
            for qid, docnos in per_query.items():
                for docno in docnos:
                    f.write(f"{qid} 0 {docno} 1\n")
    return coll
