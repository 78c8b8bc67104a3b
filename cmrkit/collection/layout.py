"""The collection folder (see docs/collection-format.md): the one owner of its files.

``collections/NAME/`` holds ``corpus.jsonl.gz`` (one unit a line), ``topics.jsonl`` (one query a
line, every split), ``topics.SPLIT.tsv`` (for Pyserini), ``manifest.json`` (what built it),
for sources of cross-document coreference corpora (ECB+, uCDCR) ``mentions.jsonl.gz`` (every
annotated mention with its topic, subtopic, sentence, head and singleton flag) and
``documents.jsonl.gz`` (their documents' sentences), and, once indexed, ``index/``; the
qrels of a split lie in ``qrels/NAME.SPLIT.txt``. Everything else
asks this module: for these paths (``corpus_path``, ``topics_path``, ``topics_tsv_path``,
``manifest_path``, ``index_path``, ``qrels_path``, ``qrels_file``, ``mentions_path``,
``documents_path``), for a folder from a bare name (``sample`` -> ``collections/sample``), and
for the records (``iter_corpus``, ``read_topics``, ``topic_records``, ``read_manifest``,
``iter_mentions``, ``iter_documents``). The Python API's ``cmrkit.api.Collection`` is the one
class of that name: a collection's files as DataFrames.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_jsonl

CORPUS = "corpus.jsonl.gz"
TOPICS = "topics.jsonl"
MANIFEST = "manifest.json"
MENTIONS = "mentions.jsonl.gz"
DOCUMENTS = "documents.jsonl.gz"
INDEX_DIR = "index"
COLLECTIONS_DIR = Path("collections")
QRELS_DIR = Path("qrels")
_NO_TOPICS = "no topics file; rebuild the collection with `cmrkit build-collection`"


def topics_tsv_name(split: str) -> str:
    """The file name of a split's Pyserini topics inside the collection folder."""
    return f"topics.{split}.tsv"


def qrels_name(name: str, split: str) -> str:
    """The file name of a collection's qrels for a split (in the qrels folder)."""
    return f"{name}.{split}.txt"


def clusters_name(name: str, split: str) -> str:
    """The file name of a split's gold clusters (beside its qrels)."""
    return f"{name}.{split}.clusters.jsonl"


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
    cluster: str | None = None  # the mention's coreference cluster (as text)


def bare_name(
    collection: str | os.PathLike, collections_dir: str | os.PathLike = COLLECTIONS_DIR
) -> Path:
    """``collections/NAME`` for a bare NAME that is not a folder here (``sample`` ->
    ``collections/sample``, as every command takes it), else the path as given."""
    path = Path(collection)
    if not path.exists() and len(path.parts) == 1 and path.name not in ("", ".", ".."):
        return Path(collections_dir) / path
    return path


def collection_dir(
    collection: str | os.PathLike, collections_dir: str | os.PathLike = COLLECTIONS_DIR
) -> Path:
    """The collection folder (a path, or the bare name of one under ``collections_dir``); a
    clear error when it is missing or not a collection."""
    path = bare_name(collection, collections_dir)
    if not path.exists():
        raise CmrkitError(
            "no such collection folder; build one with `cmrkit build-collection` or name the "
            f"folder that holds corpus.jsonl.gz (a bare NAME is looked up in {collections_dir}/)",
            path=path,
        )
    if not path.is_dir():
        raise CmrkitError(
            "is not a folder; name the collection folder (collections/NAME)", path=path
        )
    if not corpus_path(path).exists():
        raise CmrkitError(
            f"no {CORPUS} in this folder; is it a collection built by `cmrkit build-collection`?",
            path=path,
        )
    return path


def find_collections(collections_dir: str | os.PathLike = COLLECTIONS_DIR) -> list[Path]:
    """Collection folders (with a corpus) under ``collections_dir``, by name."""
    folder = Path(collections_dir)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if corpus_path(p).is_file())


def read_manifest(collection: str | os.PathLike) -> dict[str, Any]:
    """The collection's manifest.json ({} when absent or unreadable)."""
    path = manifest_path(collection)
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


def corpus_path(collection: str | os.PathLike) -> Path:
    """The collection's corpus, ``corpus.jsonl.gz`` (one unit a line)."""
    return Path(collection) / CORPUS


def topics_path(collection: str | os.PathLike) -> Path:
    """The collection's ``topics.jsonl`` (one query a line, every split)."""
    return Path(collection) / TOPICS


def topics_tsv_path(collection: str | os.PathLike, split: str) -> Path:
    """A split's Pyserini topics, ``topics.SPLIT.tsv``."""
    return Path(collection) / topics_tsv_name(split)


def manifest_path(collection: str | os.PathLike) -> Path:
    """The collection's ``manifest.json`` (what built it)."""
    return Path(collection) / MANIFEST


def mentions_path(collection: str | os.PathLike) -> Path:
    """The collection's ``mentions.jsonl.gz``: every annotated mention with what cross-document
    coreference reads of it (written for the ECB+ and uCDCR sources)."""
    return Path(collection) / MENTIONS


def documents_path(collection: str | os.PathLike) -> Path:
    """The collection's ``documents.jsonl.gz``: the sentences of the mentions' documents."""
    return Path(collection) / DOCUMENTS


