"""trec_eval 9.0.8 and 10.0, computed as the C program computes them.

Every measure of ``-m all_trec``, ``all_prefs`` and ``qrels_jg`` (the definitions are in
``evaluation/measures/trec.py``), the options ``-q -c -l -M -N -n -J -R -Z``, and output
byte-identical to trec_eval's stdout. This module reads the inputs as trec_eval does, runs its
main loop and prints its output; the qrels measures are ``trec_bulk.py``'s (all queries at once)
and the prefs measures ``trec_prefs.py``'s, both following trec_eval's C files operation for
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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures import trec as defs
from cmrkit.evaluation.measures.ranked import MIN_GEO_MEAN
from cmrkit.evaluation.trec_bulk import (
    NONPOOL,
    UNJUDGED,
    check_grades,
    evaluate_rows,
    judged_grades,
)
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

    def documents(self):
        """What the run retrieved: its columns as read, else {qid: {docno: score}}."""
        if self._queries is None:
            return self.cols
        return {q: dict(docs) for q, docs in self._queries.items()}

    @classmethod
    def of(cls, run: dict[str, dict[str, float]], version: str, runid: str = "") -> Results:
        """A {qid: {docno: score}} run as trec_eval reads one (scores as C floats in 9.0.8)."""
        queries = {q: list(docs.items()) for q, docs in run.items() if docs}
        if version == "9":
            for qid, docs in queries.items():
                singles = array("f", [x for _, x in docs]).tolist()
                queries[qid] = [(d, x) for (d, _), x in zip(docs, singles, strict=True)]
        return cls(queries, runid)


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
        from cmrkit.fileio import missing_file

        raise missing_file(path) from None
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

    def judged(self) -> Mapping[str, Any]:
        """The documents judged for each query, in any of the formats: {qid: {docno: rel}}
        of qrels, the docnos of prefs and of qrels_jg's judgment groups."""
        if self.format == "qrels":
            return self.qrels
        if self.format == "qrels_jg":
            return {q: [d for group in groups for d in group] for q, groups in self.jg.items()}
        return {q: [row[3] for row in rows] for q, rows in self.prefs.items()}


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


def _ranked(docs: list[tuple[str, float]], opts: Options) -> list[str]:
    """Docnos by score descending, ties by docno ascending (as form_prefs_counts.c sorts for
    prefs), cut at -M."""
    order = sorted(docs, key=lambda d: _cbytes(d[0]))
    order.sort(key=lambda d: d[1], reverse=True)
    return [d for d, _ in order[: opts.max_docs]]


def _check_duplicates(ranked: Iterable, qid: str, path) -> None:
    seen = set()
    for d in ranked:
        if d in seen:
            d = d.decode() if isinstance(d, bytes) else d
            raise CmrkitError(
                f"query {qid}: document {d} is retrieved twice; trec_eval refuses such "
                "runs (cmrkit eval --dedupe keeps the best score)",
                path=path,
            )
        seen.add(d)


def _f(v: float) -> str:
    """printf("%6.4f"): NaN as glibc prints it, with its sign."""
    if math.isnan(v):
        return f"{'-nan' if math.copysign(1.0, v) < 0 else 'nan':>6}"
    return f"{v:6.4f}"


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
    columns = list(columns)
    fmt = "prefs" if rel_info.format in ("prefs", "qrels_prefs") else rel_info.format
    _check_formats(columns, fmt, rel_info.format)
    rel_qids = rel_info.qids
    evaluated, missing_from_run, missing_from_qrels = _queries(results, rel_qids, opts)
    if fmt == "prefs":
        by_name = _prefs_values(results, rel_info, evaluated, columns, opts, run_path)
    else:
        by_name = _ranking_values(results, rel_info, evaluated, columns, opts, run_path)
    names = [n for c in columns for n in c.names]
    _empty_rankings(by_name, names, evaluated, set(missing_from_run))
    per_query = {q: [values[k] for values in by_name] for k, q in enumerate(evaluated)}
    notes: list[str] = []
    if zscores is not None:
        notes = _apply_zscores(per_query, columns, zscores)
        by_name = [[per_query[q][k] for q in evaluated] for k in range(len(names))]
    num_q = len(rel_qids) if opts.complete else len(evaluated)
    summary = _summary(columns, by_name, num_q, len(evaluated), rel_info, opts)
    return TrecResult(
        opts.version,
        opts,
        columns,
        results.runid,
        list(evaluated),
        per_query,
        summary,
        list(evaluated),
        missing_from_run,
        missing_from_qrels,
        zscores=zscores is not None,
        notes=notes,
    )


def _check_formats(columns: list[defs.Column], fmt: str, read_as: str) -> None:
    """Each measure's judgments are of the format read (-R)."""
    for n in (c.family.name for c in columns):
        need = defs.BY_NAME[n].rel_format
        if need != fmt and n not in ("runid", "num_q"):
            hint = {"prefs": "-R prefs or -R qrels_prefs", "qrels_jg": "-R qrels_jg"}.get(
                need, "-R qrels (the default)"
            )
            raise CmrkitError(
                f"measure {n} needs {need} judgments ({hint}); the judgments were read as {read_as}"
            )


