"""Distractor passages, streamed: WEC-Eng-format JSON, passage JSONL, or plain text.

- ``wec``: a WEC-Eng mention file (CoreSearch used the whole WEC-Eng train split); each distinct
  ``mention_context`` is one passage, id ``D:<mention_id>`` of its first mention.
- ``jsonl``: ``{"id": ..., "contents": ..., "title": ..., "doc_id": ...}`` per line (``text``
  is accepted for ``contents``; ``id`` optional, else ``D:<file stem>:<line>``).
- ``text``: one paragraph per line; id ``D:<file stem>:<line>``; blank lines skipped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_jsonl, iter_lines, open_text, split_zip_member
from cmrkit.model import Passage
from cmrkit.sources.common import Record, clean_id, join_tokens
from cmrkit.sources.wec import iter_wec_records

FORMATS = ("auto", "wec", "jsonl", "text")


def detect_format(path: str | os.PathLike) -> str:
    """'wec' for a JSON array, 'jsonl' for one object per line, else 'text'."""
    with open_text(path) as f:
        head = f.read(4096).lstrip()
    if head.startswith("["):
        return "wec"
    if head.startswith("{"):
        return "jsonl"
    return "text"


def file_tag(path: str | os.PathLike) -> str:
    """A short id-safe name for a file: its stem without compression/format suffixes."""
    base, member = split_zip_member(path)
    name = os.path.basename(member or str(base))
    name = re.sub(r"(\.(gz|zip|json|jsonl|txt|tsv))+$", "", name, flags=re.I)
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "distractors"


def iter_distractors(path: str | os.PathLike, fmt: str = "auto") -> Iterator[Passage]:
    """Stream the passages of one distractor file."""
    if fmt not in FORMATS:
        raise CmrkitError(f"unknown distractor format {fmt!r}; use one of {', '.join(FORMATS)}")
    if fmt == "auto":
        fmt = detect_format(path)
    tag = file_tag(path)
    if fmt == "wec":
        yield from _wec(path)
    elif fmt == "jsonl":
        yield from _jsonl(path, tag)
    else:
        for n, line in iter_lines(path):
            text = line.strip()
            if text:
                yield Passage(text=text, source_id=f"{tag}:{n}")


def _wec(path: str | os.PathLike) -> Iterator[Passage]:
    clusters: dict[str, set[str]] = {}
    first: dict[str, Passage] = {}
    order: list[str] = []
    for i, obj in iter_wec_records(path):
        r = Record(obj, path, f"record {i}")
        tokens = r.str_list("mention_context")
        text = join_tokens(tokens)[0]
        if not text.strip():
            continue
        if text not in first:
            doc = r.get("doc_id", (str, int), required=False)
            mid = clean_id(str(r.get("mention_id", (str, int))))
            first[text] = Passage(
                text=text,
                doc_id=None if doc is None else str(doc),
                title=None if doc is None else str(doc),
                source_id=mid,
            )
            clusters[text] = set()
            order.append(text)
        chain = r.get("coref_chain", (int, str), required=False)
        if chain is not None:
            clusters[text].add(str(chain))
    for text in order:
        p = first[text]
        p.clusters = tuple(sorted(clusters[text]))
        yield p


def _jsonl(path: str | os.PathLike, tag: str) -> Iterator[Passage]:
    for n, obj in iter_jsonl(path, what="one passage object per line"):
        r = Record(obj, path, f"line {n}")
        text = r.get("contents", str, required=False)
        if text is None:
            text = r.get("text", str, required=False)
        if text is None:
            raise r.error("missing field 'contents' (or 'text')")
        pid = r.get("id", (str, int), required=False)
        doc = r.get("doc_id", (str, int), required=False)
        yield Passage(
            text=text,
            doc_id=None if doc is None else str(doc),
            title=r.get("title", str, required=False),
            source_id=clean_id(str(pid)) if pid is not None else f"{tag}:{n}",
        )
