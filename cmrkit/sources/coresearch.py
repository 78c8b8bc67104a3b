"""CoreSearch files (Hugging Face dataset biu-nlp/CoreSearch), as published.

The dataset folder holds ``clean/`` (evaluation files), ``train/``, ``dpr/`` and ``squad/``.
Per split (``Train``, ``Dev``, ``Test``):

- ``clean/<Split>_gold_clusters.json``: ``[{"clusterId", "clusterTitle", "mentionIds"}]``;
- ``clean/<Split>_all_passages.json``: ``[{"id", "goldChain", "mention", "startIndex",
  "endIndex", "context"}]``, annotated and distractor passages together;
- ``train/<Split>_queries.json`` (optional): the query objects, with the passages' fields (plus
  ``positive_examples``, ``negative_examples``, ``bm25_query``).

A passage whose id is listed in a gold cluster is annotated; the others are distractors. Every
annotated passage is its own passage id, even where two mentions share a paragraph (the
``mention`` unit of :mod:`cmrkit.collection.build` keeps that); a query's positives are the other
passages of its cluster. With a queries file the queries are exactly its ids, else every
annotated passage. ``dpr/`` and ``squad/`` hold training files derived from these and are not
read.

:func:`resolve` turns the ``--input`` paths a user gives (the dataset folder, ``clean/`` or
``train/``, or any of the split files) into complete per-split file sets, or says precisely
which file is missing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from cmrkit.errors import CmrkitError
from cmrkit.model import Mention, Passage
from cmrkit.sources.common import Record, join_tokens, load_json, split_from_name

_SPLITS = ("Train", "Dev", "Test")
_NAME = re.compile(
    r"^(?P<split>[A-Za-z]+)_(?P<kind>gold_clusters|all_passages|queries|training_queries)"
    r"\.json(?:\.gz)?$"
)
_ROLE = {
    "gold_clusters": "clusters",
    "all_passages": "passages",
    "queries": "queries",
    "training_queries": "queries",
}


@dataclass
class SplitFiles:
    """The files of one CoreSearch split: gold clusters, all passages, and queries if given."""

    split: str
    clusters: str | None = None
    passages: str | None = None
    queries: str | None = None


def classify(path: str | os.PathLike) -> str:
    """``clusters``, ``passages`` or ``queries`` from a CoreSearch file name; an error that
    names the file to give instead for any other file."""
    name = os.path.basename(str(path).split("::")[-1])
    m = _NAME.match(name)
    if m:
        return _ROLE[m.group("kind")]
    low = name.lower()
    if "gold_clusters" in low or low.endswith("clusters.json"):
        return "clusters"
    if "all_passages" in low:
        return "passages"
    split = (split_from_name(name) or "dev").capitalize()
    want = f"clean/{split}_gold_clusters.json and clean/{split}_all_passages.json"
    if "passages" in low:
        raise CmrkitError(
            f"a subset of CoreSearch's passages (training file); give {want}, or the dataset "
            "folder",
            path=path,
        )
    if any(part in ("dpr", "squad") for part in Path(str(path)).parts) or "squad" in low:
        raise CmrkitError(
            f"a CoreSearch training file in DPR/SQuAD format, not read by cmrkit; give {want}, "
            "or the dataset folder",
            path=path,
        )
    raise CmrkitError(
        "not a CoreSearch file: expected <Split>_gold_clusters.json, <Split>_all_passages.json "
        f"or <Split>_queries.json (e.g. {want}), or the dataset folder",
        path=path,
    )


def _split_of(path: str | os.PathLike, given: str | None) -> str:
    if given:
        return given
    name = os.path.basename(str(path).split("::")[-1])
    m = _NAME.match(name)
    split = split_from_name(m.group("split") if m else name)
    if split is None:
        raise CmrkitError(
            "cannot tell the split from the file name; name it as SPLIT=PATH (e.g. dev=PATH)",
            path=path,
        )
    return split


def _find(folder: Path, split: str, kind: str) -> Path | None:
    for name in (f"{split.capitalize()}_{kind}.json", f"{split.capitalize()}_{kind}.json.gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def _folder_splits(root: Path, only: str | None) -> list[SplitFiles]:
    """The splits of a dataset folder (holding ``clean/``), of ``clean/`` or of ``train/``."""
    if (root / "clean").is_dir():
        clean, train = root / "clean", root / "train"
    elif root.name == "train" and (root.parent / "clean").is_dir():
        clean, train = root.parent / "clean", root
    else:
        clean, train = root, root.parent / "train"
    found = []
    for split in _SPLITS:
        s = split.lower()
        if only is not None and s != only:
            continue
        clusters = _find(clean, s, "gold_clusters")
        passages = _find(clean, s, "all_passages")
        if clusters is None and passages is None:
            continue
        queries = _find(train, s, "queries") if train.is_dir() else None
        found.append(
            SplitFiles(
                s,
                str(clusters) if clusters else None,
                str(passages) if passages else None,
                str(queries) if queries else None,
            )
        )
    if not found:
        which = f"{only.capitalize()}_" if only else "<Split>_"
        raise CmrkitError(
            f"no CoreSearch files here: expected {clean / (which + 'gold_clusters.json')} and "
            f"{clean / (which + 'all_passages.json')} (the dataset's clean/ folder)",
            path=root,
        )
    return found


def resolve(specs: list[tuple[str | None, str]]) -> list[SplitFiles]:
    """Per split, the clusters, passages and queries files named by the ``--input`` specs.

    A folder gives every split it holds (``SPLIT=FOLDER`` one split); a file brings the other
    files of its split from the same dataset folder when they are there. A split left without
    its clusters or passages file is an error naming the exact file to give.
    """
    splits: dict[str, SplitFiles] = {}

    def add(files: SplitFiles, origin: str) -> None:
        have = splits.setdefault(files.split, SplitFiles(files.split))
        for role in ("clusters", "passages", "queries"):
            new = getattr(files, role)
            old = getattr(have, role)
            if new is None or old == new:
                continue
            if old is not None and role != "queries":
                raise CmrkitError(
                    f"two {role} files for split {files.split!r}: {old} and {new}; give one",
                    path=origin,
                )
            if old is None:
                setattr(have, role, new)

    for given, spec in specs:
        path = Path(spec)
        if "::" not in spec and path.is_dir():
            for files in _folder_splits(path, given):
                add(files, spec)
            continue
        role = classify(spec)
        split = _split_of(spec, given)
        files = SplitFiles(split, **{role: spec})
        own = _NAME.match(path.name)
        sibling = split_from_name(own.group("split")) if own else None
        if "::" not in spec and path.is_file() and sibling is not None:
            here = path.parent
            clean = here.parent / "clean" if role == "queries" else here
            train = here if role == "queries" else here.parent / "train"
            for other, folder, kind in (
                ("clusters", clean, "gold_clusters"),
                ("passages", clean, "all_passages"),
                ("queries", train, "queries"),
            ):
                if other != role and folder.is_dir():
                    found = _find(folder, sibling, kind)
                    if found is not None:
                        setattr(files, other, str(found))
        add(files, spec)

    for files in splits.values():
        for role, kind in (("clusters", "gold_clusters"), ("passages", "all_passages")):
            if getattr(files, role) is None:
                known = files.clusters or files.passages or files.queries
                folder = Path(str(known).split("::")[0]).parent
                if files.queries and known == files.queries:
                    folder = folder.parent / "clean"
                expected = folder / f"{files.split.capitalize()}_{kind}.json"
                raise CmrkitError(
                    f"split {files.split!r} has no {kind} file ({expected} not found); "
                    f"give CoreSearch's clean/{expected.name} with --input",
                    path=known,
                )
    return list(splits.values())


def _array(path: str | os.PathLike) -> list:
    data = load_json(path)
    if not isinstance(data, list):
        raise CmrkitError(f"expected a JSON array, found {type(data).__name__}", path=path)
    if not data:
        raise CmrkitError("empty array", path=path)
    return data


def read_clusters(path: str | os.PathLike) -> dict[str, tuple[str, str | None]]:
    """mention (passage) id -> (cluster id, cluster title)."""
    members: dict[str, tuple[str, str | None]] = {}
    for i, obj in enumerate(_array(path)):
        r = Record(obj, path, f"record {i}")
        cid = str(r.get("clusterId", (int, str)))
        title = r.get("clusterTitle", str, required=False)
        ids = r.get("mentionIds", list)
        for mid in ids:
            if not isinstance(mid, str | int) or isinstance(mid, bool):
                raise r.error(f"field 'mentionIds' holds {mid!r}, expected str or int ids")
            if str(mid) in members:
                raise r.error(f"mention id {mid} is listed in two clusters")
            members[str(mid)] = (cid, title)
    return members


def _passage_record(obj: dict, path: str | os.PathLike, i: int) -> tuple[Record, str, list[str]]:
    where = f"record {i}" + (f" (id {obj['id']})" if isinstance(obj, dict) and "id" in obj else "")
    r = Record(obj, path, where)
    pid = str(r.get("id", (str, int)))
    tokens = r.str_list("context")
    if not tokens:
        raise r.error("field 'context' is empty")
    return r, pid, tokens


def _mention_span(r: Record, tokens: list[str]) -> tuple[int, int]:
    """Inclusive token span of the marked mention (an exclusive ``endIndex`` normalised)."""
    s = r.get("startIndex", int)
    e = r.get("endIndex", int)
    mtoks = r.str_list("mention")
    if not 0 <= s <= e < len(tokens):
        raise r.error(
            f"fields 'startIndex'/'endIndex' ({s}, {e}) are outside 'context' "
            f"({len(tokens)} tokens)"
        )
    if mtoks and tokens[s : e + 1] != mtoks and tokens[s:e] == mtoks:
        e -= 1  # an exclusive end index: normalise to inclusive
    elif mtoks and tokens[s : e + 1] != mtoks:
        raise r.error(
            f"field 'mention' {' '.join(mtoks)!r} differs from the context tokens at "
            f"startIndex/endIndex ({' '.join(tokens[s : e + 1])!r})"
        )
    return s, e


def read_query_ids(
    path: str | os.PathLike, passages: dict[str, tuple[list[str], tuple[int, int]]]
) -> list[str]:
    """The ids of a queries file, each checked against its annotated passage (same context
    and mention span), in file order."""
    ids: list[str] = []
    seen: set[str] = set()
    for i, obj in enumerate(_array(path)):
        r, qid, tokens = _passage_record(obj, path, i)
        if qid in seen:
            raise r.error(f"query id {qid} appears twice")
        seen.add(qid)
        if qid not in passages:
            raise r.error(
                f"query id {qid} is no annotated passage of the gold clusters; give the "
                "clusters and passages files of the same split"
            )
        context, span = passages[qid]
        if tokens != context or _mention_span(r, tokens) != span:
            raise r.error(
                f"query {qid} differs from its passage (context or mention span); give the "
                "clean/ files alone to use the passages' text"
            )
        ids.append(qid)
    return ids


def read_coresearch(
    clusters_path: str | os.PathLike,
    passages_path: str | os.PathLike,
    split: str | None,
    queries_path: str | os.PathLike | None = None,
) -> tuple[list[Mention], Iterator[Passage], list[str] | None]:
    """Annotated passages as mentions, the distractor passages as a stream, and the query ids
    of the queries file (None without one)."""
    members = read_clusters(clusters_path)
    split = split or split_from_name(passages_path)
    data = _array(passages_path)
    mentions: list[Mention] = []
    annotated: dict[str, tuple[list[str], tuple[int, int]]] = {}
    for i, obj in enumerate(data):
        if not isinstance(obj, dict) or str(obj.get("id")) not in members:
            continue
        r, pid, tokens = _passage_record(obj, passages_path, i)
        if pid in annotated:
            raise r.error(f"passage id {pid} appears twice")
        s, e = _mention_span(r, tokens)
        annotated[pid] = (tokens, (s, e))
        text, starts, ends = join_tokens(tokens)
        cid, title = members[pid]
        start, end = starts[s], ends[e]
        mentions.append(
            Mention(
                mention_id=pid,
                cluster=cid,
                doc_id=pid,
                context=text,
                start=start,
                end=end,
                text=text[start:end],
                cluster_title=title,
                split=split,
                source={
                    "file": os.path.basename(str(passages_path)),
                    "record": i,
                    "mention_id": pid,
                },
            )
        )
    missing = sorted(set(members) - set(annotated))
    if missing:
        raise CmrkitError(
            f"{len(missing)} mention id(s) of the gold clusters have no passage "
            f"(first: {missing[0]}); pass the matching <Split>_all_passages.json",
            path=clusters_path,
        )
    query_ids = None if queries_path is None else read_query_ids(queries_path, annotated)

    def distractors() -> Iterator[Passage]:
        for i, obj in enumerate(data):
            if isinstance(obj, dict) and str(obj.get("id")) in members:
                continue
            _, pid, tokens = _passage_record(obj, passages_path, i)
            yield Passage(text=join_tokens(tokens)[0], source_id=pid)

    return mentions, distractors(), query_ids
