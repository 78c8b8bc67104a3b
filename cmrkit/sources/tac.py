"""TAC KBP entity discovery and linking (EDL) data: gold mentions and SGML/XML source documents.

Mentions come in two layouts:

- TAC 2015+ single tab file: ``system <tab> mention_id <tab> string <tab> doc:start-end <tab>
  kb_or_nil <tab> entity_type <tab> mention_type [<tab> confidence ...]``;
- TAC 2014: a queries XML (``<query id><name/><docid/><beg/><end/></query>``) plus a links tab
  file (``query_id <tab> kb_or_nil <tab> entity_type ...``).

Offsets are 0-based with the end inclusive, and count raw characters of the source document from
the first character of its own ``<DOC`` (from the start of the file when the file holds one
document), markup included and text XML-escaped (``&amp;`` counts 5). Every mention string is
checked against the document at its offsets (after unescaping); a mismatch is reported, never
shifted.

A document is read into *pieces*: the visible characters with the raw span each comes from
(markup dropped, entities unescaped), grouped in blocks that markup separates. Sentence
segmentation runs on the blocks and maps back to raw offsets, so unit ids stay in raw offsets.
"""

from __future__ import annotations

import gzip
import os
import re
import xml.parsers.expat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_lines
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

TAC_TYPES = ("PER", "ORG", "GPE", "LOC", "FAC", "TTL")
DEFAULT_TYPES = ("PER", "ORG", "GPE")
# spaCy labels -> TAC entity types (None: not an entity type CMR uses for agreement)
NER_TYPES = {"PERSON": "PER", "ORG": "ORG", "GPE": "GPE", "LOC": "LOC", "FAC": "FAC"}

_DOC_OPEN = re.compile(r"<doc\b[^>]*>", re.IGNORECASE)
_DOC_CLOSE = re.compile(r"</doc\s*>", re.IGNORECASE)
_DOC_ID_ATTR = re.compile(r"""\bid\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)
_DOC_ID_CHILD = re.compile(r"<(docid|docno)>\s*([^<\s]+)\s*</\1>", re.IGNORECASE)
_TOKEN = re.compile(r"<[^>]*>|&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z]+);")
_TAG_NAME = re.compile(r"</?\s*([A-Za-z_][\w.-]*)")
_AUTHOR_ATTR = re.compile(r"""\b(?:orig_)?author\s*=\s*(?:"([^"]*)"|'([^']*)')""")
_DATE_IN_ID = re.compile(r"(?<!\d)((?:19|20)\d{2})(\d{2})(\d{2})(?!\d)")

_XML_ENTITIES = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'", "nbsp": "\u00a0"}
# markup that does not end a sentence block (inline formatting, links)
_INLINE_TAGS = frozenset({"a", "b", "i", "u", "em", "strong", "font", "span", "img", "br"})
# metadata elements whose text is not document prose: never part of a sentence unit
_META_TAGS = frozenset({"docid", "docno", "doctype", "datetime", "date_time", "date"})


@dataclass
class TacMention:
    """One gold entity mention; ``start``/``end`` are raw offsets, end inclusive (TAC style)."""

    mention_id: str
    text: str
    doc_id: str
    start: int
    end: int
    entity: str
    type: str
    mention_type: str | None
    path: str
    line: int


@dataclass
class Block:
    """Visible text between two block-level tags, with the raw span of every character."""

    text: str
    raw_start: list[int]
    raw_end: list[int]


