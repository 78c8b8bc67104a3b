"""TREC runs, qrels and topics: the one place these formats are read and written.

Runs: ``qid Q0 docno rank score tag`` (whitespace separated). Like trec_eval, readers keep the
score and ignore the rank column; ranking is by score descending, ties broken by docno
descending (see :func:`ranked`). A line whose first non-blank character is ``#`` is a comment,
as trec_eval 10.0 reads runs (an ir_metadata block opens a run so; 9.0.8 has no comments: the
trec_eval port in ``evaluation/trec_eval.py`` reads such lines as each version does).

Qrels: ``qid iter docno rel``; ``iter`` may hold anything (the published CMR qrels put the entity
type there); ``rel`` may be written as an integer or a float (``1.0``, ``-1.0``). rel < 0 marks a
pooled but unjudged document, 0 non-relevant, > 0 relevant (graded allowed).
"""

from __future__ import annotations

import contextlib
import gc
import gzip
import math
import os
import re
import warnings
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO

from cmrkit.errors import CmrkitError
from cmrkit.fileio import iter_lines, split_zip_member

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]
Strata = dict[str, dict[str, str]]  # {qid: {docno: stratum}} of sample_eval's qrels


@dataclass(frozen=True)
class RunRow:
    qid: str
    docno: str
    rank: int
    score: float
    tag: str


# --- fields and numbers as trec_eval's C reads them -------------------------------------------

LONG_MAX = (1 << 63) - 1  # trec_eval reads grades and cutoffs with atol into a C long
# str.split() splits on these as well; C's isspace() (trec_eval 9.0.8 and 10.0 set no locale:
# the "C" locale) only on space, \t, \n, \v, \f and \r, so a U+00A0 inside a docno is part of it
_NOT_C_SPACE = re.compile("[\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
_C_FIELD = re.compile("[^ \t\n\v\f\r]+")


def c_fields(line: str) -> list[str]:
    """The fields of a line as trec_eval splits them (C ``isspace`` in the "C" locale, the same
    in both versions' get_trec_results.c and get_qrels.c)."""
    if _NOT_C_SPACE.search(line) is None:
        return line.split()
    return _C_FIELD.findall(line)


# strtod's syntax in the "C" locale (ASCII digits only), after its leading white space
_STRTOD = re.compile(
    r"""[+-]?(?:
        0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?
      | (?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?
      | inf(?:inity)? | nan(?:\([0-9a-z_]*\))?
    )""",
    re.X | re.I | re.ASCII,
)


def c_strtod(text: str) -> tuple[float, int]:
    """C's ``strtod`` (and ``atof``) on ``text``: (the value, how many characters it read); (0.0,
    0) when it reads none: Arabic-Indic or fullwidth digits, ``1_0`` read as 1, ``high`` as 0."""
    m = _STRTOD.match(text)
    if m is None:
        return 0.0, 0
    body = m.group(0)
    digits = body.lstrip("+-")
    try:
        if digits[:2].lower() == "0x":
            value = float.fromhex(body)
        else:
            value = float(body.split("(")[0])
    except OverflowError:  # a hexadecimal beyond the doubles: strtod gives HUGE_VAL
        value = math.copysign(math.inf, -1.0 if body[:1] == "-" else 1.0)
    return value, m.end()


def parse_score(
    text: str, path: object, line: int, what: str = "score", *, finite: bool = True
) -> float:
    """A score (or another real trec_eval reads with ``atof``) as C reads it: the whole field
    must be a number to C's ``strtod`` (hexadecimal ``0x1p3`` included; ``finite``: not inf or
    nan); anything that C reads otherwise than written is refused, saying what trec_eval would
    read."""
    value, used = c_strtod(text)
    if used != len(text):
        read = f"{value:g}" if used else "0"
        raise CmrkitError(
            f"{what} {text!r} is not a number as C reads it (trec_eval's atof reads {read} "
            f"from it): write it with ASCII digits, e.g. 1.5 or -2e-3",
            path=path,
            where=f"line {line}",
        )
    if finite and not math.isfinite(value):
        raise CmrkitError(f"{what} {text!r} is not finite", path=path, where=f"line {line}")
    return value


_ATOL = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+", re.ASCII)


def c_atol(text: str) -> int:
    """C's ``atol``: the leading whole number (ASCII digits, after white space), 0 when there
    is none, saturated at the bounds of a C long as ``strtol`` does."""
    m = _ATOL.match(text)
    if m is None:
        return 0
    return max(-LONG_MAX - 1, min(LONG_MAX, int(m.group(0))))


_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.0*)?", re.ASCII)


