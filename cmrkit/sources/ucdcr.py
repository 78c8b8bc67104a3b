"""uCDCR's unified mentions (Zhukova et al., LREC 2026): a dataset folder
``DATASET/{train,val,test}/{event,entity}_mentions.json`` (``.json.gz`` too), one split's
folder, one file (its split from its folder's name, ``val`` being dev), or
``all_mentions.parquet`` (every split, a ``split`` column).

Each record extends WEC-Eng's: ``coref_chain``, ``mention_id``, ``mention_context`` (tokens
around the mention), ``mention_sentence_start_end`` (the mention's sentence in the context, end
exclusive), ``tokens_number`` (the mention's tokens in its sentence), ``doc`` (or ``doc_id``),
``sent_id``, ``topic_id``, ``subtopic_id``, ``mention_head``, ``mention_head_lemma``,
``is_singleton``. Required: the first five and a document; the others are kept when present and
asked for by what needs them (``--within topic`` needs ``topic_id``, ``--within subtopic`` and
uCDCR's protocol ``subtopic_id``).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.model import Cdcr, Mention
from cmrkit.sources.common import Record, join_tokens, load_json

KINDS = ("events", "entities", "all")
SPLITS = {"train": "train", "val": "dev", "dev": "dev", "test": "test"}
FILES = {"events": "event_mentions", "entities": "entity_mentions"}
PARQUET = "all_mentions.parquet"


@dataclass(frozen=True)
class UcdcrFile:
    """One input file, its split (None: the records' ``split`` column) and kind."""

    path: str
    split: str | None
    kind: str  # events, entities or all (the parquet)


def _json_file(folder: Path, stem: str) -> Path | None:
    for suffix in (".json", ".json.gz"):
        if (folder / f"{stem}{suffix}").is_file():
            return folder / f"{stem}{suffix}"
    return None


def _split_files(folder: Path, split: str, kind: str) -> list[UcdcrFile]:
    kinds = ("events", "entities") if kind == "all" else (kind,)
    found = [(k, _json_file(folder, FILES[k])) for k in kinds]
    return [UcdcrFile(str(p), split, k) for k, p in found if p is not None]


def _parquet(path: Path, kind: str) -> UcdcrFile:
    if kind != "all":
        raise CmrkitError(
            f"{PARQUET} holds the events and entities of every split together; read it with "
            "--mentions all, or give the {event,entity}_mentions.json files for one kind",
            path=path,
        )
    return UcdcrFile(str(path), None, "all")


def resolve(path: str | os.PathLike, kind: str = "events") -> list[UcdcrFile]:
    """The files a uCDCR input names: a dataset folder (its split folders), a split folder
    (``train``, ``val`` or ``test``), or one file."""
    if kind not in KINDS:
        raise CmrkitError(f"--mentions {kind!r} is not one of {', '.join(KINDS)}")
    p = Path(path)
    if p.is_file():
        if p.name.endswith(".parquet"):
            return [_parquet(p, kind)]
        split = SPLITS.get(p.parent.name.lower())
        if split is None:
            raise CmrkitError(
                f"the split comes from the file's folder, and {p.parent.name!r} is none of "
                "train, val, test; write SPLIT=PATH (e.g. -i test=PATH)",
                path=p,
            )
        name = p.name.split(".")[0]
        file_kind = next((k for k, stem in FILES.items() if stem == name), "all")
        return [UcdcrFile(str(p), split, file_kind)]
    if not p.is_dir():
        raise CmrkitError("no such file or folder", path=p)
    split = SPLITS.get(p.name.lower())
    if split is not None:
        files = _split_files(p, split, kind)
    else:
        files = [
            f
            for name in ("train", "val", "test")
            if (p / name).is_dir()
            for f in _split_files(p / name, SPLITS[name], kind)
        ]
        if not files and (p / PARQUET).is_file():
            files = [_parquet(p / PARQUET, kind)]
    if not files:
        wanted = " and ".join(f"{FILES[k]}.json" for k in (FILES if kind == "all" else [kind]))
        raise CmrkitError(
            f"is no uCDCR dataset or split folder: no {{train,val,test}}/{wanted} (or "
            f"{PARQUET}) in it",
            path=p,
        )
    return files


def _records(f: UcdcrFile) -> Iterator[tuple[int, Any]]:
    if f.path.endswith(".parquet"):
        try:
            import pyarrow.parquet as pq

            table = pq.read_table(f.path)
        except (OSError, ValueError) as e:
            raise CmrkitError(f"cannot read the parquet file ({e})", path=f.path) from None
        yield from enumerate(table.to_pylist())
        return
    data = load_json(f.path)
    if not isinstance(data, list):
        raise Record({}, f.path, "top level").error(
            f"expected a JSON list of mention objects, found {type(data).__name__}"
        )
    yield from enumerate(data)


def _shown(path: str) -> str:
    """A file as a mention's source names it: its split folder and name (where it lies apart)."""
    p = Path(path)
    return f"{p.parent.name}/{p.name}" if p.parent.name else p.name


def _text(r: Record, name: str) -> str | None:
    value = r.get(name, (str, int), required=False)
    return None if value is None else str(value)


def _sentence(r: Record) -> tuple[list[str], list[int]]:
    """The mention's sentence tokens and its token indexes in them."""
    context = r.str_list("mention_context")
    bounds = r.obj.get("mention_sentence_start_end")
    if bounds is None:
        field = "tokens_number_context" if "tokens_number_context" in r.obj else "tokens_number"
        words, tokens = context, r.int_list(field)
    else:
        if (
            not isinstance(bounds, list | tuple)
            or len(bounds) != 2
            or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
            or not 0 <= bounds[0] < bounds[1] <= len(context)
        ):
            raise r.error(
                "field 'mention_sentence_start_end' must be [start, end] inside "
                f"'mention_context' ({len(context)} tokens)"
            )
        field = "tokens_number"
        words, tokens = context[bounds[0] : bounds[1]], r.int_list(field)
    if not words:
        raise r.error("field 'mention_context' is empty")
    bad = [t for t in tokens if not 0 <= t < len(words)]
    if bad:
        raise r.error(
            f"field '{field}' holds index {bad[0]} outside the mention's sentence "
            f"({len(words)} tokens)"
        )
    return words, sorted(set(tokens))


def _mention(
    obj: Any, f: UcdcrFile, index: int, documents: dict[str, dict[int, list[str]]]
) -> Mention:
    where = f"record {index}"
    if isinstance(obj, dict) and isinstance(obj.get("mention_id"), str | int):
        where += f" (mention_id {obj['mention_id']})"
    r = Record(obj, f.path, where)
    mention_id = str(r.get("mention_id", (str, int)))
    cluster = str(r.get("coref_chain", (str, int)))
    doc = _text(r, "doc") or _text(r, "doc_id")
    if doc is None:
        raise r.error("missing field 'doc' (and 'doc_id'): a mention needs its document")
    split = f.split
    if split is None:
        named = _text(r, "split")
        split = SPLITS.get((named or "").lower())
        if split is None:
            raise r.error(f"field 'split' is {named!r}, none of train, val, test")
    words, tokens = _sentence(r)
    sentence = r.get("sent_id", int, required=False)
    number = sentence if sentence is not None else -1 - index  # unknown: a sentence of its own
    documents.setdefault(doc, {}).setdefault(number, words)
    context, starts, ends = join_tokens(words)
    start, end = starts[tokens[0]], ends[tokens[-1]]
    singleton = r.get("is_singleton", bool, required=False)
    mtype = _text(r, "mention_type")
    return Mention(
        mention_id=mention_id,
        cluster=cluster,
        doc_id=doc,
        context=context,
        start=start,
        end=end,
        text=context[start:end],
        doc_title=doc,
        type=mtype,
        split=split,
        source={"file": _shown(f.path), "record": index, "mention_id": mention_id},
        cdcr=Cdcr(
            topic=_text(r, "topic_id") or _text(r, "topic"),
            subtopic=_text(r, "subtopic_id"),
            sentence=number,
            tokens=tokens,
            sentences=[],
            head=_text(r, "mention_head"),
            head_lemma=_text(r, "mention_head_lemma"),
            singleton=singleton,
        ),
    )


def read_ucdcr(files: list[UcdcrFile]) -> list[Mention]:
    """The mentions of the files, in file and record order; each document's sentences are
    those its mentions lie in (the records give no others), in sentence order."""
    documents: dict[str, dict[int, list[str]]] = {}
    mentions: list[Mention] = []
    for f in files:
        for index, obj in _records(f):
            mentions.append(_mention(obj, f, index, documents))
    if not mentions:
        raise CmrkitError("no mentions in the uCDCR input", path=files[0].path if files else None)
    shared = {doc: sorted(sents.items()) for doc, sents in documents.items()}
    sizes = Counter(m.cluster for m in mentions)
    for m in mentions:
        assert m.cdcr is not None
        m.cdcr.sentences = shared[m.doc_id]
        if m.cdcr.singleton is None:
            m.cdcr.singleton = sizes[m.cluster] == 1
        number, at = m.cdcr.sentence, 0
        for n, words in m.cdcr.sentences:  # the document as its known sentences joined
            if n == number:
                break
            at += len(join_tokens(words)[0]) + 1
        m.context_offset = at
    return mentions