@dataclass
class TacDocument:
    """One source document: its raw text (offsets count into it) and where it was found."""

    doc_id: str
    raw: str
    path: str
    line: int
    _blocks: list[Block] | None = field(default=None, repr=False)

    @property
    def date(self) -> date | None:
        return doc_date(self.doc_id)

    @property
    def blocks(self) -> list[Block]:
        if self._blocks is None:
            self._blocks = _read_blocks(self.raw)
        return self._blocks

    def masked(self) -> str:
        """Text of the same length as ``raw``: markup blanked, entities as their character.

        Raw offsets stay valid in it, so it serves as the context of :class:`Mention` records.
        """
        chars = [c if c == "\n" else " " for c in self.raw]
        for block in self.blocks:
            for c, s in zip(block.text, block.raw_start, strict=True):
                chars[s] = c
        return "".join(chars)

    def visible(self, start: int, end: int) -> tuple[str, list[int]]:
        """Visible text of raw span ``[start, end)``, whitespace collapsed and blocks joined by a
        space, and for each raw offset in the span the index of its character in that text
        (-1 for markup and whitespace)."""
        out: list[str] = []
        index = [-1] * (end - start)
        for block in self.blocks:
            if not block.raw_start or block.raw_end[-1] <= start or block.raw_start[0] >= end:
                continue
            need_space = bool(out)
            for c, s, e in zip(block.text, block.raw_start, block.raw_end, strict=True):
                if s < start or s >= end:
                    continue
                if c.isspace():
                    need_space = bool(out)
                    continue
                if need_space:
                    out.append(" ")
                    need_space = False
                for k in range(s, min(e, end)):
                    index[k - start] = len(out)
                out.append(c)
        return "".join(out), index


def doc_date(doc_id: str) -> date | None:
    """The date in a TAC document id (``AFP_ENG_20091001.0009`` -> 2009-10-01), or None."""
    for m in _DATE_IN_ID.finditer(doc_id):
        try:
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            continue
    return None


def unescape(text: str) -> str:
    """Replace XML character entities by the characters they stand for."""
    return _TOKEN.sub(lambda m: _entity_char(m.group(0)) or m.group(0), text)


def _entity_char(token: str) -> str | None:
    if not token.startswith("&"):
        return None
    body = token[1:-1]
    try:
        if body.startswith(("#x", "#X")):
            return chr(int(body[2:], 16))
        if body.startswith("#"):
            return chr(int(body[1:]))
    except (ValueError, OverflowError):
        return None
    return _XML_ENTITIES.get(body)


def _read_blocks(raw: str) -> list[Block]:
    blocks: list[Block] = []
    text: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    meta_depth = 0

    def flush() -> None:
        if any(not c.isspace() for c in text):
            blocks.append(Block("".join(text), list(starts), list(ends)))
        text.clear()
        starts.clear()
        ends.clear()

    def emit(c: str, s: int, e: int) -> None:
        if not meta_depth:
            text.append(c)
            starts.append(s)
            ends.append(e)

    pos = 0
    for m in _TOKEN.finditer(raw):
        for k in range(pos, m.start()):
            emit(raw[k], k, k + 1)
        token = m.group(0)
        pos = m.end()
        if token.startswith("&"):
            c = _entity_char(token)
            if c is None:
                for k in range(m.start(), m.end()):
                    emit(raw[k], k, k + 1)
            else:
                emit(c, m.start(), m.end())
            continue
        name_match = _TAG_NAME.match(token)
        name = name_match.group(1).lower() if name_match else ""
        if name in _INLINE_TAGS:
            emit(" ", m.start(), m.end())
            continue
        flush()
        closing = token.startswith("</")
        if name in _META_TAGS and not token.endswith("/>"):
            meta_depth = max(0, meta_depth - 1) if closing else meta_depth + 1
            continue
        author = _AUTHOR_ATTR.search(token)
        if author and not closing:
            value_start = m.start() + author.start(author.lastindex or 1)
            for k, c in enumerate(author.group(author.lastindex or 1)):
                emit(c, value_start + k, value_start + k + 1)
            flush()
    for k in range(pos, len(raw)):
        emit(raw[k], k, k + 1)
    flush()
    return blocks