def parse_relevance(text: str, path: object, line: int) -> int:
    """A relevance value written as an int or a whole float (``1``, ``1.0``, ``-1.0``) -> int.

    trec_eval reads the relevance with C ``atol``, which silently truncates ``0.5`` to 0 and
    ``1e2`` to 1, and saturates beyond a C long; such values are refused here instead of being
    scored differently than meant.
    """
    if _WHOLE_NUMBER.fullmatch(text):
        value = int(text.partition(".")[0])
        if -LONG_MAX <= value <= LONG_MAX:
            return value
        bound = LONG_MAX if value > 0 else -LONG_MAX - 1
        raise CmrkitError(
            f"relevance {text!r} is beyond a C long (trec_eval reads {bound} and fails); "
            "use small integer grades (e.g. 0, 1, 2, -1)",
            path=path,
            where=f"line {line}",
        )
    value, used = c_strtod(text)
    if used != len(text) or not math.isfinite(value):
        raise CmrkitError(
            f"relevance {text!r} is not a number; "
            "the 4th column must be an integer like 1, 0 or -1",
            path=path,
            where=f"line {line}",
        )
    raise CmrkitError(
        f"relevance {text!r} is not written as a whole number (trec_eval would truncate it); "
        "use integer grades (e.g. 0, 1, 2, -1)",
        path=path,
        where=f"line {line}",
    )


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    # Parsing creates millions of short-lived containers and no cycles; the cyclic collector
    # would otherwise rescan them over and over (it doubles the time on a 1M-line run).
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _raw_bytes(path: str | os.PathLike) -> bytes | None:
    """The bytes of a plain or gzipped file; None for a zip member or anything unreadable
    (the line-by-line reader then reports the problem)."""
    file, member = split_zip_member(path)
    if member is not None or file.suffix == ".zip":
        return None
    try:
        data = file.read_bytes()
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error):
        return None
    return data


def _run_bytes(path: str | os.PathLike) -> bytes | None:
    """:func:`_raw_bytes` of a run without the comment lines that open it (an ir_metadata
    block): the bulk readers take no ``#`` line, and the line reader skips one anywhere."""
    raw = _raw_bytes(path)
    if raw is None:
        return None
    at = 0
    while True:
        text = at
        while raw[text : text + 1] in (b" ", b"\t", b"\v", b"\f", b"\r"):
            text += 1
        if raw[text : text + 1] != b"#":
            return raw[at:] if at else raw
        end = raw.find(b"\n", text)
        if end < 0:
            return b""
        at = end + 1


def read_qrels(path: str | os.PathLike, *, columns: bool = False) -> Qrels:
    """Read a qrels file; identical duplicate lines warn, conflicting ones are an error.
    ``columns``: a regular file read by the compiled reader comes as :class:`QrelsColumns`
    (a read-only mapping whose per-query dicts are made on first use; for scoring)."""
    raw = _raw_bytes(path)
    with _no_gc():
        fast = _read_qrels_fast(raw, columns=columns) if raw is not None else None
    if fast is not None:
        return fast
    qrels, _ = _read_qrels_lines(path, stratified=False)
    if not qrels:
        raise CmrkitError("no judgments in the qrels file", path=path)
    return qrels


def _first_fields(path: str | os.PathLike) -> int:
    """Number of fields on the first non-blank line (0 for an empty file)."""
    for _, line in iter_lines(path):
        fields = c_fields(line)
        if fields:
            return len(fields)
    return 0


def read_qrels_with_strata(
    path: str | os.PathLike, *, columns: bool = False
) -> tuple[Qrels, Strata | None]:
    """A qrels file and, for sample_eval's five-column qrels ``qid iter docno stratum rel``, the
    stratum of each document (None for ordinary four-column qrels). ``columns``: see
    :func:`read_qrels`."""
    if _first_fields(path) != 5:
        return read_qrels(path, columns=columns), None
    return _read_qrels_lines(path, stratified=True)


