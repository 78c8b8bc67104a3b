"""trec_eval 9.0.8 and 10.0, computed as the C program computes them.

Every measure of ``-m all_trec``, ``all_prefs`` and ``qrels_jg`` (the definitions are in
``evaluation/measures/trec.py``), the options ``-q -c -l -M -N -n -J -R -Z``, and output
byte-identical to trec_eval's stdout. The code follows trec_eval's C files operation for
operation (same doubles, sums in the same order), so every printed digit agrees.

The differences between the versions (their CHANGELOG, and the sources):

- scores are C floats in 9.0.8 and doubles in 10.0 (ties differ when scores agree only in
  single precision);
- iprec_at_recall and 11pt_avg: cutoff = (long)(x * R + 0.9) in 9.0.8, lround(x * R) in 10.0;
- 10.0 evaluates the qrels queries (a run query without qrels is ignored); with ``-c`` a query
  missing from the run is scored on a one-document dummy ranking and printed with ``-q``;
  9.0.8 evaluates the run queries that have qrels and, with ``-c``, only divides by every
  qrels query. Without ``-c``, 10.0 stops on a qrels query that the run lacks; cmrkit then
  evaluates as 9.0.8 does and says so (see docs/evaluation.md);
- ``#`` comment lines in runs and qrels (10.0; 9.0.8 reads them as data; see ``_lines``), the
  measures rbp, rbp_resid, unj, dcg and ideal_dcg (10.0), non-integer gain names ignored in
  ndcg-style gains (10.0).
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures import trec as defs
from cmrkit.evaluation.trec_bulk import (
    INFAP_EPSILON,
    MIN_GEO_MEAN,
    NONPOOL,
    UNJUDGED,
    check_grades,
)
from cmrkit.evaluation.trec_bulk import block as _block
from cmrkit.evaluation.trec_bulk import c_div as _div
from cmrkit.evaluation.trec_bulk import c_log as _log
from cmrkit.evaluation.trec_bulk import gain_map as _gmap
from cmrkit.evaluation.trec_bulk import gains as _gain_table
from cmrkit.evaluation.trec_bulk import ideal_seq as _ideal_seq
from cmrkit.evaluation.trec_bulk import ideal_walk as _ideal_walk
from cmrkit.evaluation.trec_bulk import levels as _levels
from cmrkit.evaluation.trec_bulk import log2_discounts as _l2
from cmrkit.evaluation.trec_bulk import rbp_persistence as _rbp_p
from cmrkit.evaluation.trec_bulk import values as _bulk_rows
from cmrkit.trec import (
    c_fields,
    parse_relevance,
    parse_score,
    qrels_from_bytes,
    run_columns_from_bytes,
)

MISSING_ZSCORE = -1000000.0
BOGUS_DOCNO = "ceci_nest_pas_un_docno"


# ----------------------------------------------------------------------------- inputs


@dataclass
class Odd:
    """Lines accepted that a strict reader would refuse, counted for one note line."""

    comments: int = 0
    blank: int = 0
    extra_columns: int = 0
    duplicates: int = 0
    hash_data: int = 0  # '#' lines read as data: 9.0.8 (no comments), 10.0 right after one
    version: str = defs.DEFAULT_VERSION
    hint: str | None = field(default=None, repr=False, compare=False)  # of the line read now

    def describe(self, what: str) -> str | None:
        parts = []
        if self.comments:
            parts.append(f"{self.comments:,} '#' comment lines skipped")
        if self.hash_data:
            why = (
                "9.0.8 reads them (it has no comment lines)"
                if self.version == "9"
                else "10.0 reads them (indented in judgments, or right after a comment line)"
            )
            parts.append(
                f"{self.hash_data:,} lines starting with '#' read as data, as trec_eval {why}"
            )
        if self.blank:
            parts.append(f"{self.blank:,} blank lines skipped")
        if self.extra_columns:
            parts.append(f"{self.extra_columns:,} lines with text after the 6th column (ignored)")
        if self.duplicates:
            parts.append(f"{self.duplicates:,} identical duplicate judgments kept once")
        return f"note: {what}: " + "; ".join(parts) if parts else None


@dataclass
class Results:
    """A run as trec_eval reads it: per query, (docno, score) in file order; a regular file
    read in bulk keeps its columns (``cols``) and builds ``queries`` only when asked."""

    _queries: dict[str, list[tuple[str, float]]] | None
    runid: str
    odd: Odd = field(default_factory=Odd)
    cols: object = None  # cmrkit.trec.RunColumns
    single: bool = False  # scores as C floats (9.0.8), applied when ``queries`` is built

    @property
    def queries(self) -> dict[str, list[tuple[str, float]]]:
        if self._queries is None:
            c = self.cols
            bounds = c.starts.tolist()
            docnos = c.docnos
            if docnos and isinstance(docnos[0], bytes):
                docnos = [d.decode() for d in docnos]
            scores = c.scores.tolist()
            if self.single:
                scores = array("f", scores).tolist()
            self._queries = {
                q: list(zip(docnos[a:b], scores[a:b], strict=True))
                for q, a, b in zip(c.qids, bounds, bounds[1:], strict=False)
            }
        return self._queries

    @queries.setter
    def queries(self, value: dict[str, list[tuple[str, float]]]) -> None:
        self._queries = value
        self.cols = None

    @property
    def qids(self) -> list[str]:
        return list(self.cols.qids) if self._queries is None else list(self._queries)


def _read_bytes(path: str | os.PathLike) -> bytes:
    if str(path) == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        if data[:2] == b"\x1f\x8b":
            import gzip

            data = gzip.decompress(data)
        return data
    except FileNotFoundError:
        raise CmrkitError("no such file", path=path) from None
    except IsADirectoryError:
        raise CmrkitError("is a folder, not a file", path=path) from None


_C_SPACE = " \t\v\f\r"  # C isspace() besides the newline


def _lines(
    raw: bytes, path, version: str, odd: Odd, kind: str | None = None
) -> Iterable[tuple[int, list[str]]]:
    """(line number, fields) of each line, comment and blank lines counted and skipped.

    ``#`` lines as trec_eval reads them (``kind``: "run", "rel" for the judgment files, None
    for other files, where a line starting with ``#`` is a comment): 9.0.8 has no comments and
    reads them as data (counted in the note; an error on such a line says why). 10.0 skips a
    run line whose first non-blank character is ``#`` (get_trec_results.c); in the judgment
    files it skips a line whose first character is ``#`` and then reads the next line as data
    whatever it starts with (get_qrels.c and the others: ``ptr = index(ptr, '\n') + 1`` and
    parse), so of two comment lines in a row the second is data.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise CmrkitError(
            f"line {line}: not UTF-8 text; re-encode the file as UTF-8", path=path
        ) from None
    lines = text.split("\n")
    last = len(lines) if text.endswith("\n") else len(lines) + 1  # the empty tail is no line
    odd.version = version
    after_comment = False
    for n, line in enumerate(lines, 1):
        fields = c_fields(line)
        odd.hint = None
        if not fields:
            if n < last:
                odd.blank += 1
            after_comment = False
            continue
        if fields[0][:1] == "#":
            if kind is None or version != "9":
                start = line.lstrip(_C_SPACE) if kind == "run" else line
                if start[:1] == "#" and not after_comment:
                    odd.comments += 1
                    after_comment = kind == "rel"
                    continue
            if kind is not None:
                odd.hash_data += 1
                odd.hint = _hash_hint(version, kind, after_comment)
        after_comment = False
        yield n, fields
    odd.hint = None