class Problems:
    """Bad input records: raised at once, or (``skip_bad``) counted and kept for the report."""

    def __init__(self, skip_bad: bool = False):
        self.skip_bad = skip_bad
        self.messages: list[str] = []

    def report(self, message: str, *, path: object, where: str | None = None) -> None:
        error = CmrkitError(message, path=path, where=where)
        if not self.skip_bad:
            raise error
        self.messages.append(str(error))

    def report_mention(self, message: str, mention: TacMention) -> None:
        """A problem of one gold mention, named at its file and line."""
        self.report(message, path=mention.path, where=f"line {mention.line}")

    def __len__(self) -> int:
        return len(self.messages)


def _check_type(
    etype: str, types: Iterable[str], path: object, line: int, problems: Problems
) -> bool:
    """True if the mention is kept; unknown types are problems, other known types dropped."""
    if etype not in TAC_TYPES:
        problems.report(
            f"unknown entity type {etype!r}; expected one of {', '.join(TAC_TYPES)}",
            path=path,
            where=f"line {line}",
        )
        return False
    return etype in types


def _int_field(text: str, what: str, path: object, line: int, problems: Problems) -> int | None:
    try:
        value = int(text.strip())
    except ValueError:
        problems.report(
            f"{what} {text!r} is not an integer offset", path=path, where=f"line {line}"
        )
        return None
    if value < 0:
        problems.report(f"{what} {value} is negative", path=path, where=f"line {line}")
        return None
    return value


_MENTION_COLUMNS = ("system", "mention id", "string", "doc:start-end", "kb/nil id", "type")
_LINK_COLUMNS = ("query id", "kb/nil id", "type")


def _columns(
    line: str, names: tuple[str, ...], path: object, n: int, problems: Problems
) -> list[str] | None:
    """The tab-separated columns of line ``n``; None, reported, when it has fewer than
    ``names``."""
    cols = line.split("\t")
    if len(cols) < len(names):
        problems.report(
            f"expected at least {len(names)} tab-separated columns '{', '.join(names)}', "
            f"found {len(cols)}",
            path=path,
            where=f"line {n}",
        )
        return None
    return cols


def read_mention_tab(
    path: str | os.PathLike,
    *,
    types: Iterable[str] = DEFAULT_TYPES,
    problems: Problems | None = None,
) -> list[TacMention]:
    """Gold mentions of the TAC 2015+ tab layout, restricted to ``types``."""
    problems = Problems() if problems is None else problems
    types = frozenset(types)
    mentions = []
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        cols = _columns(line, _MENTION_COLUMNS, path, n, problems)
        if cols is None:
            continue
        span = cols[3].strip()
        doc_id, sep, offsets = span.rpartition(":")
        beg_text, dash, end_text = offsets.partition("-")
        if not sep or not dash or not doc_id:
            problems.report(
                f"column 4 {span!r} is not 'docid:start-end'", path=path, where=f"line {n}"
            )
            continue
        start = _int_field(beg_text, "start", path, n, problems)
        end = _int_field(end_text, "end", path, n, problems)
        if start is None or end is None:
            continue
        if end < start:
            problems.report(f"end {end} is before start {start}", path=path, where=f"line {n}")
            continue
        etype = cols[5].strip()
        if not _check_type(etype, types, path, n, problems):
            continue
        mentions.append(
            TacMention(
                mention_id=cols[1].strip(),
                text=cols[2],
                doc_id=doc_id,
                start=start,
                end=end,
                entity=cols[4].strip(),
                type=etype,
                mention_type=cols[6].strip() if len(cols) > 6 else None,
                path=str(path),
                line=n,
            )
        )
    return mentions


