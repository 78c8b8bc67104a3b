"""Coreference clusterings as files: the CoNLL-2012 column format and cmrkit's cluster JSON(L).

CoNLL-2012 (the reference scorer's format): documents between ``#begin document NAME`` and
``#end document`` lines, one token per non-blank line, the coreference column last: ``-`` or
``_`` for none, else chains such as ``(12)`` (a one-token mention), ``(12`` (opens), ``12)``
(closes), joined by ``|``. A mention is identified by its first and last token line in the
document (0-based, counting non-blank lines), as the reference scorer does.

cmrkit's cluster files, told apart by their first character:

- JSON lines of mention records, ``{"cluster": C, "mention_id": M}`` (extra fields are kept
  out of the way): mentions are identified by id and the file is one corpus-wide document; or
  ``{"cluster": C, "doc_id": D, "start": S, "end": E}``: mentions are token spans (end
  inclusive) in document ``D``, as in CoNLL.
- JSON lines of document records, ``{"doc_key": D, "clusters": [[[S, E], ...], ...]}`` (the
  e2e-coref "jsonlines" layout; mention ids in place of ``[S, E]`` work too).
- A JSON list of clusters, each a list of mention ids: ``[["m1", "m2"], ["m3"]]``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_lines, parse_json, read_text

SPAN = "span"
ID = "id"
CORPUS_DOCUMENT = ""  # the one document of files whose mentions are identified by id

_BEGIN = re.compile(r"#\s*begin document (.*)")
_END = re.compile(r"#\s*end document")
# the reference scorer's patterns, applied in its order (double antecedents are discarded)
_DOUBLE = re.compile(r"\(([0-9]+\+[0-9])\)")
_SINGLE = re.compile(r"\(([0-9]+)\)")
_OPEN = re.compile(r"\(([0-9]+)")
_CLOSE = re.compile(r"([0-9]+)\)")


@dataclass
class Document:
    """One document's mentions in reading order (a CoNLL mention when it closes).

    ``chains[i]`` numbers the chain of mention ``i``: chains are numbered in the order the
    reference scorer first meets them (a chain that opens on a line comes before one that only
    closes there). ``names`` holds each chain's label in the file.
    """

    name: str
    ids: list[Hashable] = field(default_factory=list)
    chains: list[int] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict, repr=False)

    def chain(self, label: str) -> int:
        """The number of chain ``label``, numbering it when first met."""
        n = self._index.get(label)
        if n is None:
            n = self._index[label] = len(self.names)
            self.names.append(label)
        return n

    def add(self, ident: Hashable, chain: int, line: int) -> None:
        self.ids.append(ident)
        self.chains.append(chain)
        self.lines.append(line)


@dataclass
class Clustering:
    """The coreference chains of one file, document by document in file order."""

    path: str
    format: str  # "conll", "jsonl" or "json"
    identity: str  # SPAN: (first, last) token in its document; ID: a corpus-wide mention id
    documents: dict[str, Document]
    # chain labels name the same chain in every document (CoNLL numbers, cluster ids); False
    # for e2e-coref document records, whose clusters are numbered per document
    global_chains: bool = True
    # mention records by id that all carry "unit" and "doc_id", as the gold clusters
    # build-collection writes beside the qrels; "plain": all are {"cluster", "mention_id"}
    # alone, as `cmrkit cluster` writes a system's clusters; "" otherwise
    records: str = ""

    @property
    def mentions(self) -> int:
        return sum(len(d.ids) for d in self.documents.values())

    def where(self, line: int) -> str:
        """How a message names the place of a mention read from ``line``."""
        return f"cluster {line}" if self.format == "json" else f"line {line}"


def read_clustering(path: str | os.PathLike) -> Clustering:
    """Read a CoNLL-2012 file or a cmrkit cluster JSON/JSONL file, told apart by its content."""
    for _, line in iter_lines(path):
        text = line.lstrip()
        if not text:
            continue
        if text.startswith("#"):
            return read_conll(path)
        if text.startswith("["):
            return read_cluster_json(path)
        if text.startswith("{"):
            return read_cluster_jsonl(path)
        break
    else:
        raise CmrkitError("the file is empty; expected CoNLL-2012 or cluster JSON", path=path)
    raise CmrkitError(
        "neither CoNLL-2012 ('#begin document ...' first) nor cluster JSON ('[' or '{' "
        "first); see `cmrkit eval-coref --help` for the formats",
        path=path,
    )


def _coref_column(text: str, path: object, n: int) -> tuple[list[str], list[str], list[str]]:
    """(one-token chains, opening chains, closing chains) of a coreference column, found as the
    reference scorer finds them: each pattern removed leftmost first, in that order."""
    # the common cases at once: (12)  (12  12)
    if text.isascii():
        if text[0] == "(":
            if text[-1] == ")" and text[1:-1].isdigit():
                return [text[1:-1]], [], []
            if text[1:].isdigit():
                return [], [text[1:]], []
        elif text[-1] == ")" and text[:-1].isdigit():
            return [], [], [text[:-1]]
    rest = text
    found: list[list[str]] = []
    for pattern in (_DOUBLE, _SINGLE, _OPEN, _CLOSE):
        labels = []
        while True:
            m = pattern.search(rest)
            if m is None:
                break
            labels.append(m.group(1))
            rest = rest[: m.start()] + rest[m.end() :]
        found.append(labels)
    if rest.strip("|"):
        raise CmrkitError(
            f"coreference column {text!r} is not '-' nor chains like (12), (12 or 12) "
            "joined by '|' (it is the last column)",
            path=path,
            where=f"line {n}",
        )
    return found[1], found[2], found[3]


def read_conll(path: str | os.PathLike) -> Clustering:
    """Read a CoNLL-2012 coreference file (the reference scorer's key and response format)."""
    documents: dict[str, Document] = {}
    begun: dict[str, int] = {}
    doc: Document | None = None
    token = 0
    opened: dict[int, list[tuple[int, int]]] = {}
    # lines end at "\n" only, as for the reference scorer
    for n, raw in enumerate(read_text(path).split("\n"), 1):
        # the bulk: a token line in a document whose coreference column is "-" or "_"
        if doc is not None and raw[-1:] in ("-", "_") and raw[-2:-1] in (" ", "\t"):
            if raw[0] != "#":
                token += 1
                continue
        raw = raw.rstrip("\r")
        line = raw.strip()
        if not line:
            continue
        if doc is None:
            m = _BEGIN.fullmatch(raw)
            if m is None:
                if "begin document" in line:
                    raise CmrkitError(
                        "write '#begin document NAME' at the start of the line",
                        path=path,
                        where=f"line {n}",
                    )
                if not line.startswith("#"):
                    raise CmrkitError(
                        "token line outside a document; each document starts with "
                        "'#begin document NAME' and ends with '#end document'",
                        path=path,
                        where=f"line {n}",
                    )
                continue
            name = m.group(1)
            if name in begun:
                raise CmrkitError(
                    f"document {name!r} begins again (first on line {begun[name]}); "
                    "document names must be unique",
                    path=path,
                    where=f"line {n}",
                )
            begun[name] = n
            doc = Document(name)
            token = 0
            opened = {}
            continue
        if line[0] == "#" and _END.match(line):
            for chain, starts in opened.items():
                if starts:
                    label, start_line = doc.names[chain], starts[-1][1]
                    raise CmrkitError(
                        f"mention of chain {label} opened on line {start_line} is never "
                        f"closed in document {doc.name!r}",
                        path=path,
                        where=f"line {n}",
                    )
            documents[doc.name] = doc
            doc = None
            continue
        if line[0] == "#" and _BEGIN.match(line):
            raise CmrkitError(
                f"'#begin document' inside document {doc.name!r} (begun on line "
                f"{begun[doc.name]}); end it with '#end document' first",
                path=path,
                where=f"line {n}",
            )
        column = line.rsplit(None, 1)[-1]
        if column != "-" and column != "_":
            singles, opens, closes = _coref_column(column, path, n)
            for label in singles:
                doc.add((token, token), doc.chain(label), n)
            for label in opens:
                opened.setdefault(doc.chain(label), []).append((token, n))
            for label in closes:
                chain = doc.chain(label)
                starts = opened.get(chain)
                if not starts:
                    raise CmrkitError(
                        f"'{label})' closes a mention of chain {label} that is not open",
                        path=path,
                        where=f"line {n}",
                    )
                doc.add((starts.pop()[0], token), chain, n)
        token += 1
    if doc is not None:
        raise CmrkitError(
            f"document {doc.name!r} (begun on line {begun[doc.name]}) has no "
            "'#end document' line; is the file truncated?",
            path=path,
        )
    if not documents:
        raise CmrkitError("no '#begin document NAME' line: not a CoNLL-2012 file", path=path)
    return Clustering(str(path), "conll", SPAN, documents)


def _label(value: Any, what: str, path: object, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise CmrkitError(
            f"{what} must be a string or an integer, found {json.dumps(value)[:40]}",
            path=path,
            where=where,
        )
    return str(value)


def _span(value: Any, path: object, where: str) -> tuple[int, int]:
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        or not 0 <= value[0] <= value[1]
    ):
        raise CmrkitError(
            f"a span mention is [first, last] token numbers with 0 <= first <= last, found "
            f"{json.dumps(value)[:40]}",
            path=path,
            where=where,
        )
    return value[0], value[1]


def read_cluster_json(path: str | os.PathLike) -> Clustering:
    """Read a JSON list of clusters, each a list of mention ids (one corpus-wide document)."""
    data = parse_json(
        read_text(path), path=path, what="a list of clusters, each a list of mention ids"
    )
    if not isinstance(data, list):
        raise CmrkitError("expected a list of clusters, each a list of mention ids", path=path)
    doc = Document(CORPUS_DOCUMENT)
    for i, cluster in enumerate(data, 1):
        where = f"cluster {i}"
        if not isinstance(cluster, list):
            raise CmrkitError("a cluster must be a list of mention ids", path=path, where=where)
        for mention in cluster:  # an empty cluster is no chain
            doc.add(_label(mention, "a mention id", path, where), doc.chain(str(i)), i)
    return Clustering(str(path), "json", ID, {CORPUS_DOCUMENT: doc})


def _document(documents: dict[str, Document], name: str) -> Document:
    doc = documents.get(name)
    if doc is None:
        doc = documents[name] = Document(name)
    return doc


def read_cluster_jsonl(path: str | os.PathLike) -> Clustering:
    """Read cluster JSON lines: mention records or e2e-coref document records."""
    from cmrkit.fileio import iter_jsonl

    documents: dict[str, Document] = {}
    layout: str | None = None
    identity: str | None = None
    first_line: dict[str, int] = {}
    gold = plain = True  # what every mention record by id carries (see Clustering.records)

    def check_identity(kind: str, n: int) -> None:
        nonlocal identity
        if identity is None:
            identity = kind
        elif identity != kind:
            raise CmrkitError(
                f"mentions identified by {kind} here but by {identity} earlier; "
                "use one kind of identity per file",
                path=path,
                where=f"line {n}",
            )

    for n, obj in iter_jsonl(path, what="a cluster record per line"):
        where = f"line {n}"
        kind = "document" if "clusters" in obj else "mention"
        if layout is None:
            layout = kind
        elif layout != kind:
            raise CmrkitError(
                f"a {kind} record among {layout} records; a file holds one kind",
                path=path,
                where=where,
            )
        if kind == "document":
            name = _label(obj.get("doc_key"), "'doc_key'", path, where)
            if name in documents:
                raise CmrkitError(
                    f"document {name!r} appears again (first on line {first_line[name]})",
                    path=path,
                    where=where,
                )
            first_line[name] = n
            doc = documents[name] = Document(name)
            clusters = obj["clusters"]
            if not isinstance(clusters, list) or not all(isinstance(c, list) for c in clusters):
                raise CmrkitError(
                    "'clusters' must be a list of clusters, each a list of mentions",
                    path=path,
                    where=where,
                )
            for i, cluster in enumerate(clusters):
                for mention in cluster:  # an empty cluster is no chain
                    if isinstance(mention, list):
                        check_identity(SPAN, n)
                        doc.add(_span(mention, path, where), doc.chain(str(i)), n)
                    else:
                        check_identity(ID, n)
                        doc.add(_label(mention, "a mention id", path, where), doc.chain(str(i)), n)
            continue
        if "cluster" not in obj:
            raise CmrkitError(
                'missing field \'cluster\'; a record is {"cluster": C, "mention_id": M} '
                'or {"cluster": C, "doc_id": D, "start": S, "end": E}',
                path=path,
                where=where,
            )
        label = _label(obj["cluster"], "'cluster'", path, where)
        if "mention_id" in obj:
            check_identity(ID, n)
            gold = gold and "unit" in obj and "doc_id" in obj
            plain = plain and len(obj) == 2
            doc = _document(documents, CORPUS_DOCUMENT)
            ident: Hashable = _label(obj["mention_id"], "'mention_id'", path, where)
        elif "start" in obj and "end" in obj:
            check_identity(SPAN, n)
            if "doc_id" not in obj:
                raise CmrkitError(
                    "a span record needs 'doc_id' (the document its tokens count in)",
                    path=path,
                    where=where,
                )
            name = _label(obj["doc_id"], "'doc_id'", path, where)
            doc = _document(documents, name)
            ident = _span([obj["start"], obj["end"]], path, where)
        else:
            raise CmrkitError(
                "a mention record needs 'mention_id', or 'doc_id', 'start' and 'end'",
                path=path,
                where=where,
            )
        doc.add(ident, doc.chain(label), n)
    if layout is None:
        raise CmrkitError("no cluster records in the file", path=path)
    records = ""
    if layout == "mention" and identity == ID:
        records = "gold" if gold else "plain" if plain else ""
    return Clustering(str(path), "jsonl", identity or ID, documents, layout == "mention", records)


def write_clusters_jsonl(out: IO[str], records: Iterable[Mapping[str, Any]]) -> None:
    """Mention records, one JSON object per line (``cluster`` and ``mention_id`` first)."""
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")


def _crossing(spans: list[tuple[int, int]]) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Two spans that overlap without nesting, if any (brackets cannot write them)."""
    ordered = sorted(spans, key=lambda s: (s[0], -s[1]))
    stack: list[tuple[int, int]] = []
    for s in ordered:
        while stack and stack[-1][1] < s[0]:
            stack.pop()
        if stack and s[1] > stack[-1][1]:
            return stack[-1], s
        stack.append(s)
    return None


def write_conll(
    out: IO[str], documents: Iterable[tuple[str, int, Iterable[tuple[int, int, str]]]]
) -> None:
    """Write documents as CoNLL-2012 lines, one token per line (``NAME 0 i _ COREF``).

    ``documents`` yields (name, number of tokens, mentions as (first token, last token,
    chain label)). Two mentions of one chain that overlap without nesting cannot be written
    as brackets: a CmrkitError.
    """
    for name, tokens, mentions in documents:
        singles: dict[int, list[str]] = {}
        opens: dict[int, list[str]] = {}
        closes: dict[int, list[str]] = {}
        by_chain: dict[str, list[tuple[int, int]]] = {}
        for start, end, label in mentions:
            if not 0 <= start <= end < tokens:
                raise CmrkitError(
                    f"mention ({start}, {end}) of chain {label} lies outside the {tokens} "
                    f"tokens of document {name!r}"
                )
            by_chain.setdefault(label, []).append((start, end))
            if start == end:
                singles.setdefault(start, []).append(f"({label})")
            else:
                opens.setdefault(start, []).append(f"({label}")
                closes.setdefault(end, []).append(f"{label})")
        for label, spans in by_chain.items():
            pair = _crossing(spans)
            if pair is not None:
                raise CmrkitError(
                    f"mentions {pair[0]} and {pair[1]} of chain {label} in document {name!r} "
                    "overlap without nesting; CoNLL brackets cannot hold them"
                )
        out.write(f"#begin document {name}\n")
        first = re.sub(r"\s", "_", name) or "_"
        for i in range(tokens):
            parts = opens.get(i, []) + singles.get(i, []) + closes.get(i, [])
            out.write(f"{first}\t0\t{i}\t_\t{'|'.join(parts) if parts else '-'}\n")
        out.write("#end document\n")
