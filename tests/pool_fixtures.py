"""Tiny collections, runs and qrels for the pooling and judgments tests."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cmrkit.fileio import gzip_writer

SENTENCES = ["Alice met Bob in Paris.", "They talked for hours.", "Then Alice left <early>."]


def sentence_units(passage: str, doc_id: str, mention: tuple[int, int] | None = None) -> list:
    """Three sentence units cut from one passage (ids ``P:<passage>:<start>:<end>``)."""
    units, at = [], 0
    for i, text in enumerate(SENTENCES):
        rec: dict[str, Any] = {
            "id": f"P:{passage}:{at}:{at + len(text)}",
            "contents": text,
            "doc_id": doc_id,
            "title": doc_id.title(),
            "kind": "annotated",
            "mentions": [],
            "passage": passage,
        }
        if i == 1 and mention:
            rec["mentions"] = [
                {
                    "mention_id": f"{passage}-m",
                    "cluster": "c1",
                    "start": mention[0],
                    "end": mention[1],
                }
            ]
        units.append(rec)
        at += len(text) + 1
    return units


def write_collection(
    root: Path,
    queries: Sequence[str],
    docnos: Sequence[str],
    *,
    extra_units: Sequence[Mapping[str, Any]] = (),
    name: str = "tiny",
) -> Path:
    """A collection folder ``root/name`` with one passage unit per docno plus ``extra_units``;
    each query's own unit is ``U:<qid>``."""
    folder = root / name
    folder.mkdir(parents=True)
    with gzip_writer(folder / "corpus.jsonl.gz") as f:
        for q in queries:
            f.write(
                json.dumps(
                    {
                        "id": f"U:{q}",
                        "contents": f"Query unit of {q}.",
                        "doc_id": f"doc-{q}",
                        "title": None,
                        "kind": "annotated",
                        "mentions": [{"mention_id": q, "cluster": "c", "start": 0, "end": 5}],
                    }
                )
                + "\n"
            )
        for d in docnos:
            f.write(
                json.dumps(
                    {
                        "id": d,
                        "contents": f"Text of {d}.",
                        "doc_id": None,
                        "title": None,
                        "kind": "distractor",
                    }
                )
                + "\n"
            )
        for u in extra_units:
            f.write(json.dumps(u) + "\n")
    with open(folder / "topics.jsonl", "w", encoding="utf-8") as f:
        for q in queries:
            context = f"Here the mention {q} <b>sits</b>."
            start = context.index(q)
            f.write(
                json.dumps(
                    {
                        "qid": q,
                        "split": "test",
                        "cluster": "c",
                        "mention": q,
                        "span": [start, start + len(q)],
                        "context": context,
                        "unit": f"U:{q}",
                        "doc_id": f"doc-{q}",
                        "title": None,
                    }
                )
                + "\n"
            )
    return folder


def write_run(path: Path, rows: Mapping[str, Sequence[tuple[str, float]]], tag: str = "t") -> Path:
    """A TREC run from {qid: [(docno, score), ...]} (rank column deliberately unordered)."""
    with open(path, "w", encoding="utf-8") as f:
        for qid, docs in rows.items():
            for i, (docno, score) in enumerate(docs):
                f.write(f"{qid} Q0 {docno} {len(docs) - i} {score} {tag}\n")
    return path


def write_qrels(path: Path, rows: Mapping[str, Mapping[str, int]]) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for qid, docs in rows.items():
            for docno, rel in docs.items():
                f.write(f"{qid} 0 {docno} {rel}\n")
    return path


def read_qrels_lines(path: Path) -> dict[tuple[str, str], int]:
    out = {}
    for line in path.read_text().splitlines():
        qid, _, docno, rel = line.split()
        out[(qid, docno)] = int(rel)
    return out