def read_queries_xml(
    queries_path: str | os.PathLike,
    links_path: str | os.PathLike,
    *,
    types: Iterable[str] = DEFAULT_TYPES,
    problems: Problems | None = None,
) -> list[TacMention]:
    """Gold mentions of the TAC 2014 layout: queries XML joined with the links tab file."""
    problems = Problems() if problems is None else problems
    types = frozenset(types)
    links: dict[str, tuple[str, str, int]] = {}
    for n, line in iter_lines(links_path):
        if not line.strip() or line.split("\t")[0].strip().lower() == "query_id":
            continue
        cols = _columns(line, _LINK_COLUMNS, links_path, n, problems)
        if cols is None:
            continue
        links[cols[0].strip()] = (cols[1].strip(), cols[2].strip(), n)
    mentions = []
    for query in _parse_queries_xml(queries_path):
        qline = query["_line"]
        where = f"line {qline}"
        missing = [k for k in ("id", "name", "docid", "beg", "end") if k not in query]
        if missing:
            problems.report(f"query lacks <{missing[0]}>", path=queries_path, where=where)
            continue
        link = links.get(query["id"])
        if link is None:
            problems.report(
                f"query {query['id']} has no line in the links file {links_path}",
                path=queries_path,
                where=where,
            )
            continue
        entity, etype, link_line = link
        if not _check_type(etype, types, links_path, link_line, problems):
            continue
        start = _int_field(query["beg"], "<beg>", queries_path, qline, problems)
        end = _int_field(query["end"], "<end>", queries_path, qline, problems)
        if start is None or end is None:
            continue
        mentions.append(
            TacMention(
                mention_id=query["id"],
                text=query["name"],
                doc_id=query["docid"].strip(),
                start=start,
                end=end,
                entity=entity,
                type=etype,
                mention_type=None,
                path=str(queries_path),
                line=qline,
            )
        )
    return mentions


def _parse_queries_xml(path: str | os.PathLike) -> list[dict]:
    """``<query id>`` elements as dicts of child texts, with the line each starts on."""
    parser = xml.parsers.expat.ParserCreate()
    queries: list[dict] = []
    stack: list[str] = []
    buf: list[str] = []

    def start(name: str, attrs: dict) -> None:
        stack.append(name)
        buf.clear()
        if name == "query":
            queries.append({"_line": parser.CurrentLineNumber})
            if "id" in attrs:
                queries[-1]["id"] = attrs["id"].strip()

    def end(name: str) -> None:
        stack.pop()
        if queries and stack and stack[-1] == "query" and name in ("name", "docid", "beg", "end"):
            queries[-1][name] = "".join(buf)
        buf.clear()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = buf.append
    data = _read_bytes(Path(path))
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as e:
        raise CmrkitError(
            f"malformed XML: {xml.parsers.expat.ErrorString(e.code)} (column {e.offset + 1}); "
            "fix the file",
            path=path,
            where=f"line {e.lineno}",
        ) from None
    return queries