def _read_qrels_lines(path: str | os.PathLike, *, stratified: bool) -> tuple[Qrels, Strata]:
    """Qrels (and, ``stratified``, sample_eval's strata) line by line, every line checked;
    identical duplicate lines warn, conflicting ones are an error."""
    qrels: Qrels = {}
    strata: Strata = {}
    seen_line: dict[tuple[str, str], int] = {}
    duplicates = 0
    for n, line in iter_lines(path):
        fields = c_fields(line)
        if not fields:
            continue
        if stratified and len(fields) != 5:
            raise CmrkitError(
                f"expected 5 fields 'qid iter docno stratum rel' (sample_eval qrels, as on the "
                f"first line), found {len(fields)}",
                path=path,
                where=f"line {n}",
            )
        if not stratified and len(fields) != 4:
            raise CmrkitError(
                f"expected 4 fields 'qid iter docno rel', found {len(fields)}",
                path=path,
                where=f"line {n}",
            )
        qid, docno, rel_text = fields[0], fields[2], fields[-1]
        stratum = fields[3] if stratified else ""
        rel = parse_relevance(rel_text, path, n)
        docs = qrels.setdefault(qid, {})
        if docno in docs:
            if stratified and (docs[docno] != rel or strata[qid][docno] != stratum):
                raise CmrkitError(
                    f"query {qid} document {docno} is listed on line {seen_line[(qid, docno)]} "
                    f"with stratum {strata[qid][docno]} and rel {docs[docno]}, and here with "
                    f"stratum {stratum} and rel {rel}; keep one line",
                    path=path,
                    where=f"line {n}",
                )
            if docs[docno] != rel:
                raise CmrkitError(
                    f"query {qid} document {docno} judged {docs[docno]} on line "
                    f"{seen_line[(qid, docno)]} and {rel} here; keep one judgment",
                    path=path,
                    where=f"line {n}",
                )
            duplicates += 1
            continue
        docs[docno] = rel
        if stratified:
            strata.setdefault(qid, {})[docno] = stratum
        seen_line[(qid, docno)] = n
    if duplicates:
        warnings.warn(
            f"{path}: {duplicates} identical duplicate judgment line(s) ignored", stacklevel=3
        )
    return qrels, strata


def write_sampled_qrels(
    out: IO[str], qrels: Mapping[str, Mapping[str, int]], strata: Strata
) -> None:
    """Write sample_eval's qrels lines ``qid 0 docno stratum rel`` in the given order."""
    for qid, docs in qrels.items():
        for docno, rel in docs.items():
            out.write(f"{qid} 0 {docno} {strata[qid][docno]} {rel}\n")


def read_run_rows(path: str | os.PathLike) -> Iterable[tuple[int, RunRow]]:
    """(line number, row) for every line of a run file, validated."""
    for n, line in iter_lines(path):
        fields = c_fields(line)
        if not fields or fields[0][:1] == "#":  # blank, or a comment (as trec_eval 10.0)
            continue
        if len(fields) != 6:
            raise CmrkitError(
                f"expected 6 fields 'qid Q0 docno rank score tag', found {len(fields)}",
                path=path,
                where=f"line {n}",
            )
        qid, _, docno, rank_text, score_text, tag = fields
        score = parse_score(score_text, path, n)
        try:
            rank = int(rank_text)
        except ValueError:
            raise CmrkitError(
                f"rank {rank_text!r} is not an integer", path=path, where=f"line {n}"
            ) from None
        yield n, RunRow(qid, docno, rank, score, tag)


def read_run(path: str | os.PathLike, *, dedupe: bool = False) -> Run:
    """Read a run as {qid: {docno: score}}.

    A repeated (qid, docno) is an error naming both lines, unless ``dedupe``, which keeps the
    best score.
    """
    raw = _run_bytes(path)
    with _no_gc():
        fast = _read_run_columns_fast(raw) if raw is not None else None
        if fast is not None:
            return fast.to_run()
    run: Run = {}
    first_line: dict[tuple[str, str], int] = {}
    for n, row in read_run_rows(path):
        docs = run.setdefault(row.qid, {})
        if row.docno in docs:
            if not dedupe:
                raise CmrkitError(
                    f"query {row.qid} retrieves {row.docno} twice (first on line "
                    f"{first_line[(row.qid, row.docno)]}); pass --dedupe to keep the best score",
                    path=path,
                    where=f"line {n}",
                )
            docs[row.docno] = max(docs[row.docno], row.score)
            continue
        docs[row.docno] = row.score
        first_line[(row.qid, row.docno)] = n
    if not run:
        raise CmrkitError("the run file is empty", path=path)
    return run


def natural_key(text: str) -> tuple:
    """Sort key that orders ``q2`` before ``q10`` (query ids, pools, labels in natural order)."""
    return tuple((0, int(t)) if t.isdigit() else (1, t) for t in re.split(r"(\d+)", text) if t)


def ranked(docs: Mapping[str, float]) -> list[tuple[str, float]]:
    """trec_eval's order: score descending, ties broken by docno descending.

    trec_eval keeps scores as single-precision floats, so scores equal in float32 (e.g.
    1.00000001 and 1.00000002) tie and fall back to the docno order; so do they here.
    """
    items = list(docs.items())
    single = array("f", [score for _, score in items]).tolist()
    order = sorted(range(len(items)), key=lambda i: (single[i], items[i][0]), reverse=True)
    return [items[i] for i in order]