def _hash_hint(version: str, kind: str, after_comment: bool) -> str:
    """Why a line starting with '#' is read as data."""
    if version == "9":
        return (
            "trec_eval 9.0.8 has no comment lines: it reads this '#' line as data ('#' comment "
            "lines are read by trec_eval 10.0 only; pass --trec-eval 10 or remove the line)"
        )
    if after_comment:
        return (
            "trec_eval 10.0 reads a '#' line right after a comment line as data (it skips one "
            "line per comment); remove it or join it to the comment line above"
        )
    where = "first non-blank character" if kind == "run" else "first character"
    return (
        f"trec_eval 10.0 skips a '#' line only where '#' is its {where}; it reads this one as data"
    )


@contextlib.contextmanager
def _hinted(odd: Odd) -> Iterator[None]:
    """An error on a '#' line read as data says why the line was read as data."""
    try:
        yield
    except CmrkitError as e:
        if odd.hint is None:
            raise
        raise CmrkitError(f"{e}; {odd.hint}") from None


def read_results(path: str | os.PathLike, version: str = defs.DEFAULT_VERSION) -> Results:
    """A run file (``-`` for stdin): qid Q0 docno rank score tag [ignored...]."""
    odd = Odd()
    with _hinted(odd):
        return _read_results(path, version, odd)


def _read_results(path: str | os.PathLike, version: str, odd: Odd) -> Results:
    raw = _read_bytes(path)
    cols = run_columns_from_bytes(raw) if raw else None
    if cols is not None:  # the common regular file, in bulk
        end = len(raw) - 1 if raw.endswith(b"\n") else len(raw)
        last = raw[raw.rfind(b"\n", 0, end) + 1 : end].split()  # the last line (no copy)
        return Results(None, last[5].decode(), odd, cols, single=version == "9")
    queries: dict[str, list[tuple[str, float]]] = {}
    runid = ""
    lines = 0
    for n, fields in _lines(raw, path, version, odd, "run"):
        if len(fields) < 6:
            raise CmrkitError(
                f"line {n}: expected 6 fields (qid Q0 docno rank score tag), found {len(fields)}",
                path=path,
            )
        if len(fields) > 6:
            odd.extra_columns += 1
        score = parse_score(fields[4], path, n)
        queries.setdefault(fields[0], []).append((fields[2], score))
        runid = fields[5]
        lines += 1
    if not lines:
        raise CmrkitError("the run is empty: no result lines", path=path)
    if version == "9":  # 9.0.8 stores scores as C floats
        for qid, docs in queries.items():
            singles = array("f", [s for _, s in docs]).tolist()
            queries[qid] = [(d, s) for (d, _), s in zip(docs, singles, strict=True)]
    return Results(queries, runid, odd)


@dataclass
class RelInfo:
    """Judgments as trec_eval reads them, per query.

    ``qrels``: {qid: {docno: rel}}; ``jg``: {qid: [ {docno: rel} per judgment group ]};
    ``prefs``: {qid: [(jg, jsg, rel_level, docno)]}.
    """

    format: str
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    jg: dict[str, list[dict[str, int]]] = field(default_factory=dict)
    prefs: dict[str, list[tuple[str, str, float, str]]] = field(default_factory=dict)
    odd: Odd = field(default_factory=Odd)
    byte_docnos: bool = False  # qrels' docnos as ASCII bytes (read in bulk), see as_text

    def as_text(self) -> None:
        """The qrels' docnos as str (where they meet docnos other than a bulk-read run's)."""
        if self.byte_docnos:
            self.qrels = {
                q: dict(zip(map(bytes.decode, d), d.values(), strict=True))
                for q, d in self.qrels.items()
            }
            self.byte_docnos = False

    @property
    def qids(self) -> list[str]:
        data = {"qrels": self.qrels, "qrels_jg": self.jg}.get(self.format, self.prefs)
        return sorted(data, key=_cbytes)