def _read_bytes(path: Path) -> bytes:
    """The bytes of a plain or gzipped file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CmrkitError("file not found; check the path", path=path) from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError) as e:
            raise CmrkitError(f"corrupt or truncated gzip file ({e})", path=path) from None
    return data


def _read_raw(path: Path) -> str:
    """File text with every character kept (no newline translation: offsets count ``\\r``)."""
    data = _read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CmrkitError(
            f"not UTF-8 text (byte {e.start}); convert it to UTF-8", path=path
        ) from None


def split_documents(text: str, path: str) -> list[TacDocument]:
    """The ``<DOC>`` elements of one source file."""
    opens = list(_DOC_OPEN.finditer(text))
    docs = []
    for i, m in enumerate(opens):
        limit = opens[i + 1].start() if i + 1 < len(opens) else len(text)
        close = _DOC_CLOSE.search(text, m.end(), limit)
        stop = close.end() if close else limit
        id_match = _DOC_ID_ATTR.search(m.group(0))
        doc_id = (id_match.group(1) or id_match.group(2)) if id_match else None
        if not doc_id:
            child = _DOC_ID_CHILD.search(text, m.end(), stop)
            doc_id = child.group(2) if child else None
        line = text.count("\n", 0, m.start()) + 1
        if not doc_id:
            raise CmrkitError(
                "<DOC> without an id attribute or <DOCID>/<DOCNO> child",
                path=path,
                where=f"line {line}",
            )
        start = 0 if len(opens) == 1 else m.start()
        docs.append(TacDocument(doc_id.strip(), text[start:stop], path, line))
    return docs


def iter_documents(root: str | os.PathLike) -> Iterator[TacDocument]:
    """Every ``<DOC>`` of every file under ``root`` (a folder or one file), in path order."""
    root = Path(root)
    if not root.exists():
        raise CmrkitError("documents folder not found; check the path", path=root)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    seen: dict[str, str] = {}
    for f in files:
        if f.name.startswith("."):
            continue
        for doc in split_documents(_read_raw(f), str(f)):
            if doc.doc_id in seen:
                raise CmrkitError(
                    f"document {doc.doc_id} also appears in {seen[doc.doc_id]}; keep one copy",
                    path=f,
                    where=f"line {doc.line}",
                )
            seen[doc.doc_id] = f"{f}"
            yield doc


def check_mention(mention: TacMention, doc: TacDocument) -> str | None:
    """Why the mention does not match its document at its offsets, or None when it does."""
    if mention.end >= len(doc.raw):
        return (
            f"offsets {mention.start}-{mention.end} lie outside document {doc.doc_id} "
            f"({len(doc.raw)} characters, {doc.path})"
        )
    found = unescape(doc.raw[mention.start : mention.end + 1])
    if " ".join(found.split()) != " ".join(mention.text.split()):
        return (
            f"mention {mention.text!r} does not match the document text {found!r} at "
            f"{mention.start}-{mention.end} of {doc.doc_id}; check the offsets "
            "(0-based, end inclusive, counted from '<DOC', markup and escapes included)"
        )
    return None


class Analyser:
    """Sentences and named entities of documents, in raw offsets, with a spaCy pipeline.

    spaCy runs on each block of visible text (markup separates blocks, so no sentence spans two
    posts or a quote and its reply); whitespace around sentences is trimmed. Entities keep the
    spaCy labels that :data:`NER_TYPES` maps to TAC types (others are dropped).
    """

    def __init__(self, model: str = DEFAULT_SPACY_MODEL, *, entities: bool = True):
        import spacy

        try:
            self.nlp = spacy.load(model, disable=["lemmatizer"] + ([] if entities else ["ner"]))
        except OSError:
            raise CmrkitError(
                f"spaCy model {model!r} is not installed; pass --spacy-model NAME"
            ) from None
        self.nlp.max_length = max(self.nlp.max_length, 5_000_000)
        self.entities = entities
        self.cache = self._cache(model)

    def _cache(self, model: str):
        """The cache of this pipeline's sentences and entities per text (None when off)."""
        import spacy

        from cmrkit.nercache import SENTENCE, EntityCache

        labels = [*(self.nlp.get_pipe("ner").labels if self.entities else ()), SENTENCE]
        identity = {
            "spacy": spacy.__version__,
            "model": model,
            "model_version": str(self.nlp.meta.get("version", "unknown")),
            "pipeline": "tac: " + ",".join(self.nlp.pipe_names),
        }
        return EntityCache.for_model(identity, labels, name="tac")

    def analyse(
        self, doc: TacDocument
    ) -> tuple[list[tuple[int, int]], list[tuple[int, int, str, str]]]:
        """(sentence spans ``[start, end)``, entities (start, end, text, TAC type))."""
        ((_, sents, ents),) = self.analyse_many([doc])
        return sents, ents

    def analyse_many(
        self, docs: Iterable[TacDocument], batch_docs: int = 64
    ) -> Iterator[tuple[TacDocument, list[tuple[int, int]], list[tuple[int, int, str, str]]]]:
        """(document, sentences, entities) for each document, in order; spaCy sees the blocks of
        ``batch_docs`` documents at a time."""
        chunk: list[TacDocument] = []
        for doc in docs:
            chunk.append(doc)
            if len(chunk) == batch_docs:
                yield from self._batch(chunk)
                chunk = []
        if chunk:
            yield from self._batch(chunk)

    def _batch(
        self, docs: list[TacDocument]
    ) -> Iterator[tuple[TacDocument, list[tuple[int, int]], list[tuple[int, int, str, str]]]]:
        from cmrkit.nercache import SENTENCE

        blocks = [b for d in docs for b in d.blocks]
        texts = [b.text for b in blocks]
        found = self.cache.get_many(texts) if self.cache else [None] * len(texts)
        missing = list(dict.fromkeys(t for t, f in zip(texts, found, strict=True) if f is None))
        fresh = {
            text: [(s.start_char, s.end_char, SENTENCE) for s in result.sents]
            + [(e.start_char, e.end_char, e.label_) for e in result.ents if self.entities]
            for text, result in zip(missing, self.nlp.pipe(missing, batch_size=256), strict=True)
        }
        if self.cache and fresh:
            self.cache.put_many(list(fresh), list(fresh.values()))
        parsed = iter(f if f is not None else fresh[t] for t, f in zip(texts, found, strict=True))
        for doc in docs:
            sents: list[tuple[int, int]] = []
            ents: list[tuple[int, int, str, str]] = []
            for block in doc.blocks:
                for cs, ce, label in next(parsed):
                    if label == SENTENCE:
                        while cs < ce and block.text[cs].isspace():
                            cs += 1
                        while ce > cs and block.text[ce - 1].isspace():
                            ce -= 1
                        if cs < ce:
                            sents.append((block.raw_start[cs], block.raw_end[ce - 1]))
                        continue
                    etype = NER_TYPES.get(label)
                    if etype is not None:
                        start = block.raw_start[cs]
                        ents.append((start, block.raw_end[ce - 1], block.text[cs:ce], etype))
            yield doc, sents, ents


