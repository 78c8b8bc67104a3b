"""CoreSearch files (Hugging Face dataset biu-nlp/CoreSearch), folder ``clean/``.

Per split: ``<Split>_gold_clusters.json`` (``[{"clusterId", "clusterTitle", "mentionIds"}]``)
and ``<Split>_all_passages.json`` (``[{"id", "goldChain", "mention", "startIndex",
"endIndex", "context"}]``, annotated and distractor passages together). A passage whose id is
listed in a gold cluster is annotated and becomes a query (CoreSearch: every annotated passage
is a query; positives are the other passages of its cluster); the others are distractors.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from cmrkit.errors import CmrkitError
from cmrkit.model import Mention, Passage
from cmrkit.sources.common import Record, join_tokens, load_json, split_from_name


def classify(path: str | os.PathLike) -> str:
    name = os.path.basename(str(path)).lower()
    if "gold_clusters" in name or "clusters" in name:
        return "clusters"
    if "passages" in name:
        return "passages"
    raise CmrkitError(
        "not a CoreSearch file: expected <Split>_gold_clusters.json or <Split>_all_passages.json",
        path=path,
    )


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


def read_coresearch(
    clusters_path: str | os.PathLike, passages_path: str | os.PathLike, split: str | None
) -> tuple[list[Mention], Iterator[Passage]]:
    """Annotated passages as mentions, and the distractor passages as a stream."""
    members = read_clusters(clusters_path)
    split = split or split_from_name(passages_path)
    data = _array(passages_path)
    mentions: list[Mention] = []
    found = set()
    for i, obj in enumerate(data):
        if not isinstance(obj, dict) or str(obj.get("id")) not in members:
            continue
        r, pid, tokens = _passage_record(obj, passages_path, i)
        found.add(pid)
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
    missing = sorted(set(members) - found)
    if missing:
        raise CmrkitError(
            f"{len(missing)} mention id(s) of the gold clusters have no passage "
            f"(first: {missing[0]}); pass the matching <Split>_all_passages.json",
            path=clusters_path,
        )

    def distractors() -> Iterator[Passage]:
        for i, obj in enumerate(data):
            if isinstance(obj, dict) and str(obj.get("id")) in members:
                continue
            _, pid, tokens = _passage_record(obj, passages_path, i)
            yield Passage(text=join_tokens(tokens)[0], source_id=pid)

    return mentions, distractors()