def format_score(score: float) -> str:
    return f"{score:.6f}"


def write_run(out: IO[str], run: Mapping[str, Iterable[tuple[str, float]]], tag: str) -> None:
    """Write ranked lists (already in order) as TREC run lines, ranks from 1."""
    if any(c.isspace() for c in tag) or not tag:
        raise CmrkitError(f"run tag {tag!r} must be one non-empty word without spaces")
    for qid, docs in run.items():
        # one write a query; the score as format_score writes it
        out.write(
            "".join(
                f"{qid} Q0 {docno} {rank} {score:.6f} {tag}\n"
                for rank, (docno, score) in enumerate(docs, 1)
            )
        )


def write_qrels(
    out: IO[str], qrels: Mapping[str, Mapping[str, int]], iter_field: str = "0"
) -> None:
    """Write qrels lines ``qid iter docno rel`` in the given order."""
    for qid, docs in qrels.items():
        for docno, rel in docs.items():
            out.write(f"{qid} {iter_field} {docno} {rel}\n")


def read_topics_tsv(path: str | os.PathLike) -> dict[str, str]:
    """Pyserini topics: ``qid<TAB>query text`` per line."""
    topics: dict[str, str] = {}
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        if "\t" not in line:
            raise CmrkitError("expected 'qid<TAB>text'", path=path, where=f"line {n}")
        qid, text = line.split("\t", 1)
        if qid in topics:
            raise CmrkitError(f"query id {qid} appears twice", path=path, where=f"line {n}")
        topics[qid] = text
    return topics


def write_topics_tsv(out: IO[str], topics: Iterable[tuple[str, str]]) -> None:
    for qid, text in topics:
        clean = " ".join(text.split())
        out.write(f"{qid}\t{clean}\n")


# --- the compiled reader (cmrkit/_trecread.c) -----------------------------------------------

PURE_PYTHON = "CMRKIT_PURE_PYTHON"  # set to 1: read with numpy only, as without a compiler
_MODULE: list = []  # [cmrkit._trecread or None], imported on first use


def extension():
    """``cmrkit._trecread``, the compiled reader, where ``pip install`` built it; else None."""
    if not _MODULE:
        import importlib

        try:
            # importlib, not an import statement: the import-cycles check cannot see that a
            # compiled module imports nothing, and would count an import of the package's face
            module = importlib.import_module("cmrkit._trecread")
        except ImportError:
            module = None
        _MODULE.append(module if module is None or _built_from_source(module) else None)
    return _MODULE[0]


def _built_from_source(module) -> bool:
    """Whether the compiled reader was built from the ``_trecread.c`` beside this file (where
    there is one: a source checkout). A build from an older source (an editable install after
    a `git pull`, which does not rebuild it) is not used: a note says how to rebuild it."""
    import hashlib

    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_trecread.c")
    try:
        with open(source, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
    except OSError:  # an installed wheel ships the module without its source
        return True
    if getattr(module, "SOURCE_SHA256", None) == digest:
        return True
    import logging

    logging.getLogger("cmrkit").warning(
        f"{module.__file__} was built from another version of {source}: reading with numpy "
        "instead (the same results, slower); rebuild it with `pip install -e .` in the checkout"
    )
    return False


def compiled():
    """The compiled reader to read files with, or None where it was not built or
    ``$CMRKIT_PURE_PYTHON`` is set: the numpy readers then read the same files to the same
    values, more slowly. Either way, an irregular file is read line by line."""
    if os.environ.get(PURE_PYTHON, "") not in ("", "0"):
        return None
    return extension()


@dataclass
class Spans:
    """Where a column's values lie in a file's bytes: value ``i`` is
    ``raw[begins[i]:ends[i]]`` (numpy int64 offsets)."""

    raw: bytes
    begins: object
    ends: object

    def texts(self, rows=None, *, as_str: bool = False) -> list:
        """The values (of ``rows``, an int64 array; None: all) as bytes, or str."""
        return extension().docnos(self.raw, self.begins, self.ends, rows, as_str)


class Docnos(Sequence):
    """A run's docnos (of ``rows``; None: all) as ASCII bytes, made on first use: the compiled
    ranking and qrels join read them in the file's bytes, so scoring never makes them."""

    __slots__ = ("spans", "rows", "_made")

    def __init__(self, spans: Spans, rows=None) -> None:
        self.spans = spans
        self.rows = rows
        self._made: list[bytes] | None = None

    def _list(self) -> list[bytes]:
        if self._made is None:
            self._made = self.spans.texts(self.rows)
        return self._made

    def __len__(self) -> int:
        return len(self.spans.begins if self.rows is None else self.rows)

    def __getitem__(self, i):
        return self._list()[i]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._list())

    def __eq__(self, other: object) -> bool:
        return list(self) == (list(other) if isinstance(other, Docnos) else other)

    __hash__ = None  # type: ignore[assignment]


