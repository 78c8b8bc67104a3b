"""TREC runs, qrels and topics: the one place these formats are read and written.

Runs: ``qid Q0 docno rank score tag`` (whitespace separated). Like trec_eval, readers keep the
score and ignore the rank column; ranking is by score descending, ties broken by docno
descending (see :func:`ranked`).

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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
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


_WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.0*)?")


def parse_relevance(text: str, path: object, line: int) -> int:
    """A relevance value written as an int or a whole float (``1``, ``1.0``, ``-1.0``) -> int.

    trec_eval reads the relevance with C ``atol``, which silently truncates ``0.5`` to 0 and
    ``1e2`` to 1; such values are refused here instead of being scored differently than meant.
    """
    if _WHOLE_NUMBER.fullmatch(text):
        return int(float(text))
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value):
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


# Every byte but the ASCII whitespace str.split() splits on: deleting these leaves the separators.
_NOT_SPACE = bytes(c for c in range(256) if c not in b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f")


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


def _regular_lines(raw: bytes, width: int) -> bytes | None:
    """``raw`` ending in a newline when it is ASCII and every line holds ``width`` fields split
    by single spaces (no tabs, CR, repeated or edge spaces, blank lines); else None."""
    if not raw or not raw.isascii():
        return None
    if b"  " in raw or b"\n " in raw or b" \n" in raw or raw[:1] == b" ":
        return None
    if raw[-1:] != b"\n":
        raw += b"\n"
    if raw.translate(None, _NOT_SPACE) != (b" " * (width - 1) + b"\n") * raw.count(b"\n"):
        return None
    return raw


def _regular_columns(raw: bytes, width: int) -> list[bytes] | None:
    """The fields, when every line holds exactly ``width`` fields split by single spaces.

    Returns None for anything less regular (tabs, CR, repeated or edge spaces, blank lines,
    non-ASCII, a short or long line): the caller then parses line by line, which reports the
    exact line of a problem. (Splitting bytes is about twice as fast as splitting str.)
    """
    regular = _regular_lines(raw, width)
    if regular is None:
        return None
    lines = regular.count(b"\n")
    tokens = regular.split()
    if len(tokens) != width * lines:
        return None
    return tokens


def _groups(qids: list[bytes]) -> list[tuple[str, int, int]] | None:
    """(qid, start, end) slices when each qid's lines are contiguous, else None."""
    order = list(dict.fromkeys(qids))
    out = []
    start = 0
    for i, qid in enumerate(order):
        end = qids.index(order[i + 1], start) if i + 1 < len(order) else len(qids)
        if qids[start:end].count(qid) != end - start:
            return None
        out.append((qid.decode("ascii"), start, end))
        start = end
    return out


def _by_query(tokens: list[bytes], width: int, values: list) -> dict[str, dict] | None:
    """{qid: {docno: value}} from the whitespace tokens of a regular file with ``width``
    columns (qid first, docno third); None when a query's lines are not together or a docno
    repeats within a query, for the line-by-line reader to report."""
    groups = _groups(tokens[0::width])
    if groups is None:
        return None
    docnos = list(map(bytes.decode, tokens[2::width]))
    out: dict[str, dict] = {}
    for qid, a, b in groups:
        docs = dict(zip(docnos[a:b], values[a:b], strict=True))
        if len(docs) != b - a:
            return None
        out[qid] = docs
    return out


def _read_qrels_fast(raw: bytes) -> Qrels | None:
    """The common case (integer grades, one judgment per (qid, docno)) in bulk; else None."""
    tokens = _regular_columns(raw, 4)
    if tokens is None:
        return None
    rel_texts = tokens[3::4]
    if b"_" in b"".join(rel_texts):
        return None
    try:
        rels = list(map(int, rel_texts))
    except ValueError:
        return None
    return _by_query(tokens, 4, rels)


def read_qrels(path: str | os.PathLike) -> Qrels:
    """Read a qrels file; identical duplicate lines warn, conflicting ones are an error."""
    raw = _raw_bytes(path)
    with _no_gc():
        fast = _read_qrels_fast(raw) if raw is not None else None
    if fast is not None:
        return fast
    qrels, _ = _read_qrels_lines(path, stratified=False)
    if not qrels:
        raise CmrkitError("no judgments in the qrels file", path=path)
    return qrels