def _queries(results: Results, rel_qids: list[str], opts: Options):
    """(the queries evaluated in trec_eval's order, the qrels queries the run lacks, the run
    queries the qrels lack). 10.0 with -c evaluates every qrels query; else those in both."""
    run_qids = set(results.qids)
    common = [q for q in rel_qids if q in run_qids]
    missing_from_run = [q for q in rel_qids if q not in run_qids]
    judged = set(rel_qids)
    missing_from_qrels = sorted((q for q in run_qids if q not in judged), key=_cbytes)
    if not common and not (opts.complete and opts.version == "10"):
        raise CmrkitError(
            "no query in common between the run and the qrels (run queries such as "
            f"{min(run_qids)!r}, qrels queries such as {rel_qids[0]!r}); "
            "check that the files belong together"
        )
    evaluated = rel_qids if opts.version == "10" and opts.complete else common
    return evaluated, missing_from_run, missing_from_qrels


def _run_columns(results: Results, evaluated: list[str], rel_info: RelInfo):
    """The run as columns for ranking: the bulk reader's, or made from the queries read line
    by line (then the qrels' docnos become str as well); a query 10.0 evaluates with -c
    without results gets trec_eval's one-document dummy ranking."""
    import numpy as np

    from cmrkit.trec import RunColumns

    cols = results.cols
    have = set(results.qids)
    dummy = [q for q in evaluated if q not in have]
    if cols is not None and not dummy:
        return cols
    rel_info.as_text()  # the docnos meet str docnos
    queries = dict(results.queries)
    queries.update({q: [(BOGUS_DOCNO, 1.0)] for q in dummy})
    qids = list(queries)
    sizes = np.asarray([len(queries[q]) for q in qids], dtype=np.int64)
    starts = np.zeros(len(qids) + 1, dtype=np.int64)
    np.cumsum(sizes, out=starts[1:])
    docnos = [d for q in qids for d, _ in queries[q]]
    scores = np.fromiter((x for q in qids for _, x in queries[q]), np.float64, len(docnos))
    return RunColumns(qids, starts, docnos, scores)


def _ranked_rows(cols, results: Results, rel_info: RelInfo, evaluated: list[str],
                 opts: Options, run_path, qrels) -> tuple:  # fmt: skip
    """(flat, lens, docnos): the evaluated queries' rankings (``cols``: :func:`_run_columns`)
    in trec_eval's order, cut at -M, one after the other: their grades in ``qrels`` (NONPOOL
    and UNJUDGED marked), how many each, and a function giving a query's ranked docnos."""
    import numpy as np

    from cmrkit.evaluation.order import MISSING, rank_all

    index = {q: i for i, q in enumerate(cols.qids)}
    wanted = {index[q] for q in evaluated}
    blocks = [i for i in range(len(cols.qids)) if i in wanted]
    depth = None if opts.max_docs == Options.max_docs else opts.max_docs
    ranked = rank_all(cols, blocks, qrels, depth, opts.version,
                      byte_docnos=rel_info.byte_docnos)  # fmt: skip
    where = {cols.qids[i]: k for k, i in enumerate(blocks)}
    rows = np.asarray([where[q] for q in evaluated], dtype=np.int64)
    lens = ranked.lens[rows]
    take = np.repeat(ranked.starts[:-1][rows] - (np.cumsum(lens) - lens), lens)
    at = np.arange(int(lens.sum())) + take
    grades = ranked.grades[at]
    flat = np.where(grades == MISSING, NONPOOL, np.where(grades < 0, UNJUDGED, grades))

    def docnos(k: int) -> list:
        a, b = int(ranked.starts[where[evaluated[k]]]), int(ranked.starts[where[evaluated[k]] + 1])
        return [ranked.docnos[i] for i in ranked.order[a:b].tolist()]

    if results.cols is None:  # read line by line: trec_eval refuses a document twice
        for k, qid in enumerate(evaluated):
            _check_duplicates(docnos(k), qid, run_path)
    return flat, lens, docnos