class QrelsColumns(Mapping):
    """Regular qrels read by the compiled reader: {qid: {docno: rel}} whose per-query dicts are
    made on first use (docnos as str, or ASCII bytes with ``byte_docnos``), and the columns
    the scoring reads in bulk: query ``qids[k]`` owns rows ``starts[k]:starts[k + 1]`` of
    ``grades`` (int64) and ``spans`` (its docnos), in file order. Read-only."""

    def __init__(self, qids: list[str], starts, grades, spans: Spans, byte_docnos: bool) -> None:
        self.qids = qids
        self.starts = starts
        self.grades = grades
        self.spans = spans
        self.byte_docnos = byte_docnos
        self.index = {q: k for k, q in enumerate(qids)}
        self._made: dict[str, dict] = {}
        self._bounds = starts.tolist()

    def __getitem__(self, qid: str) -> dict:
        made = self._made.get(qid)
        if made is None:
            k = self.index[qid]
            s = self.spans
            made = self._made[qid] = extension().judgments(
                s.raw,
                s.begins,
                s.ends,
                self.grades,
                self._bounds[k],
                self._bounds[k + 1],
                not self.byte_docnos,
            )
        return made

    def __iter__(self) -> Iterator[str]:
        return iter(self.qids)

    def __len__(self) -> int:
        return len(self.qids)

    def __contains__(self, qid: object) -> bool:
        return qid in self.index

    def judged(self, qids: list[str]) -> tuple[object, object, object]:
        """(the grades of ``qids`` one query after the other, each query's first index, each
        query's count), numpy int64 arrays."""
        import numpy as np

        ks = np.asarray([self.index[q] for q in qids], dtype=np.int64)
        sizes = self.starts[ks + 1] - self.starts[ks]
        firsts = np.cumsum(sizes) - sizes
        if np.array_equal(ks, np.arange(len(self.qids))):
            return self.grades, firsts, sizes
        rows = np.arange(int(sizes.sum())) + np.repeat(self.starts[ks] - firsts, sizes)
        return self.grades[rows], firsts, sizes


def _arrays(qids, starts, values, begins, ends, dtype, raw: bytes):
    import numpy as np

    starts = np.frombuffer(starts, dtype=np.int64)
    spans = Spans(raw, np.frombuffer(begins, np.int64), np.frombuffer(ends, np.int64))
    return qids, starts, np.frombuffer(values, dtype=dtype), spans


def _compiled_run(module, raw: bytes) -> RunColumns | None:
    got = module.run(raw)
    if got is None:
        return None
    import numpy as np

    qids, starts, scores, spans = _arrays(*got, np.float64, raw)
    return RunColumns(qids, starts, Docnos(spans), scores, spans)


def _compiled_qrels(module, raw: bytes, byte_docnos: bool) -> QrelsColumns | None:
    got = module.qrels(raw)
    if got is None:
        return None
    import numpy as np

    qids, starts, grades, spans = _arrays(*got, np.int64, raw)
    return QrelsColumns(qids, starts, grades, spans, byte_docnos)


# --- columnar runs (the scoring path) -------------------------------------------------------


@dataclass
class RunColumns:
    """A run as parallel columns, each query's lines contiguous: query ``i`` is ``qids[i]`` and
    owns rows ``starts[i]:starts[i + 1]`` of ``docnos`` (str, or ASCII bytes when read from a
    regular file) and ``scores`` (a float64 numpy array). Row order within a query is the file's."""

    qids: list[str]
    starts: object  # numpy int64 array, len(qids) + 1
    docnos: Sequence  # a list, or the compiled reader's Docnos (made on first use)
    scores: object  # numpy float64 array
    spans: Spans | None = None  # the docnos in the file's bytes (the compiled reader's)

    def to_run(self) -> Run:
        """The same run as {qid: {docno: score}}."""
        docnos = self.docnos
        if self.spans is not None:
            docnos = self.spans.texts(as_str=True)
        elif docnos and isinstance(docnos[0], bytes):
            docnos = list(map(bytes.decode, docnos))
        scores = self.scores.tolist()
        bounds = self.starts.tolist()
        return {
            qid: dict(zip(docnos[a:b], scores[a:b], strict=True))
            for qid, a, b in zip(self.qids, bounds, bounds[1:], strict=False)
        }