def merge_spans(
    spans: list[tuple[int, int]], mentions: Iterable[tuple[int, int]]
) -> list[tuple[int, int]]:
    """Sentence spans with those a mention ``[start, end)`` crosses merged into one.

    A mention outside every sentence (inside skipped metadata) gets a unit of its own.
    """
    spans = sorted(spans)
    for ms, me in sorted(mentions):
        hit = [i for i, (s, e) in enumerate(spans) if s < me and ms < e]
        if not hit:
            spans.append((ms, me))
            spans.sort()
            continue
        if len(hit) > 1 or spans[hit[0]][0] > ms or spans[hit[0]][1] < me:
            s = min(ms, spans[hit[0]][0])
            e = max(me, spans[hit[-1]][1])
            spans[hit[0] : hit[-1] + 1] = [(s, e)]
    return spans


def read_sentence_offsets(path: str | os.PathLike) -> dict[str, list[tuple[int, int]]]:
    """A sentence-offsets file -> {doc: [(start, end)]} with ``end`` exclusive.

    One sentence per line, ``DOC:start:last`` (the CMR docno layout, so the docnos of published
    qrels can be used as they are) or ``DOC<TAB>start<TAB>last``; ``last`` is the offset of
    the sentence's last character.
    """
    out: dict[str, list[tuple[int, int]]] = {}
    for n, line in iter_lines(path):
        text = line.strip()
        if not text:
            continue
        parts = text.split("\t") if "\t" in text else text.rsplit(":", 2)
        if len(parts) != 3:
            raise CmrkitError(
                "expected 'DOC:start:last' or 'DOC<TAB>start<TAB>last'",
                path=path,
                where=f"line {n}",
            )
        try:
            s, last = int(parts[1]), int(parts[2])
        except ValueError:
            raise CmrkitError(
                f"offsets {parts[1]!r}, {parts[2]!r} are not integers", path=path, where=f"line {n}"
            ) from None
        if not 0 <= s <= last:
            raise CmrkitError(
                f"sentence {s}:{last} ends before it starts", path=path, where=f"line {n}"
            )
        out.setdefault(parts[0], []).append((s, last + 1))
    return {doc: sorted(set(spans)) for doc, spans in out.items()}
