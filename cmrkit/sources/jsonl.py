"""The generic mention JSONL: convert any coreference corpus to this and build from it.

One JSON object per line:

| field | type | required | meaning |
|---|---|---|---|
| `mention_id` | str or int | yes | unique id of the mention (becomes the query id) |
| `cluster` | str or int | yes | coreference cluster: mentions with equal values corefer |
| `doc_id` | str | yes | source document |
| `context` | str | one of `context` / `tokens` | the passage holding the mention |
| `start`, `end` | int | with `context` | character offsets in `context`, end exclusive |
| `tokens` | list[str] | one of `context` / `tokens` | the passage as tokens (joined by spaces) |
| `token_start`, `token_end` | int | with `tokens` | token indices of the mention, end exclusive |
| `mention` | str | no | the mention text; when given it must equal the text at the offsets |
| `title` | str | no | document title |
| `cluster_title` | str | no | name of the cluster's entity or event |
| `type` | str | no | entity or event type (PER, ORG, ...) |
| `split` | str | no | split of the mention (else from the file name or `SPLIT=PATH`) |
| `context_offset` | int | no | offset of `context` in its source document |
"""

from __future__ import annotations

import os

from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_jsonl
from cmrkit.model import Mention
from cmrkit.sources.common import Record, join_tokens


def read_jsonl(path: str | os.PathLike, split: str | None) -> list[Mention]:
    """All mentions of a generic mention JSONL file."""
    mentions = []
    for n, obj in iter_jsonl(path, what="one mention object per line"):
        r = Record(obj, path, f"line {n}")
        mention_id = str(r.get("mention_id", (str, int)))
        cluster = str(r.get("cluster", (str, int)))
        doc_id = str(r.get("doc_id", (str, int)))
        if "context" in r.obj:
            context = r.get("context", str)
            start = r.get("start", int)
            end = r.get("end", int)
        elif "tokens" in r.obj:
            tokens = r.str_list("tokens")
            ts = r.get("token_start", int)
            te = r.get("token_end", int)
            if not 0 <= ts < te <= len(tokens):
                raise r.error(
                    f"fields 'token_start'/'token_end' ({ts}, {te}) are outside 'tokens' "
                    f"({len(tokens)} tokens); token_end is exclusive"
                )
            context, starts, ends = join_tokens(tokens)
            start, end = starts[ts], ends[te - 1]
        else:
            raise r.error("missing field 'context' (or 'tokens'); one of them is required")
        if not context.strip():
            raise r.error("field 'context' is empty")
        if not 0 <= start < end <= len(context):
            raise r.error(
                f"fields 'start'/'end' ({start}, {end}) are outside 'context' "
                f"({len(context)} characters); end is exclusive"
            )
        given = r.get("mention", str, required=False)
        if given is not None and given != context[start:end]:
            raise r.error(
                f"field 'mention' is {given!r} but the context holds {context[start:end]!r} "
                "at start/end; fix the offsets"
            )
        split_value = r.get("split", str, required=False) or split
        mentions.append(
            Mention(
                mention_id=mention_id,
                cluster=cluster,
                doc_id=doc_id,
                context=context,
                start=start,
                end=end,
                text=context[start:end],
                cluster_title=r.get("cluster_title", str, required=False),
                doc_title=r.get("title", str, required=False),
                type=r.get("type", str, required=False),
                split=split_value,
                context_offset=r.get("context_offset", int, required=False, default=0),
                source={"file": os.path.basename(str(path)), "line": n, "mention_id": mention_id},
            )
        )
    if not mentions:
        raise CmrkitError("no mentions in the file", path=path)
    return mentions