def run_columns(run: Mapping[str, Mapping[str, float]]) -> RunColumns:
    """A {qid: {docno: score}} run as :class:`RunColumns` (str docnos)."""
    import itertools

    import numpy as np

    sizes = [len(docs) for docs in run.values()]
    starts = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    total = int(starts[-1])
    docnos = list(itertools.chain.from_iterable(run.values()))
    scores = np.fromiter(
        itertools.chain.from_iterable(docs.values() for docs in run.values()),
        dtype=np.float64,
        count=total,
    )
    return RunColumns(list(run), starts, docnos, scores)


_MAX_FIELD = 64  # wider fields are cut from the bytes one by one (fixed-width matrices would grow)
_POW10 = [10.0**i for i in range(23)]  # exact in binary64


@dataclass
class _Fields:
    """Where each field of every line of a regular file lies: field ``k`` of line ``i`` is
    ``raw[begins[k][i]:ends[k][i]]`` (numpy int64 offsets, made for the fields asked for;
    ``buf`` is ``raw`` as uint8, ``seps`` the separators, a row per line)."""

    raw: bytes
    buf: object
    lines: int
    seps: object
    _where: dict = field(default_factory=dict)

    def _bounds(self, k: int) -> tuple[object, object, int]:
        got = self._where.get(k)
        if got is None:
            import numpy as np

            end = self.seps[:, k]
            if k:
                begin = self.seps[:, k - 1] + 1
            else:
                begin = np.empty(self.lines, dtype=np.int64)
                begin[0] = 0
                begin[1:] = self.seps[:-1, -1] + 1
            got = self._where[k] = (begin, end, int((end - begin).max()))
        return got

    @property
    def begins(self) -> _Lazy:
        return _Lazy(lambda k: self._bounds(k)[0])

    @property
    def ends(self) -> _Lazy:
        return _Lazy(lambda k: self._bounds(k)[1])

    @property
    def widths(self) -> _Lazy:
        """The widest of each field."""
        return _Lazy(lambda k: self._bounds(k)[2])

    def columns(self, k: int):
        """Field ``k`` of every line, left-aligned, zero-padded to its widest, by columns:
        ``columns(k)[j]`` holds the (j + 1)-th byte of every line's field."""
        return _field_columns(self.buf, self.begins[k], self.ends[k], self.widths[k])

    def packed(self, k: int):
        """Field ``k`` of every line as a numpy fixed-width bytes array (``S`` dtype)."""
        import numpy as np

        w = self.widths[k]
        return np.ascontiguousarray(self.columns(k).T).view(f"S{w}").ravel()

    def texts(self, k: int, rows=None) -> list[bytes]:
        b, e = self.begins[k], self.ends[k]
        if rows is not None:
            b, e = b[rows], e[rows]
        raw = self.raw
        return [raw[i:j] for i, j in zip(b.tolist(), e.tolist(), strict=True)]

    def strings(self, k: int) -> list[str]:
        """Field ``k`` of every line as str (ASCII)."""
        w = self.widths[k]
        if w > _MAX_FIELD:
            return [t.decode("ascii") for t in self.texts(k)]
        return self.packed(k).astype(f"U{w}").tolist()

    def bytes(self, k: int) -> list[bytes]:
        """Field ``k`` of every line as bytes (cheaper than str)."""
        w = self.widths[k]
        if w > _MAX_FIELD:
            return self.texts(k)
        return self.packed(k).tolist()

    def groups(self) -> tuple[list[str], object] | None:
        """(qids, starts): the first field's runs of equal values, when each value's lines are
        together and no line starts with ``#`` (None otherwise: a ``#`` line is a comment in
        trec_eval 10.0 and data in 9.0.8, and the line reader reads it as the version asked
        for; every line starts with its query's qid, so the qids are all there is to check)."""
        import numpy as np

        w = self.widths[0]
        if w > _MAX_FIELD:
            return None
        qs = self.packed(0)
        starts = np.flatnonzero(qs[1:] != qs[:-1]) + 1
        starts = np.concatenate(([0], starts, [self.lines])).astype(np.int64)
        qids = [q.decode("ascii") for q in qs[starts[:-1]].tolist()]
        if len(set(qids)) != len(qids):
            return None  # a query's lines are not together
        if any(q[:1] == "#" for q in qids):
            return None  # a line starting with '#'
        return qids, starts