def _first_fields(path: str | os.PathLike) -> int:
    """Number of fields on the first non-blank line (0 for an empty file)."""
    for _, line in iter_lines(path):
        fields = line.split()
        if fields:
            return len(fields)
    return 0


def read_qrels_with_strata(path: str | os.PathLike) -> tuple[Qrels, Strata | None]:
    """A qrels file and, for sample_eval's five-column qrels ``qid iter docno stratum rel``, the
    stratum of each document (None for ordinary four-column qrels)."""
    if _first_fields(path) != 5:
        return read_qrels(path), None
    return _read_qrels_lines(path, stratified=True)


def _read_qrels_lines(path: str | os.PathLike, *, stratified: bool) -> tuple[Qrels, Strata]:
    """Qrels (and, ``stratified``, sample_eval's strata) line by line, every line checked;
    identical duplicate lines warn, conflicting ones are an error."""
    qrels: Qrels = {}
    strata: Strata = {}
    seen_line: dict[tuple[str, str], int] = {}
    duplicates = 0
    for n, line in iter_lines(path):
        fields = line.split()
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
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 6:
            raise CmrkitError(
                f"expected 6 fields 'qid Q0 docno rank score tag', found {len(fields)}",
                path=path,
                where=f"line {n}",
            )
        qid, _, docno, rank_text, score_text, tag = fields
        try:
            if "_" in score_text:
                raise ValueError(score_text)
            score = float(score_text)
        except ValueError:
            raise CmrkitError(
                f"score {score_text!r} is not a number", path=path, where=f"line {n}"
            ) from None
        if not math.isfinite(score):
            raise CmrkitError(f"score {score_text!r} is not finite", path=path, where=f"line {n}")
        try:
            rank = int(rank_text)
        except ValueError:
            raise CmrkitError(
                f"rank {rank_text!r} is not an integer", path=path, where=f"line {n}"
            ) from None
        yield n, RunRow(qid, docno, rank, score, tag)


def _read_run_fast(raw: bytes) -> Run | None:
    """The common case (single-space columns, numeric ranks, no duplicates) in bulk; else None."""
    tokens = _regular_columns(raw, 6)
    if tokens is None:
        return None
    if not all(map(bytes.isdigit, tokens[3::6])):
        return None
    score_texts = tokens[4::6]
    # float() accepts "1_0" (trec_eval's atof reads 1): such a score goes the strict way
    if b"_" in raw and b"_" in b"".join(score_texts):
        return None
    try:
        scores = list(map(float, score_texts))
    except ValueError:
        return None
    if not all(map(math.isfinite, scores)):
        return None
    return _by_query(tokens, 6, scores)


def read_run(path: str | os.PathLike, *, dedupe: bool = False) -> Run:
    """Read a run as {qid: {docno: score}}.

    A repeated (qid, docno) is an error naming both lines, unless ``dedupe``, which keeps the
    best score.
    """
    raw = _raw_bytes(path)
    with _no_gc():
        fast = _read_run_fast(raw) if raw is not None else None
    if fast is not None:
        return fast
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


# --- columnar runs (the scoring path) -------------------------------------------------------


@dataclass
class RunColumns:
    """A run as parallel columns, each query's lines contiguous: query ``i`` is ``qids[i]`` and
    owns rows ``starts[i]:starts[i + 1]`` of ``docnos`` (str, or ASCII bytes when read from a
    regular file) and ``scores`` (a float64 numpy array). Row order within a query is the file's."""

    qids: list[str]
    starts: object  # numpy int64 array, len(qids) + 1
    docnos: list
    scores: object  # numpy float64 array

    def to_run(self) -> Run:
        """The same run as {qid: {docno: score}}."""
        docnos = self.docnos
        if docnos and isinstance(docnos[0], bytes):
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


_MAX_FIELD = 64  # wider fields go the dict way (the fixed-width matrices would grow too large)
_POW10 = [10.0**i for i in range(23)]  # exact in binary64


def _field_matrix(buf, begin, end, width: int):
    """The bytes of one field of every line, left-aligned, zero-padded to ``width`` columns."""
    import numpy as np

    n = len(begin)
    mat = np.zeros((n, width), dtype=np.uint8)
    last = len(buf) - 1
    for j in range(width):
        idx = begin + j
        inside = idx < end
        np.minimum(idx, last, out=idx)
        mat[:, j] = np.where(inside, buf[idx], 0)
    return mat