def iter_mentions(collection: str | os.PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of ``mentions.jsonl.gz``; ``mention_id``, ``split``, ``cluster``,
    ``doc_id`` and ``unit`` are strings."""
    return _records(
        mentions_path(collection),
        "one mention object per line",
        ("mention_id", "split", "cluster", "doc_id", "unit"),
    )


def iter_documents(collection: str | os.PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of ``documents.jsonl.gz``; ``doc_id`` is a string."""
    return _records(documents_path(collection), "one document object per line", ("doc_id",))


def index_path(collection: str | os.PathLike) -> Path:
    """Where the collection's Lucene index lives, ``index/``."""
    return Path(collection) / INDEX_DIR


def _records(
    path: str | os.PathLike, what: str, keys: tuple[str, ...]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of a JSON-lines file whose ``keys`` must be strings."""
    for n, record in iter_jsonl(path, what=what):
        _strings(record, keys, path, f"line {n}")
        yield n, record


def _strings(record: dict[str, Any], keys: tuple[str, ...], path: object, where: str) -> None:
    for key in keys:
        if not isinstance(record.get(key), str):
            raise CmrkitError(f"field {key!r} missing or not a string", path=path, where=where)


def iter_corpus(collection: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) for every unit of the corpus, with the keys retrieval needs checked."""
    return _records(corpus_path(collection), "one unit object per line", ("id", "contents"))


def _topic_lines(path: str | os.PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of a ``topics.jsonl`` file; ``qid`` and ``split`` are strings."""
    if not Path(path).is_file():
        raise CmrkitError(_NO_TOPICS, path=path)
    return _records(path, "one topic object per line", ("qid", "split"))


def read_topic_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Every record of a ``topics.jsonl`` file, in file order; ``qid`` and ``split`` are
    strings."""
    return [rec for _, rec in _topic_lines(path)]


def topic_records(collection: str | os.PathLike) -> list[dict[str, Any]]:
    """Every record of the collection's ``topics.jsonl``, in file order."""
    return read_topic_records(topics_path(collection))


def topics_by_qid(collection: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """The collection's topic records by query id."""
    return {rec["qid"]: rec for rec in topic_records(collection)}


def read_topics(collection: str | os.PathLike, split: str | None = None) -> list[Topic]:
    """The topics of a split (all topics when ``split`` is None), in file order, with the
    fields retrieval uses checked."""
    path = topics_path(collection)
    topics: list[Topic] = []
    splits: set[str] = set()
    for n, rec in _topic_lines(path):
        where = f"line {n}"
        _strings(rec, ("mention", "context", "unit"), path, where)
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
        if split is not None and rec["split"] != split:
            continue
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
                str(rec["cluster"]) if rec.get("cluster") is not None else None,
            )
        )
    if split is not None and not topics:
        known = ", ".join(sorted(splits)) or "none"
        raise CmrkitError(
            f"no topics in split {split!r} (splits present: {known}); choose one with --split",
            path=path,
        )
    return topics


def split_order(splits: set[str] | list[str]) -> list[str]:
    """train, dev, test first, then the others by name."""
    known = ["train", "dev", "test"]
    return sorted(set(splits), key=lambda s: (known.index(s) if s in known else 3, s))


def topic_splits(collection: str | os.PathLike) -> list[str]:
    """The splits of a collection's topics, sorted."""
    return sorted({rec["split"] for rec in topic_records(collection)})


def resolve_split(collection: str | os.PathLike, split: str | None) -> str:
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
        path=topics_path(collection),
    )


def qrels_path(
    collection: str | os.PathLike, split: str, qrels_dir: str | os.PathLike | None = None
) -> Path:
    """``qrels/NAME.SPLIT.txt`` in the working folder (or under ``qrels_dir``): where a split's
    qrels are written and looked for first."""
    base = QRELS_DIR if qrels_dir is None else Path(qrels_dir)
    return base / qrels_name(Path(collection).resolve().name, split)


def qrels_file(
    collection: str | os.PathLike, split: str, qrels_dir: str | os.PathLike | None = None
) -> Path | None:
    """Where the qrels of a split are: ``QRELS_DIR/NAME.SPLIT.txt`` when ``qrels_dir`` is
    given, else the path the manifest recorded, else ``qrels/NAME.SPLIT.txt`` in the working
    folder or beside the collections folder; None when none exists."""
    if qrels_dir is not None:
        path = qrels_path(collection, split, qrels_dir)
        return path if path.is_file() else None
    recorded = read_manifest(collection).get("files", {}).get("qrels", {}).get(split)
    candidates = [Path(recorded)] if isinstance(recorded, str) else []
    candidates += [
        qrels_path(collection, split),
        Path(collection).resolve().parent.parent / qrels_path(collection, split),
    ]
    return next((p for p in candidates if p.is_file()), None)


def training_splits(
    collection: str | os.PathLike,
    train_split: str,
    dev_split: str | None,
    qrels_dir: Path | None = None,
) -> str | None:
    """Check a training command's splits and return its dev split (None: no dev evaluation).

    ``dev_split`` None means ``dev`` when the collection has it and it is not the train split;
    ``"none"`` means no dev evaluation. A dev split needs its qrels.
    """
    coll = Path(collection)
    splits = topic_splits(coll)
    if train_split not in splits:
        raise CmrkitError(
            f"no topics in split {train_split!r} (splits present: {', '.join(splits)}); "
            "choose one with --train-split",
            path=topics_path(coll),
        )
    if dev_split is None:
        return "dev" if "dev" in splits and train_split != "dev" else None
    if dev_split == "none":
        return None
    if dev_split not in splits:
        raise CmrkitError(
            f"no topics in split {dev_split!r} (splits present: {', '.join(splits)}); choose one "
            "with --dev-split, or --dev-split none",
            path=topics_path(coll),
        )
    if not qrels_path(coll, dev_split, qrels_dir).exists():
        raise CmrkitError(
            f"no qrels for the dev split {dev_split!r}", path=qrels_path(coll, dev_split, qrels_dir)
        )
    return dev_split
