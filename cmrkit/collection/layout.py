"""Reading a collection folder (see docs/collection-format.md) for indexing and retrieval."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_jsonl

CORPUS = "corpus.jsonl.gz"
TOPICS = "topics.jsonl"
INDEX_DIR = "index"


@dataclass(frozen=True)
class Topic:
    """The parts of a topics.jsonl record that retrieval uses."""

    qid: str
    split: str
    mention: str
    context: str
    span: tuple[int, int]
    unit: str
    exclude_doc: str | None = None  # units of this document are never results (TAC collections)
    chain: str | None = None  # words of the mention's within-document coreference chain


def collection_dir(collection: str | Path) -> Path:
    """The collection folder; a clear error when it is missing or not a collection."""
    path = Path(collection)
    if not path.exists():
        raise CmrkitError(
            "no such collection folder; build one with `cmrkit build-collection` or name the "
            "folder that holds corpus.jsonl.gz",
            path=path,
        )
    if not path.is_dir():
        raise CmrkitError(
            "is not a folder; name the collection folder (collections/NAME)", path=path
        )
    if not (path / CORPUS).exists():
        raise CmrkitError(
            f"no {CORPUS} in this folder; is it a collection built by `cmrkit build-collection`?",
            path=path,
        )
    return path


def corpus_path(collection: Path) -> Path:
    return collection / CORPUS


def iter_corpus(collection: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for every unit of the corpus, with the keys retrieval needs checked."""
    path = corpus_path(collection)
    for n, record in iter_jsonl(path, what="one unit object per line"):
        for key in ("id", "contents"):
            if not isinstance(record.get(key), str):
                raise CmrkitError(
                    f"field {key!r} missing or not a string", path=path, where=f"line {n}"
                )
        yield n, record


def read_topics(collection: Path, split: str | None = None) -> list[Topic]:
    """The topics of a split (all topics when ``split`` is None), in file order."""
    path = collection / TOPICS
    if not path.exists():
        raise CmrkitError(
            "no topics file; rebuild the collection with `cmrkit build-collection`", path=path
        )
    topics: list[Topic] = []
    splits: set[str] = set()
    for n, rec in iter_jsonl(path, what="one topic object per line"):
        where = f"line {n}"
        for key in ("qid", "split", "mention", "context", "unit"):
            if not isinstance(rec.get(key), str):
                raise CmrkitError(f"field {key!r} missing or not a string", path=path, where=where)
        span = rec.get("span")
        if (
            not isinstance(span, list)
            or len(span) != 2
            or not all(isinstance(x, int) for x in span)
        ):
            raise CmrkitError(
                "field 'span' must be [start, end] (integers)", path=path, where=where
            )
        splits.add(rec["split"])
        if split is None or rec["split"] == split:
            topics.append(
                Topic(
                    rec["qid"],
                    rec["split"],
                    rec["mention"],
                    rec["context"],
                    (span[0], span[1]),
                    rec["unit"],
                    rec.get("exclude_doc") if isinstance(rec.get("exclude_doc"), str) else None,
                    rec.get("chain") if isinstance(rec.get("chain"), str) else None,
                )
            )
    if split is not None and not topics:
        known = ", ".join(sorted(splits)) or "none"
        raise CmrkitError(
            f"no topics in split {split!r} (splits present: {known}); choose one with --split",
            path=path,
        )
    return topics


def topic_splits(collection: Path) -> list[str]:
    """The splits of a collection's topics, sorted."""
    path = Path(collection) / TOPICS
    if not path.exists():
        raise CmrkitError(
            "no topics file; rebuild the collection with `cmrkit build-collection`", path=path
        )
    splits: set[str] = set()
    for n, rec in iter_jsonl(path, what="one topic object per line"):
        if not isinstance(rec.get("split"), str):
            raise CmrkitError("field 'split' missing or not a string", path=path, where=f"line {n}")
        splits.add(rec["split"])
    return sorted(splits)


def resolve_split(collection: Path, split: str | None) -> str:
    """``split`` when given; else ``test`` when the collection has it, else its only split."""
    if split is not None:
        return split
    splits = topic_splits(collection)
    if "test" in splits:
        return "test"
    if len(splits) == 1:
        return splits[0]
    raise CmrkitError(
        f"the collection has no test split; choose one of {', '.join(splits) or 'none'} "
        "with --split",
        path=Path(collection) / TOPICS,
    )


def qrels_path(collection: Path, split: str, qrels_dir: Path | None = None) -> Path:
    """``qrels/NAME.SPLIT.txt`` in the working folder (or under ``qrels_dir``)."""
    base = Path("qrels") if qrels_dir is None else Path(qrels_dir)
    return base / f"{collection.resolve().name}.{split}.txt"