def _parse_scores(mat, tokens_at) -> object | None:
    """float64 scores of a zero-padded score matrix, rounded as strtod/float() rounds them.

    Plain decimals of at most 15 digits are exact integers divided by an exact power of ten,
    so one IEEE division gives the correctly rounded value; anything else is parsed by
    float() one by one (``tokens_at(rows)`` gives their texts). None when a score is not a
    finite number trec_eval and cmrkit read alike.
    """
    import numpy as np

    n, width = mat.shape
    mant = np.zeros(n, dtype=np.int64)
    frac = np.zeros(n, dtype=np.int64)
    digits = np.zeros(n, dtype=np.int64)
    dots = np.zeros(n, dtype=np.int64)
    seen_dot = np.zeros(n, dtype=bool)
    odd = np.zeros(n, dtype=bool)
    neg = mat[:, 0] == 45
    for j in range(width):
        c = mat[:, j]
        is_digit = (c >= 48) & (c <= 57)
        is_dot = c == 46
        other = ~is_digit & ~is_dot & (c != 0)
        if j == 0:
            other &= ~neg
        odd |= other
        mant = np.where(is_digit, mant * 10 + (c.astype(np.int64) - 48), mant)
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


def _read_run_columns_fast(raw: bytes) -> RunColumns | None:
    """Columns of a regular run (single-space columns, numeric ranks, each query's lines
    together, no repeated document) parsed in bulk with numpy; None for anything else."""
    if b"\x00" in raw:
        return None
    regular = _regular_lines(raw, 6)
    if regular is None:
        return None
    raw = regular
    lines = raw.count(b"\n")
    import numpy as np

    buf = np.frombuffer(raw, dtype=np.uint8)
    seps = np.flatnonzero((buf == 32) | (buf == 10)).reshape(lines, 6)
    line_begin = np.empty(lines, dtype=np.int64)
    line_begin[0] = 0
    line_begin[1:] = seps[:-1, 5] + 1
    begins = [line_begin, seps[:, 0] + 1, seps[:, 1] + 1, seps[:, 2] + 1, seps[:, 3] + 1]
    ends = [seps[:, 0], seps[:, 1], seps[:, 2], seps[:, 3], seps[:, 4]]
    widths = [int((e - b).max()) for b, e in zip(begins, ends, strict=True)]
    if max(widths[0], widths[2], widths[3], widths[4]) > _MAX_FIELD:
        return None
    rank = _field_matrix(buf, begins[3], ends[3], widths[3])
    if not (((rank >= 48) & (rank <= 57)) | (rank == 0)).all():
        return None

    def tokens_at(rows):
        return [
            raw[b:e] for b, e in zip(begins[4][rows].tolist(), ends[4][rows].tolist(), strict=True)
        ]

    scores = _parse_scores(_field_matrix(buf, begins[4], ends[4], widths[4]), tokens_at)
    if scores is None:
        return None
    qmat = _field_matrix(buf, begins[0], ends[0], widths[0])
    qs = qmat.view(f"S{widths[0]}").ravel()
    starts = np.flatnonzero(qs[1:] != qs[:-1]) + 1
    starts = np.concatenate(([0], starts, [lines])).astype(np.int64)
    qids = [q.decode("ascii") for q in qs[starts[:-1]].tolist()]
    if len(set(qids)) != len(qids):
        return None  # a query's lines are not together
    dmat = _field_matrix(buf, begins[2], ends[2], widths[2])
    docnos = dmat.view(f"S{widths[2]}").ravel().tolist()
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


def qrels_from_bytes(raw: bytes) -> Qrels | None:
    """A regular 4-column qrels file's bytes in bulk; None when it is less regular."""
    with _no_gc():
        return _read_qrels_fast(raw)


def read_run_columns(path: str | os.PathLike, *, dedupe: bool = False) -> RunColumns:
    """:func:`read_run` as :class:`RunColumns`; the same checks and errors."""
    raw = _raw_bytes(path)
    if raw is not None:
        with _no_gc():
            fast = _read_run_columns_fast(raw)
        if fast is not None:
            return fast
    return run_columns(read_run(path, dedupe=dedupe))