class _Lazy:
    """``x[k]`` computed by a function on access."""

    def __init__(self, get) -> None:
        self.get = get

    def __getitem__(self, k: int):
        return self.get(k)


def _regular_fields(raw: bytes, width: int) -> _Fields | None:
    """The fields of ``raw`` when it is ASCII and every line holds exactly ``width`` fields
    split by single spaces: no tab, CR or other control byte, no repeated or edge space, no
    blank line. None for anything less regular: the caller then reads line by line, which
    reports the exact line of a problem."""
    import numpy as np

    if not raw or not raw.isascii():
        return None
    if raw[-1:] != b"\n":
        raw += b"\n"
    buf = np.frombuffer(raw, dtype=np.uint8)
    seps = np.flatnonzero(buf <= 32)  # every separator and control byte
    lines = len(seps) // width
    if len(seps) != lines * width:
        return None
    kinds = buf[seps].reshape(lines, width)
    if not ((kinds[:, :-1] == 32).all() and (kinds[:, -1] == 10).all()):
        return None
    if seps[0] == 0 or int(np.diff(seps).min(initial=2)) < 2:
        return None  # an empty field: a line starting with a separator, or two in a row
    return _Fields(raw, buf, lines, seps.reshape(lines, width))


def _field_columns(buf, begin, end, width: int):
    """The bytes of one field of every line, left-aligned and zero-padded to ``width``, as
    ``width`` rows: row j holds byte j of every line's field (0 past its end)."""
    import numpy as np

    n = len(begin)
    size = end - begin
    last = len(buf) - 1
    out = np.empty((width, n), dtype=np.uint8)
    idx = begin.copy()
    clip = n > 0 and int(begin.max()) + width - 1 > last
    for j in range(width):
        if j:
            idx += 1
        if clip:  # past the end of the buffer: masked below anyway
            np.minimum(idx, last, out=idx)
        np.take(buf, idx, out=out[j])
        np.multiply(out[j], size > j, out=out[j])
    return out


def _parse_scores(mat, tokens_at) -> object | None:
    """float64 scores of zero-padded score columns (see :func:`_field_columns`), rounded as
    strtod/float() rounds them.

    Plain decimals of at most 15 digits are exact integers divided by an exact power of ten,
    so one IEEE division gives the correctly rounded value; anything else is parsed by
    float() one by one (``tokens_at(rows)`` gives their texts). None when a score is not a
    finite number trec_eval and cmrkit read alike.
    """
    import numpy as np

    width, n = mat.shape
    mant = np.zeros(n, dtype=np.int64)
    frac = np.zeros(n, dtype=np.int64)
    digits = np.zeros(n, dtype=np.int64)
    dots = np.zeros(n, dtype=np.int64)
    seen_dot = np.zeros(n, dtype=bool)
    odd = np.zeros(n, dtype=bool)
    neg = mat[0] == 45
    for j in range(width):
        c = mat[j]
        d = c - np.uint8(48)  # a digit's value; 208.. for '\0', '-', '.' (wrapped)
        is_digit = d < 10
        is_dot = c == 46
        other = ~(is_digit | is_dot | (c == 0))
        if j == 0:
            other &= ~neg
        odd |= other
        np.multiply(mant, 10, out=mant, where=is_digit)
        np.add(mant, d, out=mant, where=is_digit, casting="unsafe")
        digits += is_digit
        frac += is_digit & seen_dot
        dots += is_dot
        seen_dot |= is_dot
    odd |= (dots > 1) | (digits == 0) | (digits > 15)
    pow10 = np.asarray(_POW10)[np.minimum(frac, 22)]
    scores = mant.astype(np.float64) / pow10
    np.negative(scores, out=scores, where=neg)
    rows = np.flatnonzero(odd)
    if len(rows):
        texts = tokens_at(rows)
        # float() accepts "1_0" (trec_eval's atof reads 1): such a score goes the strict way
        if any(b"_" in t for t in texts):
            return None
        try:
            values = [float(t) for t in texts]
        except ValueError:
            return None
        if not all(map(math.isfinite, values)):
            return None
        scores[rows] = values
    return scores


