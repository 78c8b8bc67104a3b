"""WEC-Eng mention JSON (and the ECB+ copies in the same shape).

One JSON array of mention objects per split file. Fields used: ``coref_chain`` (int, or str in
the ECB+ copies), ``doc_id``, ``mention_context`` (tokens), ``tokens_number`` (indices of the
mention tokens), ``mention_id``; optional: ``tokens_str``, ``coref_link`` (cluster title, ``"NA"``
when unknown), ``mention_type``, ``topic_id``. Other fields are kept opaque.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from cmrkit.model import Mention
from cmrkit.sources.common import Record, join_tokens, load_json


def iter_wec_records(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    data = load_json(path)
    if not isinstance(data, list):
        raise Record({}, path, "top level").error(
            f"expected a JSON array of mention objects, found {type(data).__name__}"
        )
    if not data:
        raise Record({}, path, "top level").error("no mentions in the file (empty array)")
    yield from enumerate(data)


def wec_mention(obj: dict, path: str | os.PathLike, index: int, split: str | None) -> Mention:
    where = f"record {index}"
    if isinstance(obj, dict) and isinstance(obj.get("mention_id"), str | int):
        where += f" (mention_id {obj['mention_id']})"
    r = Record(obj, path, where)
    mention_id = str(r.get("mention_id", (str, int)))
    cluster = r.get("coref_chain", (int, str))
    doc_id = r.get("doc_id", (str, int))
    tokens = r.str_list("mention_context")
    if not tokens:
        raise r.error("field 'mention_context' is empty")
    idx = r.int_list("tokens_number")
    lo, hi = min(idx), max(idx)
    if lo < 0 or hi >= len(tokens):
        raise r.error(
            f"field 'tokens_number' holds index {hi if hi >= len(tokens) else lo} outside "
            f"'mention_context' ({len(tokens)} tokens)"
        )
    text, starts, ends = join_tokens(tokens)
    start, end = starts[lo], ends[hi]
    title = r.get("coref_link", str, required=False)
    mtype = r.get("mention_type", (str, int), required=False)
    topic = r.get("topic_id", (str, int), required=False)
    source = {"file": os.path.basename(str(path)), "record": index, "mention_id": mention_id}
    if topic is not None and topic != -1:
        source["topic_id"] = str(topic)
    return Mention(
        mention_id=mention_id,
        cluster=str(cluster),
        doc_id=str(doc_id),
        context=text,
        start=start,
        end=end,
        text=text[start:end],
        cluster_title=None if title in (None, "", "NA") else title,
        doc_title=str(doc_id),
        type=None if mtype is None else str(mtype),
        split=split,
        source=source,
    )


def read_wec(path: str | os.PathLike, split: str | None) -> list[Mention]:
    """All mentions of a WEC-Eng JSON file."""
    return [wec_mention(obj, path, i, split) for i, obj in iter_wec_records(path)]
