"""The annotated units of a collection (``corpus.jsonl.gz`` up to its first distractor): their
text and the mentions in them, for clustering runs and scoring answer spans."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cmrkit.collection.layout import (
    clusters_name,
    collection_dir,
    corpus_path,
    manifest_path,
    qrels_file,
    read_manifest,
)
from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_jsonl


@dataclass(frozen=True)
class UnitMention:
    mention_id: str
    cluster: str
    start: int
    end: int


@dataclass
class AnnotatedUnits:
    """Units that hold annotated mentions, by docno, and each mention's unit."""

    contents: dict[str, str]
    mentions: dict[str, list[UnitMention]]
    unit_of: dict[str, str]  # mention id -> docno
    corpus: Path | None = None  # the corpus they were read from (its distractors come after)

    def mention_of_qid(self) -> dict[str, str]:
        """qid -> mention id (a qid is the mention id with whitespace turned into '_')."""
        return {"_".join(m.split()): m for m in self.unit_of}

    def no_units(self, docnos: set[str]) -> set[str]:
        """Those of ``docnos`` that are no unit of the corpus: neither annotated nor a
        distractor (the distractors are read only when a docno is not annotated, and only
        until every one is found)."""
        left = {d for d in docnos if d not in self.contents}
        if not left or self.corpus is None:
            return left
        for _, record in iter_jsonl(self.corpus, what="one unit object per line"):
            left.discard(str(record.get("id")))
            if not left:
                break
        return left


def read_annotated_units(collection: str | Path) -> AnnotatedUnits:
    """The annotated (and context) units of a collection; distractors come after them in the
    corpus and are not read."""
    corpus = corpus_path(collection_dir(collection))
    contents: dict[str, str] = {}
    mentions: dict[str, list[UnitMention]] = {}
    unit_of: dict[str, str] = {}
    for n, record in iter_jsonl(corpus, what="one unit object per line"):
        if record.get("kind") == "distractor":
            break
        try:
            docno = str(record["id"])
            contents[docno] = record["contents"]
            found = [
                UnitMention(str(m["mention_id"]), str(m["cluster"]), int(m["start"]), int(m["end"]))
                for m in record.get("mentions", [])
            ]
        except (KeyError, TypeError, ValueError) as e:
            raise CmrkitError(
                f"unit record lacks a field or has a bad value ({e}); rebuild the collection",
                path=corpus,
                where=f"line {n}",
            ) from None
        if found:
            mentions[docno] = found
            for m in found:
                unit_of[m.mention_id] = docno
    return AnnotatedUnits(contents, mentions, unit_of, corpus)


def gold_clusters_path(collection: str | Path, split: str) -> Path:
    """The split's gold clusters file that `cmrkit build-collection` wrote beside the qrels:
    the path the manifest recorded, else beside the split's qrels file."""
    folder = collection_dir(collection)
    recorded = read_manifest(folder).get("files", {}).get("clusters", {}).get(split)
    candidates = [Path(recorded)] if isinstance(recorded, str) else []
    qrels = qrels_file(folder, split)
    if qrels is not None:
        candidates.append(qrels.with_name(clusters_name(folder.resolve().name, split)))
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        raise CmrkitError(
            f"no gold clusters file for split {split!r} (collections built before cmrkit wrote "
            "them have none); rebuild the collection, pass --split, or name one with --key",
            path=manifest_path(folder),
        )
    return found