def _parse_grades(mat) -> object | None:
    """int64 grades of zero-padded columns of whole numbers as :func:`parse_relevance` reads
    them (``[+-]?[0-9]+`` with an optional ``.0*``, at most 15 digits); None when one is
    written otherwise (the line reader then reads or refuses it)."""
    import numpy as np

    width, n = mat.shape
    value = np.zeros(n, dtype=np.int64)
    digits = np.zeros(n, dtype=np.int64)
    seen_dot = np.zeros(n, dtype=bool)
    odd = np.zeros(n, dtype=bool)
    first = mat[0]
    signed = (first == 45) | (first == 43)
    for j in range(width):
        c = mat[j]
        is_digit = (c >= 48) & (c <= 57)
        is_dot = c == 46
        allowed = is_digit | is_dot | (c == 0)
        if j == 0:
            allowed |= signed
        odd |= ~allowed | (is_dot & seen_dot) | (seen_dot & is_digit & (c != 48))
        whole = is_digit & ~seen_dot
        value = np.where(whole, value * 10 + (c.astype(np.int64) - 48), value)
        digits += whole
        seen_dot |= is_dot
    if odd.any() or int(digits.min(initial=1)) == 0 or int(digits.max(initial=0)) > 15:
        return None
    return np.where(first == 45, -value, value)


def _read_qrels_fast(raw: bytes, byte_docnos: bool = False, columns: bool = False) -> Qrels | None:
    """The common qrels file (4 single-space columns, whole grades, each query's lines together,
    one judgment per document) in bulk, by the compiled reader or with numpy; None for anything
    else. ``byte_docnos``: the docnos as ASCII bytes (cheaper; for matching a run read in bulk).
    ``columns``: the compiled reader's :class:`QrelsColumns` as it is (else plain dicts)."""
    module = compiled()
    if module is not None:
        got = _compiled_qrels(module, raw, byte_docnos)
        if got is None or columns:
            return got
        return {q: got[q] for q in got.qids}
    fields = _regular_fields(raw, 4)
    if fields is None or fields.widths[3] > _MAX_FIELD:
        return None
    rels = _parse_grades(fields.columns(3))
    if rels is None:
        return None
    groups = fields.groups()
    if groups is None:
        return None
    qids, starts = groups
    docnos = fields.bytes(2) if byte_docnos else fields.strings(2)
    rels = rels.tolist()
    bounds = starts.tolist()
    out: Qrels = {}
    for qid, a, b in zip(qids, bounds, bounds[1:], strict=False):
        docs = dict(zip(docnos[a:b], rels[a:b], strict=True))
        if len(docs) != b - a:
            return None  # a repeated judgment: the line reader warns or names the lines
        out[qid] = docs
    return out


def _read_run_columns_fast(raw: bytes) -> RunColumns | None:
    """Columns of a regular run (single-space columns, numeric ranks, each query's lines
    together, no repeated document) parsed in bulk, by the compiled reader or with numpy; None
    for anything else."""
    module = compiled()
    if module is not None:
        return _compiled_run(module, raw)
    fields = _regular_fields(raw, 6)
    if fields is None or max(fields.widths[3], fields.widths[4]) > _MAX_FIELD:
        return None
    rank = fields.columns(3)
    if not (((rank >= 48) & (rank <= 57)) | (rank == 0)).all():
        return None
    scores = _parse_scores(fields.columns(4), lambda rows: fields.texts(4, rows))
    if scores is None:
        return None
    groups = fields.groups()
    if groups is None:
        return None
    qids, starts = groups
    docnos = fields.bytes(2)
    bounds = starts.tolist()
    for a, b in zip(bounds, bounds[1:], strict=False):
        if len(set(docnos[a:b])) != b - a:
            return None  # a repeated document: the strict reader names the lines
    return RunColumns(qids, starts, docnos, scores)


def run_columns_from_bytes(raw: bytes) -> RunColumns | None:
    """A regular run's bytes as columns in bulk (see :func:`read_run_columns`); None when the
    file is less regular (the caller then reads it line by line)."""
    with _no_gc():
        return _read_run_columns_fast(raw)


def qrels_from_bytes(
    raw: bytes, *, byte_docnos: bool = False, columns: bool = False
) -> Qrels | None:
    """A regular 4-column qrels file's bytes in bulk; None when it is less regular.
    ``byte_docnos``: the docnos as ASCII bytes, as :class:`RunColumns` read in bulk has them.
    ``columns``: see :func:`read_qrels`."""
    with _no_gc():
        return _read_qrels_fast(raw, byte_docnos, columns)


def read_run_columns(path: str | os.PathLike, *, dedupe: bool = False) -> RunColumns:
    """:func:`read_run` as :class:`RunColumns`; the same checks and errors."""
    raw = _run_bytes(path)
    if raw is not None:
        with _no_gc():
            fast = _read_run_columns_fast(raw)
        if fast is not None:
            return fast
    return run_columns(read_run(path, dedupe=dedupe))