def _cbytes(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def _rel(text: str, path, n: int) -> int:
    """A grade as cmrkit reads them everywhere: whole numbers, also written ``1.0``."""
    return parse_relevance(text, path, n)


def _level(text: str, path, n: int) -> float:
    return parse_score(text, path, n, "rel_level")


def _add_judgment(table: dict[str, int], docno: str, rel: int, path, n: int, odd: Odd,
                  seen: dict) -> None:  # fmt: skip
    old = table.get(docno)
    if old is None:
        table[docno] = rel
        seen[docno] = n
    elif old == rel:
        odd.duplicates += 1
    else:
        raise CmrkitError(
            f"line {n}: document {docno} judged {old} on line {seen[docno]} and {rel} here; "
            "keep one judgment",
            path=path,
        )


def read_rel_info(
    path: str | os.PathLike, rel_format: str = "qrels", version: str = defs.DEFAULT_VERSION
) -> RelInfo:
    """A qrels (``qrels``, ``qrels_prefs``), prefs or qrels_jg file (``-R``)."""
    odd = Odd()
    with _hinted(odd):
        return _read_rel_info(path, rel_format, version, odd)


def _read_rel_info(path: str | os.PathLike, rel_format: str, version: str, odd: Odd) -> RelInfo:
    raw = _read_bytes(path)
    info = RelInfo(rel_format, odd=odd)
    seen: dict[tuple, dict] = {}
    if rel_format == "qrels":
        fast = qrels_from_bytes(raw, byte_docnos=True, columns=True)
        if fast is not None:
            info.qrels = fast
            info.byte_docnos = True
            check_grades(fast, path)
            return info
        for n, fields in _lines(raw, path, version, odd, "rel"):
            if len(fields) != 4:
                _wrong_format(path, n, fields, rel_format, "qid iter docno rel", 4)
            qid, _, docno, rel = fields
            table = info.qrels.setdefault(qid, {})
            _add_judgment(table, docno, _rel(rel, path, n), path, n, odd, seen.setdefault(qid, {}))
        data = info.qrels
    elif rel_format == "qrels_prefs":
        # qrels read as prefs: the iter column is the judgment group, one subgroup "0"
        for n, fields in _lines(raw, path, version, odd, "rel"):
            if len(fields) != 4:
                _wrong_format(path, n, fields, rel_format, "qid iter docno rel", 4)
            qid, jg, docno, rel = fields
            info.prefs.setdefault(qid, []).append((jg, "0", _level(rel, path, n), docno))
        data = info.prefs
    elif rel_format == "prefs":
        for n, fields in _lines(raw, path, version, odd, "rel"):
            if len(fields) != 5:
                _wrong_format(path, n, fields, rel_format, "qid jg jsg docno rel_level", 5)
            qid, jg, jsg, docno, level = fields
            info.prefs.setdefault(qid, []).append((jg, jsg, _level(level, path, n), docno))
        data = info.prefs
    elif rel_format == "qrels_jg":
        groups: dict[str, dict[str, dict[str, int]]] = {}
        for n, fields in _lines(raw, path, version, odd, "rel"):
            if len(fields) != 4:
                _wrong_format(path, n, fields, rel_format, "qid jg docno rel", 4)
            qid, jg, docno, rel = fields
            table = groups.setdefault(qid, {}).setdefault(jg, {})
            _add_judgment(table, docno, _rel(rel, path, n), path, n, odd,
                          seen.setdefault((qid, jg), {}))  # fmt: skip
        for qid, by_jg in groups.items():
            info.jg[qid] = [by_jg[j] for j in sorted(by_jg, key=_cbytes)]
        data = info.jg
    else:
        raise CmrkitError(
            f"-R {rel_format!r}: the judgment formats are qrels, prefs, qrels_prefs and qrels_jg"
        )
    if not data:
        raise CmrkitError("no judgments in the file", path=path)
    if rel_format == "qrels":
        check_grades(info.qrels, path)
    elif rel_format == "qrels_jg":
        for qid, groups in info.jg.items():
            for group in groups:
                check_grades({qid: group}, path)
    return info


def _wrong_format(path, n, fields, rel_format, layout, width) -> None:
    hint = ""
    if rel_format != "prefs" and len(fields) == 6:
        hint = "; it looks like a run: give the run first, then the qrels (cmrkit eval RUN QRELS)"
    elif rel_format != "prefs" and len(fields) == 5:
        hint = "; a prefs file? pass -R prefs"
    elif rel_format == "prefs" and len(fields) == 4:
        hint = "; a qrels file? pass -R qrels_prefs"
    raise CmrkitError(
        f"line {n}: expected {width} fields ({layout}) for -R {rel_format}, found "
        f"{len(fields)}{hint}",
        path=path,
    )


def read_zscores(path: str | os.PathLike) -> dict[str, dict[str, tuple[float, float]]]:
    """``-Z`` file: qid measure mean stddev per line -> {qid: {measure: (mean, stddev)}}."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for n, fields in _lines(_read_bytes(path), path, "10", Odd()):
        if len(fields) != 4:
            raise CmrkitError(
                f"line {n}: expected 4 fields (qid measure mean stddev), found {len(fields)}",
                path=path,
            )
        mean = parse_score(fields[2], path, n, "mean", finite=False)
        std = parse_score(fields[3], path, n, "stddev", finite=False)
        out.setdefault(fields[0], {})[fields[1]] = (mean, std)
    return out


# ----------------------------------------------------------------------------- options


@dataclass
class Options:
    """trec_eval's options (its letters in the comments)."""

    version: str = defs.DEFAULT_VERSION
    query: bool = False  # -q
    complete: bool = False  # -c
    level: int = 1  # -l
    max_docs: int = 2147483647  # -M
    num_docs_in_coll: int = 0  # -N
    summary: bool = True  # not -n
    judged_only: bool = False  # -J
    rel_format: str = "qrels"  # -R
    state: dict = field(default_factory=dict, repr=False)  # C statics kept between queries


# ----------------------------------------------------------------------------- ranking


@dataclass
class ResRels:
    """te_form_res_rels: the ranking's grades and counts for one query."""

    rel_list: list[int]
    num_ret: int
    num_rel_ret: int
    num_nonpool: int
    num_unjudged_in_pool: int
    num_rel: int
    rel_levels: list[int]
    num_rel_levels: int

    def arr(self):
        """The grades as a numpy array (cached)."""
        cache = self.__dict__.setdefault("_cache", {})
        a = cache.get("arr")
        if a is None:
            import numpy as np

            a = cache["arr"] = np.asarray(self.rel_list, dtype=np.int64)
        return a


def _np():
    import numpy as np

    return np


def _ranked(docs: list[tuple[str, float]], opts: Options, prefs: bool = False) -> list[str]:
    """Docnos by score descending, ties by docno descending (ascending for prefs, as
    form_prefs_counts.c sorts), cut at -M."""
    if prefs:
        order = sorted(docs, key=lambda d: _cbytes(d[0]))
        order.sort(key=lambda d: d[1], reverse=True)
    else:
        order = sorted(docs, key=lambda d: (d[1], _cbytes(d[0])), reverse=True)
    return [d for d, _ in order[: opts.max_docs]]


def _check_duplicates(ranked: list[str], qid: str, path) -> None:
    if len(set(ranked)) != len(ranked):
        seen = set()
        for d in ranked:
            if d in seen:
                raise CmrkitError(
                    f"query {qid}: document {d} is retrieved twice; trec_eval refuses such "
                    "runs (cmrkit eval --dedupe keeps the best score)",
                    path=path,
                )
            seen.add(d)


def form_res_rels(
    ranked: list[str] | None, judged: dict[str, int], opts: Options, grades: list | None = None
) -> ResRels:
    """te_form_res_rels on the ranked docnos (or their grades in rank order, ``grades``, with
    NONPOOL and UNJUDGED already marked)."""
    rel_levels, num_rel_levels, num_rel = _levels(judged, opts.level, opts.state)
    # num_rel_ret counts judged documents only (grades >= 0) at -l or above: with -l below 0,
    # NONPOOL and UNJUDGED are >= -l for the measures that walk the ranking, not for it
    judged_level = max(opts.level, 0)
    if isinstance(grades, tuple):  # (list, numpy array) of a run ranked in bulk
        rel_list, arr = grades
        if opts.judged_only:
            arr = arr[arr >= 0]
            rel_list = arr.tolist()
            nonpool = unjudged = 0
        else:
            nonpool = int((arr == NONPOOL).sum())
            unjudged = int((arr == UNJUDGED).sum())
        rr = ResRels(rel_list, len(rel_list), int((arr >= judged_level).sum()), nonpool,
                     unjudged, num_rel, rel_levels, num_rel_levels)  # fmt: skip
        rr.__dict__["_cache"] = {"arr": arr}
        return rr
    if grades is not None:
        rel_list = grades
    else:
        rel_list = []
        append = rel_list.append
        get = judged.get
        for d in ranked:
            r = get(d)
            append(NONPOOL if r is None else (UNJUDGED if r < 0 else r))
    if opts.judged_only:
        rel_list = [r for r in rel_list if r >= 0]
        nonpool = unjudged = 0
    else:
        nonpool = rel_list.count(NONPOOL)
        unjudged = rel_list.count(UNJUDGED)
    num_rel_ret = sum(1 for r in rel_list if r >= judged_level)
    return ResRels(rel_list, len(rel_list), num_rel_ret, nonpool, unjudged, num_rel, rel_levels,
                   num_rel_levels)  # fmt: skip


# ----------------------------------------------------------------------------- measures


def _f(v: float) -> str:
    """printf("%6.4f"): NaN as glibc prints it, with its sign."""
    if math.isnan(v):
        return f"{'-nan' if math.copysign(1.0, v) < 0 else 'nan':>6}"
    return f"{v:6.4f}"


def _prefix(rr: ResRels, key: str, flag: Callable) -> list[int]:
    """pre[i]: documents among the top i with ``flag`` (a numpy mask of the grades; cached)."""
    cache = rr.__dict__.setdefault("_cache", {})
    pre = cache.get(key)
    if pre is None:
        np = _np()
        pre = [0, *np.cumsum(flag(rr.arr())).tolist()]
        cache[key] = pre
    return pre


def _cut_values(rr: ResRels, cutoffs, at: Callable[[int, int], float], pre) -> list[float]:
    """The m_P.c loop: the value at each cutoff k from the count over the top k documents
    (all of them when the ranking is shorter)."""
    n = rr.num_ret
    return [at(pre[k if k < n else n], k) for k in cutoffs]


def _rel_prefix(rr: ResRels, level: int) -> list[int]:
    return _prefix(rr, f"rel{level}", lambda a: a >= level)


def _ap_terms(rr: ResRels, level: int) -> list[float]:
    """psum[i]: the AP sum over the top i documents, added term by term as m_map.c does
    (numpy's cumsum adds sequentially; adding 0.0 leaves a double unchanged)."""
    cache = rr.__dict__.setdefault("_cache", {})
    key = f"ap{level}"
    if key not in cache:
        np = _np()
        mask = rr.arr() >= level
        found = np.cumsum(mask)
        terms = np.where(mask, found / np.arange(1, len(mask) + 1, dtype=np.float64), 0.0)
        cache[key] = [0.0, *np.cumsum(terms).tolist()]
    return cache[key]


def _ap_sum(rr: ResRels, level: int) -> tuple[float, int]:
    return _ap_terms(rr, level)[-1], _rel_prefix(rr, level)[-1]


def m_map(rr, p, o):
    s, found = _ap_sum(rr, o.level)
    return [_div(s, rr.num_rel) if found else 0.0]  # (R is 0 where -l < 0 finds NONPOOL)


def m_gm_map(rr, p, o):
    s, found = _ap_sum(rr, o.level)
    if found:
        s = _div(s, rr.num_rel)
    return [math.log(max(s, MIN_GEO_MEAN))]


def m_yaap(rr, p, o):
    s, _ = _ap_sum(rr, o.level)
    return [_log(_div(1.0 + s, 1.0 + rr.num_rel - s))]


def m_Rprec(rr, p, o):
    n = min(rr.num_ret, rr.num_rel)
    if n == 0:
        return [0.0]
    return [_rel_prefix(rr, o.level)[n] / rr.num_rel]


def _bpref(rr, o) -> float:
    """m_bpref.c: for each relevant document, 1 - (judged non-relevant above it, at most R)
    / min(judged non-relevant, R); summed in rank order, over R."""
    cache = rr.__dict__.setdefault("_cache", {})
    if "bpref" in cache:
        return cache["bpref"]
    np = _np()
    level = o.level
    num_nonrel = sum(rr.rel_levels[:level]) if level > 0 else 0
    a = rr.arr()
    nonrel = (a >= 0) & (a < level)
    rel = (a >= 0) & ~nonrel
    before = np.cumsum(nonrel)[rel]
    bpref = 0.0
    if len(before):
        with np.errstate(divide="ignore", invalid="ignore"):
            part = np.minimum(before, rr.num_rel) / float(min(num_nonrel, rr.num_rel))
        terms = np.where(before > 0, 1.0 - part, 1.0)
        bpref = float(np.cumsum(terms)[-1])
    if rr.num_rel:
        bpref /= rr.num_rel
    cache["bpref"] = bpref
    return bpref


def m_bpref(rr, p, o):
    return [_bpref(rr, o)]


def m_gm_bpref(rr, p, o):
    return [math.log(max(_bpref(rr, o), MIN_GEO_MEAN))]


def m_recip_rank(rr, p, o):
    level = o.level
    for i, r in enumerate(rr.rel_list):
        if r >= level:
            return [1.0 / (i + 1)]
    return [0.0]


def _recall_cutoffs(percents, num_rel: int, version: str, *, always_09: bool = False):
    if version == "9" or always_09:
        return [int(x * num_rel + 0.9) for x in percents]
    return [_lround(x * num_rel) for x in percents]


def _lround(x: float) -> int:
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def _interpolated(rr, percents, o) -> list[float]:
    """m_iprec_at_recall.c: interpolated precision at each recall cutoff: at the rank of the
    c-th relevant document, the best precision at that rank or below it.

    The C loop walks up from the bottom with rel_so_far = num_rel_ret, one less at each grade
    >= -l, and stops where it reaches 0: at rank i it holds (grades >= -l in the top i) -
    extra, extra being how many more such grades the ranking has than num_rel_ret (NONPOOL
    and UNJUDGED with -l below 0; else 0); so cutoff c is met at the (c + extra)-th."""
    cutoffs = _recall_cutoffs(percents, rr.num_rel, o.version)
    found = rr.num_rel_ret
    init = _div(found, rr.num_ret)
    if found == 0:
        return [0.0 if c > found else init for c in cutoffs]
    np = _np()
    counts = _rel_prefix(rr, o.level)
    extra = counts[-1] - found
    pre = np.asarray(counts[1:], dtype=np.float64)
    if extra:
        pre = pre - extra
    prec = pre / np.arange(1, rr.num_ret + 1, dtype=np.float64)
    best = np.maximum.accumulate(prec[::-1])[::-1]
    at = best[np.flatnonzero(rr.arr() >= o.level)].tolist()  # at the k-th grade >= -l
    return [0.0 if c > found else at[(c - 1 if c >= 1 else 0) + extra] for c in cutoffs]


def m_iprec_at_recall(rr, p, o):
    return _interpolated(rr, p, o)


def m_11pt_avg(rr, p, o):
    if not p:
        raise CmrkitError("11pt_avg needs at least one recall point")
    values = _interpolated(rr, p, o)
    s = 0.0
    for v in reversed(values):  # summed from the last cutoff down, as m_11pt_avg.c
        s += v
    return [s / len(p)]


def m_P(rr, p, o):
    return _cut_values(rr, p, lambda k, i: k / i, _rel_prefix(rr, o.level))


def m_recall(rr, p, o):
    if rr.num_rel == 0:
        return [0.0] * len(p)
    return _cut_values(rr, p, lambda k, i: k / rr.num_rel, _rel_prefix(rr, o.level))


def m_relative_P(rr, p, o):
    if rr.num_rel == 0:
        return [0.0] * len(p)
    return _cut_values(
        rr, p, lambda k, i: k / (rr.num_rel if i > rr.num_rel else i), _rel_prefix(rr, o.level)
    )


def m_success(rr, p, o):
    return _cut_values(rr, p, lambda k, i: 1.0 if k else 0.0, _rel_prefix(rr, o.level))


def m_unj(rr, p, o):
    pre = _prefix(rr, "unj", lambda a: (a == NONPOOL) | (a == UNJUDGED))
    return _cut_values(rr, p, lambda k, i: k / i, pre)


def m_map_cut(rr, p, o):
    if rr.num_rel == 0:
        return [0.0] * len(p)
    return _cut_values(rr, p, lambda s, i: s / rr.num_rel, _ap_terms(rr, o.level))


def m_ndcg_cut(rr, p, o):
    """m_ndcg_cut.c: DCG over the top k with the grades as gains, over the ideal's."""
    np = _np()
    a = rr.arr()
    n = len(a)
    gains = np.where(a > 0, a, 0).astype(np.float64)
    results = [0.0, *np.cumsum(gains / _l2(n)).tolist()] if n else [0.0]
    seq: list[float] = []
    for level in range(rr.num_rel_levels - 1, 0, -1):
        seq.extend([float(level)] * rr.rel_levels[level])
    m = len(seq)
    ideal = [0.0, *np.cumsum(np.asarray(seq) / _l2(m)).tolist()] if m else [0.0]
    out = []
    for k in p:
        value = results[min(k, n)]
        i = ideal[min(k, m)]
        out.append(value / i if i > 0.0 else value)
    return out


def m_infAP(rr, p, o):
    """m_infap.c, term by term in rank order."""
    np = _np()
    level = o.level
    a = rr.arr()
    nonrel = (a >= 0) & (a < level)
    rel = (a >= 0) & ~nonrel
    at = np.flatnonzero(rel)
    inf_ap = 0.0
    if len(at):
        r = np.cumsum(rel)[at] - 1  # relevant above
        nr = np.cumsum(nonrel)[at]
        unj = np.cumsum(a == UNJUDGED)[at]
        fj = at.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((r + nr + unj) / fj) * (
                (r + INFAP_EPSILON) / ((r + nr) + 2 * INFAP_EPSILON)
            )
        terms[at == 0] = 1.0
        inf_ap = float(np.cumsum(terms)[-1])
    if rr.num_rel:
        inf_ap /= rr.num_rel
    return [inf_ap]


def m_Rprec_mult(rr, p, o):
    """m_Rprec_mult.c: precision at rank c = (long)(x * R + 0.9); past the ranking, the
    relevant retrieved over c; 0 above the first relevant document. (With -l below 0 the C
    loop's rel_so_far at rank c is the grades >= -l in the top c less ``extra``; see
    :func:`_interpolated`.)"""
    pre = _rel_prefix(rr, o.level)
    extra = pre[-1] - rr.num_rel_ret
    out = []
    for x in p:
        c = int(x * rr.num_rel + 0.9)
        if c > rr.num_ret:
            out.append(_div(rr.num_rel_ret, c))
        elif c > 0 and pre[c] - extra > 0:
            out.append((pre[c] - extra) / c)
        else:
            out.append(0.0)
    return out


def m_utility(rr, p, o):
    if len(p) != 4:
        raise CmrkitError(
            f"utility takes 4 coefficients (utility.a,b,c,d), not {len(p)}; e.g. utility.1,-1,0,0"
        )
    return [
        p[0] * rr.num_rel_ret
        + p[1] * (rr.num_ret - rr.num_rel_ret)
        + p[2] * (rr.num_rel - rr.num_rel_ret)
        + p[3] * (o.num_docs_in_coll + rr.num_rel_ret - rr.num_ret - rr.num_rel)
    ]


def m_binG(rr, p, o):
    """m_binG.c: 1 / log2(2 + non-relevant above) per relevant document, over R."""
    np = _np()
    mask = rr.arr() >= o.level
    at = np.flatnonzero(mask)
    if not len(at):
        return [0.0]
    before = at - np.arange(len(at))  # 3 + i - rel_so_far == 2 + (i + 1 - rel_so_far)
    s = float(np.cumsum(1.0 / _l2(int(before.max()) + 1)[before])[-1])
    return [_div(s, rr.num_rel)]


# --- gains (gain_init.c; per file in 9.0.8): the tables are evaluation/trec_bulk.py's


def _gains(rr: ResRels, pairs, version: str) -> list[list]:
    return _gain_table(rr.rel_levels, rr.num_rel_levels, pairs, version)


def _gain_vector(rr: ResRels, gm: dict[int, float]):
    """The gain of each ranked document (0.0 where the level has none)."""
    np = _np()
    a = rr.arr()
    g = np.zeros(len(a))
    for level, gain in gm.items():
        if gain != 0:
            g[a == level] = gain
    return g


def _dcgs(rr, gains):
    """m_ndcg.c: (results_dcg, ideal_dcg), each summed term by term in rank order."""
    np = _np()
    g = _gain_vector(rr, _gmap(gains))
    seq = _ideal_seq(gains)
    n, m = len(g), len(seq)
    results = float(np.cumsum(g / _l2(n))[-1]) if n else 0.0
    ideal = float(np.cumsum(np.asarray(seq) / _l2(m))[-1]) if m else 0.0
    return results, ideal


def m_ndcg(rr, p, o):
    r, ideal = _dcgs(rr, _gains(rr, p, o.version))
    return [r / ideal if ideal > 0.0 else 0.0]


def m_dcg(rr, p, o):
    return [_dcgs(rr, _gains(rr, p, o.version))[0]]


def m_ideal_dcg(rr, p, o):
    return [_dcgs(rr, _gains(rr, p, o.version))[1]]


def m_ndcg_rel(rr, p, o):
    """m_ndcg_rel.c: the mean over relevant documents of nDCG at their ranks (the ideal's
    relevant beyond the ranking scored with the final nDCG)."""
    np = _np()
    gains = _gains(rr, p, o.version)
    g = _gain_vector(rr, _gmap(gains))
    seq = _ideal_seq(gains)
    n, m = len(g), len(seq)
    results = np.cumsum(g / _l2(n)) if n else np.zeros(0)
    ideal = np.cumsum(np.asarray(seq) / _l2(m)) if m else np.zeros(0)
    total_r = float(results[-1]) if n else 0.0
    total_i = float(ideal[-1]) if m else 0.0
    pos = np.flatnonzero(g > 0)
    s = 0.0
    if len(pos):
        at_ideal = np.where(pos < m, ideal[np.minimum(pos, max(m - 1, 0))] if m else 0.0, total_i)
        for r, i in zip(results[pos].tolist(), at_ideal.tolist(), strict=True):
            s += _div(r, i)
    s += _div((m - len(pos)) * total_r, total_i)
    return [_div(s, m) if s > 0.0 else 0.0]


def m_Rndcg(rr, p, o):
    """m_Rndcg.c: nDCG taken where the ideal ranking's gain changes, averaged."""
    np = _np()
    gains = _gains(rr, p, o.version)
    if rr.num_rel == 0:
        return [0.0]
    if not gains or gains[-1][1] <= 0.0:
        init = gains[-1][1] if gains else 0.0
        seq, stop = [], init
    else:
        init = gains[-1][1]
        seq, stop = _ideal_walk(gains)
    g = _gain_vector(rr, _gmap(gains))
    n, m = len(g), len(seq)
    rp = [0.0, *np.cumsum(g / _l2(n)).tolist()] if n else [0.0]
    ip = [0.0, *np.cumsum(np.asarray(seq) / _l2(m)).tolist()] if m else [0.0]
    s = 0.0
    changed = 0
    if init > 0.0:  # the walk over ranks 0..m (m: where the ideal gain drops to <= 0)
        old = init
        for j in range(m + 1):
            gain = seq[j] if j < m else stop
            if gain != old:
                ideal = ip[min(j, m)]
                if ideal > 0.0:
                    s += rp[min(j, n)] / ideal
                    changed += 1
                old = gain
        end1 = min(n, m + 1)
    else:
        end1 = 0
    if end1 < n and ip[m] > 0.0:  # documents ranked below the ideal's last relevant
        s += rp[n] / ip[m]
        changed += 1
    return [_div(s, changed)]


def m_G(rr, p, o):
    """m_G.c: gain over log2 of (2 + ideal cost so far - gain so far), normalised by the ideal
    gain; the cost of a rank is the ideal gain there, at least 1."""
    np = _np()
    gains = _gains(rr, p, o.version)
    g = _gain_vector(rr, _gmap(gains))
    seq = _ideal_seq(gains)
    n, m = len(g), len(seq)
    cost = np.ones(n)
    if m and n:
        head = np.asarray(seq[:n])
        cost[: len(head)] = np.where(head >= 1.0, head, 1.0)
    sum_results = np.cumsum(g)
    sum_cost = np.cumsum(cost)
    results_g = 0.0
    nz = np.flatnonzero(g != 0)
    for gain, sc, sr in zip(g[nz].tolist(), sum_cost[nz].tolist(), sum_results[nz].tolist(),
                            strict=True):  # fmt: skip
        results_g += gain / math.log2(2 + sc - sr)
    sum_ideal = float(np.cumsum(seq)[-1]) if m else 0.0
    return [results_g / sum_ideal if sum_ideal > 0.0 else 0.0]


def m_rbp(rr, p, o):
    np = _np()
    persistence = _rbp_p(p)
    gains = _gains(rr, p, o.version)
    # m_rbp.c leaves min and max uninitialised; built without optimisation they start at 0
    lo = min([0.0] + [g[1] for g in gains])
    hi = max([0.0] + [g[1] for g in gains])
    if lo < 0 or hi > 1:
        for g in gains:
            g[1] = (g[1] - lo) / (hi - lo)
    gvec = _gain_vector(rr, _gmap(gains))
    n = len(gvec)
    if not n:
        return [0.0]
    steps = np.full(n, persistence)
    steps[0] = 1.0
    cur_p = np.cumprod(steps)  # 1, p, p*p, ... multiplied one by one as m_rbp.c does
    s = float(np.cumsum(gvec * cur_p)[-1])
    return [(1.0 - persistence) * s]


def m_rbp_resid(rr, p, o):
    np = _np()
    persistence = _rbp_p(p)
    a = rr.arr()
    n = len(a)
    unj = a < 0
    if not n or not unj.any():
        return [0.0]
    steps = np.full(n + 1, persistence)
    steps[0] = 1.0
    cur_p = np.cumprod(steps)
    s = float(np.cumsum(np.where(unj, cur_p[:n], 0.0))[-1])
    return [float(cur_p[n]) + (1 - persistence) * s]


def m_set_P(rr, p, o):
    return [rr.num_rel_ret / rr.num_ret if rr.num_ret else 0.0]


def m_set_relative_P(rr, p, o):
    if rr.num_ret and rr.num_rel:
        return [rr.num_rel_ret / min(rr.num_ret, rr.num_rel)]
    return [0.0]


def m_set_recall(rr, p, o):
    return [rr.num_rel_ret / rr.num_rel if rr.num_rel else 0.0]


def m_set_map(rr, p, o):
    if rr.num_ret and rr.num_rel:
        return [(float(rr.num_rel_ret) * float(rr.num_rel_ret)) / (float(rr.num_ret) * rr.num_rel)]
    return [0.0]


def m_set_F(rr, p, o):
    if not rr.num_rel_ret:
        return [0.0]
    P = rr.num_rel_ret / rr.num_ret
    R = rr.num_rel_ret / rr.num_rel
    x = p[0]
    return [(x + 1.0) * P * R / (x * P + R)]


def m_num_ret(rr, p, o):
    return [float(rr.num_ret)]


def m_num_rel(rr, p, o):
    return [float(rr.num_rel)]


def m_num_rel_ret(rr, p, o):
    return [float(rr.num_rel_ret)]


def m_num_nonrel_judged_ret(rr, p, o):
    return [float(rr.num_ret - rr.num_nonpool - rr.num_unjudged_in_pool - rr.num_rel_ret)]


def m_num_q(rr, p, o):
    return [1.0]


def m_relstring(rr, p, o):
    n = max(min(int(p[0]), rr.num_ret), 0)
    chars = []
    for r in rr.rel_list[:n]:
        if r > 9:
            chars.append(">")
        elif r >= 0:
            chars.append(chr(48 + r))
        elif r == NONPOOL:
            chars.append("-")
        elif r == UNJUDGED:
            chars.append(".")
        else:
            chars.append("<")
    return ["".join(chars)]


QRELS_MEASURES: dict[str, Callable] = {
    name[2:]: fn for name, fn in list(globals().items()) if name.startswith("m_")
}


# --- judgment groups (qrels_jg)


def _jg_measure(per_group: Callable) -> Callable:
    def compute(groups: list[ResRels], p, o):
        total = None
        for rr in groups:
            values = per_group(rr, p, o)
            total = values if total is None else [t + v for t, v in zip(total, values, strict=True)]
        if total is None:
            return [0.0] * max(len(p or ()), 1)
        if len(groups) > 1:
            total = [t / len(groups) for t in total]
        return total

    return compute


def _map_jg(rr, p, o):
    s, found = _ap_sum(rr, o.level)
    return [_div(s, rr.num_rel) if found else 0.0]


def _P_jg(rr, p, o):
    return m_P(rr, p, o)


def _rprec_mult_jg(rr, p, o):
    # m_Rprec_mult_avgjg.c adds the precision only where i reaches a cutoff (no interpolation)
    return m_Rprec_mult(rr, p, o)


JG_MEASURES = {
    "map_avgjg": _jg_measure(_map_jg),
    "P_avgjg": _jg_measure(_P_jg),
    "Rprec_mult_avgjg": _jg_measure(_rprec_mult_jg),
}


# ----------------------------------------------------------------------------- driver


@dataclass
class TrecResult:
    """What trec_eval computes: per-query values and the summary, with its printed names."""

    version: str
    options: Options
    columns: list[defs.Column]
    runid: str
    queries: list[str]  # evaluated, in trec_eval's order
    per_query: dict[str, list[float | str]]  # qid -> one value per printed name
    summary: list[float | str]
    printed_queries: list[str]
    missing_from_run: list[str]
    missing_from_qrels: list[str]
    zscores: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [n for c in self.columns for n in c.names]

    @property
    def value_columns(self) -> list[defs.Column]:
        """The column of each printed name (in ``names``' order)."""
        return [c for c in self.columns for _ in c.names]

    def aggregate(self) -> dict[str, float | str]:
        return dict(zip(self.names, self.summary, strict=True))

    def by_query(self) -> dict[str, dict[str, float | str]]:
        return {q: dict(zip(self.names, v, strict=True)) for q, v in self.per_query.items()}

    def to_trec(self) -> str:
        """trec_eval's stdout, byte for byte."""
        z = "Z" if self.zscores else ""
        lines: list[str] = []
        opts = self.options
        out = ""
        if opts.query:  # built a value name at a time, then interleaved query by query
            import itertools

            qids = self.printed_queries
            rows = [self.per_query[q] for q in qids]
            parts: list[list[str]] = []
            k = 0
            for col in self.columns:
                fam = col.family
                if fam.name == "runid":
                    continue
                if fam.per_query:
                    for j, name in enumerate(col.names):
                        vals = [r[k + j] for r in rows]
                        pairs = zip(qids, vals, strict=True)
                        if fam.name == "relstring":
                            parts.append([f"{name:<22}\t{q}\t'{v}'\n" for q, v in pairs])
                        elif fam.integer and not z:
                            parts.append([f"{name:<22}\t{q}\t{int(v)}\n" for q, v in pairs])
                        elif any(v != v for v in vals):  # a NaN: printed with its sign
                            parts.append([f"{z}{name:<22}\t{q}\t{_f(v)}\n" for q, v in pairs])
                        else:
                            head = f"{z}{name:<22}\t"
                            parts.append([f"{head}{q}\t{v:6.4f}\n" for q, v in pairs])
                k += len(col.names)
            out = "".join(itertools.chain.from_iterable(zip(*parts, strict=True)))
        if opts.summary:
            k = 0
            for col in self.columns:
                fam = col.family
                if fam.name == "runid":
                    lines.append(f"{'runid':<22}\tall\t{self.runid}")
                    continue
                width = len(col.names)
                if fam.name != "relstring":
                    for name, v in zip(col.names, self.summary[k : k + width], strict=True):
                        if fam.integer and not z:
                            lines.append(f"{name:<22}\tall\t{int(v)}")
                        else:
                            lines.append(f"{z}{name:<22}\tall\t{_f(v)}")
                k += width
        return out + "".join(line + "\n" for line in lines)


def _zscore(values: list, names: list[str], table: dict | None) -> list:
    out = []
    for name, v in zip(names, values, strict=True):
        if isinstance(v, str):
            out.append(v)
            continue
        if table is None or name not in table:
            out.append(MISSING_ZSCORE)
            continue
        mean, std = table[name]
        if std:
            out.append((v - mean) / std)
        else:
            out.append(0.0 if v == mean else MISSING_ZSCORE)
    return out


def evaluate(
    results: Results,
    rel_info: RelInfo,
    columns: Sequence[defs.Column],
    opts: Options,
    zscores: dict[str, dict[str, tuple[float, float]]] | None = None,
    run_path: object = None,
) -> TrecResult:
    """trec_eval's main loop: every query with judgments and results (with -c, every query
    with judgments), the measures in trec_eval's order, then the summary."""
    version = opts.version
    fmt = "prefs" if rel_info.format in ("prefs", "qrels_prefs") else rel_info.format
    columns = list(columns)
    for n in (c.family.name for c in columns):
        need = defs.BY_NAME[n].rel_format
        if need != fmt and n not in ("runid", "num_q"):
            hint = {"prefs": "-R prefs or -R qrels_prefs", "qrels_jg": "-R qrels_jg"}.get(
                need, "-R qrels (the default)"
            )
            raise CmrkitError(
                f"measure {n} needs {need} judgments ({hint}); the judgments were read as "
                f"{rel_info.format}"
            )
    names = [n for c in columns for n in c.names]
    rel_qids = rel_info.qids
    run_qids = set(results.qids)
    common = [q for q in rel_qids if q in run_qids]
    missing_from_run = [q for q in rel_qids if q not in run_qids]
    missing_from_qrels = sorted((q for q in run_qids if q not in set(rel_qids)), key=_cbytes)
    if not common and not (opts.complete and version == "10"):
        raise CmrkitError(
            "no query in common between the run and the qrels (run queries such as "
            f"{min(run_qids)!r}, qrels queries such as {rel_qids[0]!r}); "
            "check that the files belong together"
        )
    if version == "10" and opts.complete:
        evaluated = rel_qids
    else:
        evaluated = common
    if results.cols is None or fmt != "qrels" or len(evaluated) != len(common):
        rel_info.as_text()  # docnos meet the run's one query at a time
    per_query: dict[str, list] = {}
    z_queries: list[str] = []
    z_measures: set[str] = set()
    # the values -q prints (gm_map, num_q and relstring are never z-scored on a line)
    z_names = [
        n for c in columns if c.family.per_query and c.family.name != "relstring" for n in c.names
    ]
    graded = _bulk_grades(results, rel_info, opts) if fmt == "qrels" else None
    by_name = _bulk_values(graded, evaluated, rel_info, columns, opts)
    rows = None if by_name is None else list(zip(*by_name, strict=True))
    if rows is not None:  # every query at once (trec_bulk.py), the same doubles
        per_query = dict(zip(evaluated, map(list, rows), strict=True))
    for qid in evaluated if rows is None else ():
        bogus = qid not in run_qids
        if graded is not None and not bogus:
            values = _qrels_values(None, graded[qid], rel_info.qrels[qid], columns, opts)
        else:
            docs = [(BOGUS_DOCNO, 1.0)] if bogus else results.queries[qid]
            values = _query_values(qid, docs, rel_info, columns, opts, fmt, run_path)
        if bogus:
            for i, name in enumerate(names):
                if name in ("num_ret", "utility", "rbp_resid") or name.startswith("unj"):
                    values[i] = 0.0
                elif name == "relstring":
                    values[i] = ""
        if zscores is not None:
            table = zscores.get(qid)
            if table is None:
                z_queries.append(qid)
            else:
                z_measures.update(n for n in z_names if n not in table)
            values = _zscore(values, names, table)
        per_query[qid] = values
    if rows is not None and zscores is not None:
        for qid in evaluated:
            table = zscores.get(qid)
            if table is None:
                z_queries.append(qid)
            else:
                z_measures.update(n for n in z_names if n not in table)
            per_query[qid] = _zscore(per_query[qid], names, table)
    num_q = len(rel_qids) if opts.complete else len(evaluated)
    summary: list = []
    k = 0
    for col in columns:
        fam = col.family
        for j in range(len(col.names)):
            if by_name is not None and zscores is None:
                acc = _sum_in_order(by_name[k + j])
            else:
                acc = 0.0
                for qid in evaluated:
                    v = per_query[qid][k + j]
                    if not isinstance(v, str):
                        acc += v
            if fam.summary == defs.MEAN:
                value = acc / num_q if num_q else acc
            elif fam.summary == defs.GEOMETRIC:
                if num_q > 0:
                    if opts.complete:
                        acc += (num_q - len(evaluated)) * math.log(MIN_GEO_MEAN)
                    value = math.exp(acc / num_q)
                else:
                    value = acc
            elif fam.summary == defs.NUM_Q:
                value = float(num_q)
            elif fam.summary == defs.NUM_REL and opts.complete:
                value = float(_all_relevant(rel_info))
            elif fam.summary == defs.NO_SUMMARY:
                value = ""
            else:
                value = acc
            summary.append(value)
        k += len(col.names)
    printed = evaluated
    return TrecResult(
        version,
        opts,
        columns,
        results.runid,
        list(evaluated),
        per_query,
        summary,
        list(printed),
        missing_from_run,
        missing_from_qrels,
        zscores=zscores is not None,
        notes=_z_notes(z_queries, z_measures),
    )


def _sum_in_order(values: list) -> float:
    """0.0 plus each value in turn (the summary's order; strings skipped)."""
    if values and isinstance(values[0], str):
        return 0.0
    import numpy as np

    return float(np.cumsum(np.asarray([0.0, *values]))[-1])  # cumsum adds one by one


def _z_notes(queries: list[str], measures: set[str]) -> list[str]:
    """-Z: what the z-score file lacks (trec_eval prints -1000000 there, silently)."""
    notes = []
    if queries:
        some = ", ".join(queries[:3]) + (", ..." if len(queries) > 3 else "")
        notes.append(
            f"note: the z-score file has no line for {len(queries)} queries ({some}): their "
            "values print as -1000000, as trec_eval does"
        )
    if measures:
        few = sorted(measures)
        notes.append(
            f"note: the z-score file lacks {len(few)} measures for some queries "
            f"({', '.join(few[:4])}{', ...' if len(few) > 4 else ''}): -1000000 there, as "
            "trec_eval does"
        )
    return notes


def _all_relevant(rel_info: RelInfo) -> int:
    """m_num_rel.c with -c: judgments with rel > 0 in every query (whatever -l says)."""
    if rel_info.format == "qrels_jg":
        return sum(
            1 for groups in rel_info.jg.values() for g in groups for r in g.values() if r > 0
        )
    if rel_info.format == "qrels":
        return sum(1 for docs in rel_info.qrels.values() for r in docs.values() if r > 0)
    raise CmrkitError("num_rel with -c needs qrels or qrels_jg judgments")


@dataclass
class Graded:
    """The grades of a run read in bulk, in trec_eval's rank order (NONPOOL and UNJUDGED
    marked): query ``qids[k]`` owns ``marked[starts[k]:starts[k + 1]]``."""

    qids: list[str]
    marked: object  # numpy int64
    lens: object
    starts: object
    _lists: dict | None = None

    def __contains__(self, qid: str) -> bool:
        return qid in self.index

    @property
    def index(self) -> dict[str, int]:
        if self._lists is None:
            self._lists = {q: k for k, q in enumerate(self.qids)}
        return self._lists

    def __getitem__(self, qid: str) -> tuple[list[int], object]:
        k = self.index[qid]
        arr = self.marked[int(self.starts[k]) : int(self.starts[k + 1])]
        return arr.tolist(), arr


def _bulk_grades(results: Results, rel_info: RelInfo, opts: Options) -> Graded | None:
    """The grades in trec_eval's rank order for a run read in bulk, ranked with numpy."""
    if results.cols is None:
        return None
    import numpy as np

    from cmrkit.evaluation.order import MISSING, rank_all

    cols = results.cols
    qrels = rel_info.qrels
    blocks = [i for i, q in enumerate(cols.qids) if q in qrels]
    if not blocks:
        return Graded([], np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(1, np.int64))
    depth = None if opts.max_docs == Options.max_docs else opts.max_docs
    lens, starts, _, rel, _, _ = rank_all(
        cols, blocks, qrels, depth, opts.version, byte_docnos=rel_info.byte_docnos
    )
    marked = np.where(rel == MISSING, NONPOOL, np.where(rel < 0, UNJUDGED, rel))
    return Graded([cols.qids[i] for i in blocks], marked, lens, starts)


def _bulk_values(graded: Graded | None, evaluated: list[str], rel_info: RelInfo, columns,
                 opts: Options) -> list | None:  # fmt: skip
    """Every evaluated query's values at once (a list per printed value name, a value per
    query), when all of them were ranked in bulk; None otherwise (the per-query loop then
    computes them)."""
    if graded is None or not evaluated or any(q not in graded for q in evaluated):
        return None
    import numpy as np

    order = np.asarray([graded.index[q] for q in evaluated], dtype=np.int64)
    lens = graded.lens[order]
    if np.array_equal(order, np.arange(len(graded.qids))):
        flat = graded.marked
    elif len(lens) and int(graded.lens.min()) == int(graded.lens.max()):  # rows of one length
        flat = graded.marked.reshape(len(graded.qids), -1)[order].ravel()
    else:
        starts = graded.starts
        rows = np.repeat(starts[:-1][order] - (np.cumsum(lens) - lens), lens)
        flat = graded.marked[np.arange(int(lens.sum())) + rows]
    judged = [rel_info.qrels[q] for q in evaluated]
    B = _block(flat, lens, judged, opts)
    if B is None:
        return None
    made: list = []

    def per_query(name: str, params) -> list:
        if not made:
            for k in range(B.nq):
                arr = B.A[k, : B.n[k]]
                rr = ResRels(arr.tolist(), int(B.n[k]), int(B.nrr[k]),
                             int((arr == NONPOOL).sum()), int((arr == UNJUDGED).sum()),
                             int(B.R[k]), B.rel_levels[k], B.num_rel_levels[k])  # fmt: skip
                rr.__dict__["_cache"] = {"arr": arr}
                made.append(rr)
        fn = QRELS_MEASURES[name]
        return [list(v) for v in zip(*(fn(rr, params, opts) for rr in made), strict=True)]

    return _bulk_rows(B, columns, per_query)


def _qrels_values(ranked, grades, judged, columns, opts) -> list:
    values: list = []
    rr = form_res_rels(ranked, judged, opts, grades)
    for col in columns:
        name = col.family.name
        if name == "runid":
            continue
        values.extend(QRELS_MEASURES[name](rr, col.params, opts))
    return values


def _query_values(qid, docs, rel_info, columns, opts, fmt, run_path) -> list:
    if fmt == "qrels":
        ranked = _ranked(docs, opts)
        _check_duplicates(ranked, qid, run_path)
        return _qrels_values(ranked, None, rel_info.qrels[qid], columns, opts)
    if fmt == "qrels_jg":
        ranked = _ranked(docs, opts)
        _check_duplicates(ranked, qid, run_path)
        groups = [form_res_rels(ranked, g, opts) for g in rel_info.jg[qid]]
        return _family_values(
            columns, lambda name, col: JG_MEASURES[name](groups, col.params, opts)
        )
    import cmrkit.evaluation.trec_prefs as trec_prefs

    ranked = _ranked(docs, opts, prefs=True)
    _check_duplicates(ranked, qid, run_path)
    counts = trec_prefs.form_prefs_counts(ranked, rel_info.prefs[qid], qid)
    return _family_values(columns, lambda name, col: [trec_prefs.MEASURES[name](counts)])


def _family_values(columns, measure) -> list:
    """A query's values of judgment groups or prefs: ``measure(name, column)`` gives each
    column's values; runid has none, num_q is 1."""
    values: list = []
    for col in columns:
        name = col.family.name
        if name == "runid":
            continue
        if name == "num_q":
            values.append(1.0)
        else:
            values.extend(measure(name, col))
    return values


# ----------------------------------------------------------------------------- reports


def dedupe(queries: dict[str, list[tuple[str, float]]]) -> dict[str, list[tuple[str, float]]]:
    """Keep the best score of a document retrieved twice for a query (``--dedupe``)."""
    out = {}
    for qid, docs in queries.items():
        best: dict[str, float] = {}
        for d, s in docs:
            if d not in best or s > best[d]:
                best[d] = s
        out[qid] = list(best.items())
    return out


def coverage(result: TrecResult) -> str:
    """One line: the version, the queries evaluated, and those left out and why."""
    name = defs.VERSION_NAMES[result.version]
    parts = [f"trec_eval {name}: averaged over {len(result.queries)} queries"]
    missing = len(result.missing_from_run)
    if missing and result.options.complete:
        parts.append(f"{missing} qrels queries missing from the run scored as empty (-c)")
    elif missing:
        how = "not evaluated, as trec_eval 9.0.8 does"
        if result.version == "10":
            how += " (10.0 itself stops: 'result qid not found in qrels', exit 4)"
        parts.append(f"{missing} qrels queries missing from the run {how}; -c scores them")
    if result.missing_from_qrels:
        parts.append(f"{len(result.missing_from_qrels)} run queries without judgments (ignored)")
    if result.options.max_docs != Options.max_docs:
        parts.append(f"top {result.options.max_docs} documents per query")
    return "; ".join(parts)


def result_to_json(result: TrecResult, extra: dict | None = None) -> str:
    import json

    o = result.options
    obj: dict = dict(extra or {})
    obj["trec_eval"] = defs.VERSION_NAMES[result.version]
    obj["options"] = {
        "q": o.query,
        "c": o.complete,
        "l": o.level,
        "M": None if o.max_docs == Options.max_docs else o.max_docs,
        "N": o.num_docs_in_coll,
        "n": not o.summary,
        "J": o.judged_only,
        "R": o.rel_format,
        "Z": result.zscores,
    }
    obj["runid"] = result.runid
    summary = {
        n: v for n, v, c in zip(result.names, result.summary, result.value_columns, strict=True)
        if c.family.summary != defs.NO_SUMMARY
    }  # fmt: skip
    obj["measures"] = summary
    obj["queries"] = len(result.queries)
    obj["missing_from_run"] = result.missing_from_run
    obj["missing_from_qrels"] = result.missing_from_qrels
    obj["per_query"] = result.by_query()
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def result_to_csv(result: TrecResult) -> str:
    """qid, measure, value, trec_eval: per query, then the ``all`` rows."""
    import io

    from cmrkit.escaping import csv_writer

    version = defs.VERSION_NAMES[result.version]
    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(["qid", "measure", "value", "trec_eval"])
    for qid in result.queries:
        for name, v in zip(result.names, result.per_query[qid], strict=True):
            w.writerow([qid, name, v if isinstance(v, str) else repr(v), version])
    for name, v, col in zip(result.names, result.summary, result.value_columns, strict=True):
        if col.family.summary != defs.NO_SUMMARY:
            w.writerow(["all", name, repr(v), version])
    return buf.getvalue()