def _ranking_values(results, rel_info, evaluated, columns, opts, run_path) -> list[list]:
    """qrels and qrels_jg judgments: every evaluated query's values at once (trec_bulk.py),
    a list per printed name."""
    import numpy as np

    cols = _run_columns(results, evaluated, rel_info)
    if rel_info.format == "qrels":
        flat, lens, _ = _ranked_rows(cols, results, rel_info, evaluated, opts, run_path,
                                     rel_info.qrels)  # fmt: skip
        judged = judged_grades(rel_info.qrels, evaluated)
        return evaluate_rows(flat, lens, judged, columns, opts)
    # qrels_jg: a row per judgment group, averaged over the query's groups
    groups = [rel_info.jg[q] for q in evaluated]
    _, lens, docnos = _ranked_rows(cols, results, rel_info, evaluated, opts, run_path,
                                   {q: {} for q in evaluated})  # fmt: skip
    rows, judged = [], []
    for k, by_group in enumerate(groups):
        ranked = [d.decode() if isinstance(d, bytes) else d for d in docnos(k)]
        for group in by_group:
            rows.extend(_mark(group.get(d)) for d in ranked)
            judged.append(list(group.values()))
    flat = np.asarray(rows, dtype=np.int64)
    row_lens = np.repeat(lens, [len(g) for g in groups])
    sizes = np.asarray([len(j) for j in judged], dtype=np.int64)
    grades = np.asarray([g for j in judged for g in j], dtype=np.int64)
    per_row = evaluate_rows(flat, row_lens, (grades, np.cumsum(sizes) - sizes, sizes),
                            [_jg_column(c) for c in columns], opts)  # fmt: skip
    return _group_means(per_row, [len(g) for g in groups], columns)


def _mark(grade: int | None) -> int:
    return NONPOOL if grade is None else (UNJUDGED if grade < 0 else grade)


def _jg_column(column: defs.Column) -> defs.Column:
    """The qrels measure a judgment-group measure averages (map_avgjg is map's mean over the
    groups: its family's ``averages``), set up with the same parameters."""
    base = column.family.averages
    if base is None:
        return column
    return defs.Column(defs.BY_NAME[base], column.params, column.names)


def _group_means(per_row: list[list], counts: list[int], columns) -> list[list]:
    """m_*_avgjg.c: each query's values summed over its judgment groups in order, divided by
    their number when there are several; num_q is 1."""
    out = []
    k = 0
    for col in columns:
        for _ in col.names:
            values, at = [], 0
            for n in counts:
                if col.family.name == "num_q" or n == 0:
                    values.append(1.0 if col.family.name == "num_q" else 0.0)
                else:
                    total = per_row[k][at]
                    for v in per_row[k][at + 1 : at + n]:
                        total = total + v
                    values.append(total / n if n > 1 else total)
                at += n
            out.append(values)
            k += 1
    return out


def _prefs_values(results, rel_info, evaluated, columns, opts, run_path) -> list[list]:
    """prefs judgments (trec_prefs.py's counts, each family's kernel: measures/prefs.py):
    query by query, a list per printed name."""
    import cmrkit.evaluation.trec_prefs as trec_prefs

    have = set(results.qids)
    rows = []
    for qid in evaluated:
        docs = results.queries[qid] if qid in have else [(BOGUS_DOCNO, 1.0)]
        ranked = _ranked(docs, opts)
        _check_duplicates(ranked, qid, run_path)
        counts = trec_prefs.form_prefs_counts(ranked, rel_info.prefs[qid], qid)
        values: list = []
        for col in columns:
            name = col.family.name
            if name == "num_q":
                values.append(1.0)
            elif name != "runid":
                values.append(col.family.kernel(counts))
        rows.append(values)
    width = sum(len(c.names) for c in columns)
    return [[row[k] for row in rows] for k in range(width)]


def _empty_rankings(by_name: list[list], names: list[str], evaluated: list[str],
                    missing: set[str]) -> None:  # fmt: skip
    """10.0's -c queries without results (scored on its dummy ranking): no document
    retrieved for the measures that count them."""
    rows = [k for k, q in enumerate(evaluated) if q in missing]
    for name, values in zip(names, by_name, strict=True):
        if name in ("num_ret", "utility", "rbp_resid") or name.startswith("unj"):
            for k in rows:
                values[k] = 0.0
        elif name == "relstring":
            for k in rows:
                values[k] = ""


def _apply_zscores(per_query: dict[str, list], columns, zscores) -> list[str]:
    """-Z: each value as (value - mean) / stddev of its query's line in the z-score file;
    notes for the queries and measures the file lacks."""
    names = [n for c in columns for n in c.names]
    # the values -q prints (gm_map, num_q and relstring are never z-scored on a line)
    z_names = [
        n for c in columns if c.family.per_query and c.family.name != "relstring" for n in c.names
    ]
    z_queries: list[str] = []
    z_measures: set[str] = set()
    for qid, values in per_query.items():
        table = zscores.get(qid)
        if table is None:
            z_queries.append(qid)
        else:
            z_measures.update(n for n in z_names if n not in table)
        per_query[qid] = _zscore(values, names, table)
    return _z_notes(z_queries, z_measures)


def _summary(columns, by_name: list[list], num_q: int, evaluated: int, rel_info, opts) -> list:
    """The ``all`` values: each family's summary (meas_avg.c) of its per-query values."""
    summary: list = []
    k = 0
    for col in columns:
        fam = col.family
        for _ in col.names:
            acc = _sum_in_order(by_name[k])
            if fam.summary == defs.MEAN:
                value = acc / num_q if num_q else acc
            elif fam.summary == defs.GEOMETRIC:
                if num_q > 0:
                    if opts.complete:
                        acc += (num_q - evaluated) * math.log(MIN_GEO_MEAN)
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
            k += 1
    return summary


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
