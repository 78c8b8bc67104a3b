"""trec_eval's qrels measures for every query at once, with numpy: their one implementation.

The rankings of the evaluated queries are padded matrices (a row per query, its grades in rank
order; rankings of similar lengths share one, :func:`evaluate_rows`). Each measure is the C
program's per-query computation done row-wise: the same double operations in the same order
(sums are sequential ``cumsum`` along a row; the padding adds ``0.0``, which leaves a double
unchanged), so every value is bitwise the C program's. Transcendental functions (log, log2)
come from Python's ``math`` (libm, as C), never numpy.

Also the pieces both engines share: the relevance-level statics of form_res_rels.c
(:func:`levels`), the gain tables of gain_init.c (:func:`gains`), the rank discounts, each
query's judged grades (:func:`judged_grades`) and the bound on grades (:func:`check_grades`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from functools import cmp_to_key

from cmrkit.errors import CmrkitError
from cmrkit.trec import c_atol

NONPOOL = -1  # RELVALUE_NONPOOL: retrieved, not in the qrels
UNJUDGED = -2  # RELVALUE_UNJUDGED: in the qrels with a negative grade
MIN_GEO_MEAN = 0.00001
INFAP_EPSILON = 0.00001
PAD = -(1 << 40)  # below every grade and -l level: the cells past a ranking's end
NEG_NAN = -math.nan  # C's 0.0 / 0.0 on x86 (printed -nan)
_SPARSE = 4  # the padded matrix may hold at most this many cells per ranked document (+ 1M)
# form_res_rels.c keeps a counter per grade from 0 to the highest, for every query: a grade of
# 2147483648 makes trec_eval fail (or crash) and would take tens of GB here
MAX_GRADE = 1_000_000


# ----------------------------------------------------------------------------- shared pieces


def c_div(a: float, b: float) -> float:
    """C double division: x/0 is inf, 0/0 the x86 default NaN (printed -nan)."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return NEG_NAN
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def c_log(x: float) -> float:
    """glibc's log: -inf at 0, the default NaN (printed -nan) below 0."""
    if x > 0:
        return math.log(x)
    if x == 0:
        return -math.inf
    return x if math.isnan(x) else NEG_NAN


def check_grades(qrels, path: object = None) -> None:
    """Refuse qrels with a grade above :data:`MAX_GRADE` (one line naming the query and the
    document), before any per-grade table is made. ``qrels``: {qid: {docno: grade}}, or the
    compiled reader's columns."""
    grades = getattr(qrels, "grades", None)
    if grades is not None:
        if not len(grades) or int(grades.max()) <= MAX_GRADE:
            return
        import numpy as np

        i = int(np.argmax(grades))
        qid = qrels.qids[int(np.searchsorted(qrels.starts, i, side="right")) - 1]
        top = int(grades[i])
    else:
        top, qid = max(
            ((max(docs.values(), default=0), q) for q, docs in qrels.items()), default=(0, "")
        )
        if top <= MAX_GRADE:
            return
    docno = next(d for d, g in qrels[qid].items() if g == top)
    docno = docno.decode() if isinstance(docno, bytes) else docno
    raise CmrkitError(
        f"query {qid} document {docno}: grade {top:,} is more than trec_eval can count (it keeps "
        f"a counter per grade from 0 up for every query: {top + 1:,} here; trec_eval fails); "
        f"grades up to {MAX_GRADE:,} are taken (AP, P, R, RR, nDCG@k and the counts of "
        "`eval`'s default path take any)",
        path=path,
    )


def levels(grades: Sequence[int], level: int, state: dict) -> tuple[list[int], int, int]:
    """form_res_rels.c's counts per relevance level of one query's judgments (``grades``):
    (rel_levels, num_rel_levels, num_rel).

    rel_levels lives in a buffer kept from query to query (the C statics, in ``state``): a
    query whose grades are all negative sees the previous query's levels, as in C."""
    size = (max(grades) if len(grades) else 0) + 1
    counts = [0] * max(size, 0)
    for r in grades:
        if r >= 0:
            counts[r] += 1
    return _levels_from(counts, size, level, state)


def _levels_from(counts: list[int], size: int, level: int, state: dict):
    """:func:`levels` once the query's judgments are counted per level (``counts[:size]``)."""
    buf = state.setdefault("levels", [])
    if size > len(buf):
        buf.extend([0] * (size - len(buf)))
    if size > 0:
        buf[:size] = counts[:size]
    num_rel = 0
    num_rel_levels = state.get("num_rel_levels", 0)
    for i in range(max(size, 0)):
        if buf[i]:
            num_rel_levels = i + 1
            if i >= level:
                num_rel += buf[i]
    state["num_rel_levels"] = num_rel_levels
    # the measures read the buffer below num_rel_levels, and bpref below -l (where C reads what
    # earlier queries left): a copy of that much, not of the whole buffer, per query
    return buf[: max(num_rel_levels, level)], num_rel_levels, num_rel


def levels_all(grades, sizes, level: int, state: dict) -> list[tuple[list[int], int, int]]:
    """:func:`levels` of each query in turn (the same statics), the counting done with numpy:
    ``grades`` holds the queries' judgments one query after the other, ``sizes`` how many each
    (numpy int64 arrays)."""
    import numpy as np

    nq = len(sizes)
    starts = np.cumsum(sizes) - sizes
    if len(grades) == 0 or int(grades.max()) > 1000:
        bounds = zip(starts.tolist(), (starts + sizes).tolist(), strict=True)
        return [levels(grades[a:b].tolist(), level, state) for a, b in bounds]
    width = max(int(grades.max()) + 1, 1)
    rows = np.repeat(np.arange(nq), sizes)
    ok = grades >= 0
    counts = np.bincount(rows[ok] * width + grades[ok], minlength=nq * width).reshape(nq, width)
    highest = np.zeros(nq, dtype=np.int64)  # 0 for a query without judgments, as in levels
    filled = sizes > 0
    highest[filled] = np.maximum.reduceat(grades, starts[filled])
    return [
        _levels_from(row, top + 1, level, state)
        for row, top in zip(counts.tolist(), highest.tolist(), strict=True)
    ]


def judged_grades(qrels, qids: list[str]):
    """(the judgments' grades of ``qids`` one query after the other, each query's first index,
    each query's count), numpy int64 arrays, each query's grades in its qrels order."""
    import itertools

    import numpy as np

    if hasattr(qrels, "judged"):  # the compiled reader's columns
        return qrels.judged(qids)
    rows = [qrels[q] for q in qids]
    sizes = np.asarray([len(r) for r in rows], dtype=np.int64)
    grades = np.fromiter(
        itertools.chain.from_iterable(r.values() for r in rows), dtype=np.int64,
        count=int(sizes.sum()),
    )  # fmt: skip
    return grades, np.cumsum(sizes) - sizes, sizes


_L2: list[float] = []  # _L2[i] == math.log2(i + 2), the rank discount, grown on demand
_L2_ARRAY: list = [None]


def log2_discounts(n: int):
    """math.log2(i + 2) for i < n as a numpy array (libm's values, as C's log2)."""
    import numpy as np

    if len(_L2) < n:
        _L2.extend(math.log2(i + 2) for i in range(len(_L2), n))
    if _L2_ARRAY[0] is None or len(_L2_ARRAY[0]) < n:
        _L2_ARRAY[0] = np.asarray(_L2)
    return _L2_ARRAY[0][:n]


def _valid_int(s: str) -> bool:
    return re.fullmatch(r"[+-]?[0-9]+", s) is not None


def gains(rel_levels: list[int], num_rel_levels: int, pairs, version: str) -> list[list]:
    """gain_init.c: [rel_level, gain, num_at_level] sorted by gain (as qsort with
    (int)(g1 - g2))."""
    out: list[list] = []
    for name, value in pairs or ():
        if version == "10" and not _valid_int(name):
            continue
        out.append([c_atol(name), float(value), 0])
    for i in range(num_rel_levels):
        for g in out:
            if g[0] == i:
                g[2] = rel_levels[i]
                break
        else:
            out.append([i, float(i), rel_levels[i]])
    out.sort(key=cmp_to_key(lambda a, b: int(a[1] - b[1])))
    return out


def gain_map(table) -> dict[int, float]:
    """rel_level -> gain, the first entry of a level winning (get_gain's scan)."""
    out: dict[int, float] = {}
    for level, gain, _ in table:
        out.setdefault(level, gain)
    return out


def ideal_runs(table) -> tuple[list[tuple[float, int]], float]:
    """The ideal ranking as m_ndcg.c walks the levels: from the highest gain down, (gain,
    judgments) of each level with judgments, until the first such level with a gain <= 0,
    whose gain is returned too (0.0 when the walk passes the lowest level)."""
    runs: list[tuple[float, int]] = []
    cur = len(table) - 1
    while cur >= 0:
        _, gain, count = table[cur]
        if count:
            if gain <= 0.0:
                return runs, gain
            runs.append((gain, count))
        cur -= 1
    return runs, 0.0


def ideal_walk(table) -> tuple[list[float], float]:
    """(the ideal ranking's positive gains, one per judgment, and the gain where the walk
    stops; see :func:`ideal_runs`)."""
    runs, stop = ideal_runs(table)
    seq: list[float] = []
    for gain, count in runs:
        seq.extend([gain] * count)
    return seq, stop


def ideal_seq(table) -> list[float]:
    """The ideal ranking's gains (positive) as m_ndcg.c walks them (none when the highest
    gain is <= 0)."""
    if not table or table[-1][1] <= 0.0:
        return []
    return ideal_walk(table)[0]


# ----------------------------------------------------------------------------- the matrix


class Block:
    """Every evaluated query's ranking as a row of grades (NONPOOL, UNJUDGED marked), with
    form_res_rels's counts per row."""

    def __init__(self, A, n, level: int, rel_levels, num_rel_levels, num_rel, opts) -> None:
        import numpy as np

        self.np = np
        self.A = A
        self.nq, self.L = A.shape
        self.n = n  # num_ret
        self.level = level
        self.valid = np.arange(self.L)[None, :] < n[:, None]
        self.rel = self.valid & (A >= level)
        self.rel_levels = rel_levels
        self.num_rel_levels = num_rel_levels
        self.R = np.asarray(num_rel, dtype=np.int64)
        # found: the grades >= -l (what the measures walking the ranking count); nrr:
        # form_res_rels's num_rel_ret, judged grades only (>= 0 and >= -l). They differ only
        # for -l below 0, where NONPOOL and UNJUDGED are >= -l too.
        self.found = self.rel.sum(axis=1)
        self.nrr = self.found if level >= 0 else (self.rel & (A >= 0)).sum(axis=1)
        self.extra = self.found - self.nrr  # all zero for -l >= 0
        self.opts = opts
        self._cache: dict = {}

    def row(self, k: int) -> Block:
        """Row ``k`` alone, as a block of its own length."""
        n = int(self.n[k])
        return Block(self.A[k : k + 1, :n], self.n[k : k + 1], self.level, [self.rel_levels[k]],
                     [self.num_rel_levels[k]], [int(self.R[k])], self.opts)  # fmt: skip

    def cached(self, key, make):
        value = self._cache.get(key)
        if value is None:
            value = self._cache[key] = make()
        return value

    def prefix(self, key, mask_of):
        """(nq, L + 1) counts of ``mask_of()`` over each row's top i (column i)."""

        def make():
            np = self.np
            pre = np.zeros((self.nq, self.L + 1), dtype=np.int64)
            np.cumsum(mask_of(), axis=1, out=pre[:, 1:])
            return pre

        return self.cached(("pre", key), make)

    def pre_rel(self):
        return self.prefix("rel", lambda: self.rel)

    def at(self, pre, k: int):
        """Column min(k, L) of a prefix matrix: the count over the top k (all when shorter)."""
        return pre[:, min(k, self.L)]

    def row_sums(self, terms):
        """Each row's terms added one by one from the left (the C loop's order)."""
        np = self.np
        if self.L == 0:
            return np.zeros(self.nq)
        return np.cumsum(terms, axis=1)[:, -1]

    def ap_prefix(self):
        """(nq, L + 1): the AP sum over the top i, term by term as m_map.c adds them."""

        def make():
            np = self.np
            found = np.cumsum(self.rel, axis=1)
            terms = np.where(self.rel, found / np.arange(1, self.L + 1, dtype=np.float64), 0.0)
            out = np.zeros((self.nq, self.L + 1))
            np.cumsum(terms, axis=1, out=out[:, 1:])
            return out

        return self.cached("ap", make)

    def gain_rows(self, gmaps: list[dict[int, float]]):
        """Each ranked document's gain (0.0 where its level has none; a gain given to a level
        below -2 meets no ranked document: they hold grades, NONPOOL or UNJUDGED)."""
        np = self.np
        lo = UNJUDGED
        hi = int(self.A.max(initial=0)) if self.L else 0
        table = np.zeros((self.nq, hi - lo + 1))
        for q, gm in enumerate(gmaps):
            for k, g in gm.items():
                if g != 0 and lo <= k <= hi:
                    table[q, k - lo] = g
        idx = np.where(self.valid, self.A - lo, 0)
        out = np.take_along_axis(table, idx, axis=1)
        out[~self.valid] = 0.0
        return out

    def padded(self, seqs: list[list[float]], width: int | None = None):
        """Per-query sequences (cut at ``width``) as a zero-padded matrix."""
        import itertools

        np = self.np
        if width is not None:
            seqs = [s[:width] for s in seqs]
        sizes = np.asarray([len(s) for s in seqs], dtype=np.int64)
        w = int(sizes.max(initial=0))
        out = np.zeros((self.nq, w))
        if w:
            flat = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.float64,
                               count=int(sizes.sum()))  # fmt: skip
            rows = np.repeat(np.arange(self.nq), sizes)
            cols = np.arange(len(flat)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
            out[rows, cols] = flat
        return out, sizes


def evaluate_rows(flat, lens, judged: tuple, columns, opts) -> list[list]:
    """The values of ``columns`` (trec_eval's families as set up, ``measures/trec.py``'s
    Column) for rankings of grades: ``flat`` holds them one after the other in trec_eval's rank
    order (NONPOOL and UNJUDGED marked), ``lens`` how long each is, ``judged`` each row's
    judgments (:func:`judged_grades`). One list per printed value name, a value per row.

    The rows are evaluated in as few matrices as their lengths allow (one when they are alike),
    the relevance-level statics kept in row order, as trec_eval goes query by query."""
    import numpy as np

    if opts.judged_only:
        keep = flat >= 0
        bounds = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=bounds[1:])
        kept = np.concatenate(([0], np.cumsum(keep)))
        lens = kept[bounds[1:]] - kept[bounds[:-1]]
        flat = flat[keep]
    lens = np.asarray(lens, dtype=np.int64)
    grades, _, sizes = judged
    per = levels_all(grades, sizes, opts.level, opts.state)
    starts = np.cumsum(lens) - lens
    out: list[list] | None = None
    for rows in _chunks(lens):
        B = _block(flat, lens, starts, rows, per, opts)
        got = values(B, columns)
        if rows is None:
            return got
        if out is None:
            out = [[0.0] * len(lens) for _ in got]
        for column, chunk in zip(out, got, strict=True):
            for row, value in zip(rows.tolist(), chunk, strict=True):
                column[row] = value
    return out if out is not None else [[] for c in columns for _ in c.names]


def _chunks(lens) -> list:
    """Rows grouped so that no matrix is mostly padding: [None] (every row, in order) when the
    lengths allow one matrix, else groups of rows of similar lengths (numpy index arrays)."""
    import numpy as np

    nq = len(lens)
    total = int(lens.sum())
    if nq * int(lens.max(initial=0)) <= _SPARSE * total + (1 << 20):
        return [None]
    order = np.argsort(lens, kind="stable")
    ordered = lens[order].tolist()
    chunks = []
    start = 0
    while start < nq:
        end, size = start + 1, ordered[start]
        while end < nq and (end + 1 - start) * ordered[end] <= _SPARSE * (size + ordered[end]) + (
            1 << 20
        ):
            size += ordered[end]
            end += 1
        chunks.append(order[start:end])
        start = end
    return chunks


def _block(flat, lens, starts, rows, per, opts) -> Block:
    """The matrix of the rankings ``rows`` (None: all, in order)."""
    import numpy as np

    if rows is not None:
        lens = lens[rows]
        take = np.repeat(starts[rows] - (np.cumsum(lens) - lens), lens)
        flat = flat[np.arange(int(lens.sum())) + take]
        per = [per[k] for k in rows.tolist()]
    nq = len(lens)
    L = int(lens.max(initial=0))
    if nq and int(lens.min()) == L:  # rankings of one length: the grades as they are
        A = np.ascontiguousarray(flat, dtype=np.int64).reshape(nq, L)
    else:
        A = np.full((nq, L), PAD, dtype=np.int64)
        at = np.repeat(np.arange(nq), lens)
        cols = np.arange(len(flat)) - np.repeat(np.cumsum(lens) - lens, lens)
        A[at, cols] = flat
    return Block(A, lens, opts.level, [p[0] for p in per], [p[1] for p in per],
                 [p[2] for p in per], opts)  # fmt: skip


# ----------------------------------------------------------------------------- measures


def _where(np, cond, a, b):
    return np.where(cond, a, b)  # (divisions by zero are masked: :func:`values` ignores them)


def m_num_ret(B, p):
    return [B.n.astype(float)]


def m_num_rel(B, p):
    return [B.R.astype(float)]


def m_num_rel_ret(B, p):
    return [B.nrr.astype(float)]


def m_num_q(B, p):
    return [B.np.ones(B.nq)]


def _ap_sum(B):
    return B.ap_prefix()[:, B.L]


def m_map(B, p):
    np = B.np
    with np.errstate(all="ignore"):
        return [np.where(B.found > 0, _ap_sum(B) / B.R, 0.0)]


def m_gm_map(B, p):
    np = B.np
    s = _ap_sum(B)
    with np.errstate(all="ignore"):
        s = np.where(B.found > 0, s / B.R, s)
    return [np.asarray([math.log(max(v, MIN_GEO_MEAN)) for v in s.tolist()])]


def m_yaap(B, p):
    s = _ap_sum(B).tolist()
    return [
        B.np.asarray(
            [c_log(c_div(1.0 + v, 1.0 + r - v)) for v, r in zip(s, B.R.tolist(), strict=True)]
        )
    ]


def m_Rprec(B, p):
    np = B.np
    k = np.minimum(B.n, B.R)
    cnt = np.take_along_axis(B.pre_rel(), k[:, None], axis=1)[:, 0]
    return [_where(np, k > 0, cnt / B.R, 0.0)]


def _bpref(B):
    def make():
        np = B.np
        level = B.level
        num_nonrel = np.asarray(
            [sum(r[:level]) if level > 0 else 0 for r in B.rel_levels], dtype=np.int64
        )
        A = B.A
        nonrel = B.valid & (A >= 0) & (A < level)
        rel = B.valid & (A >= 0) & ~nonrel
        before = np.cumsum(nonrel, axis=1)
        R = B.R[:, None]
        with np.errstate(all="ignore"):
            part = np.minimum(before, R) / np.minimum(num_nonrel, B.R).astype(float)[:, None]
            terms = np.where(rel, np.where(before > 0, 1.0 - part, 1.0), 0.0)
            s = B.row_sums(terms)
            return np.where(B.R > 0, s / B.R, s)

    return B.cached("bpref", make)


def m_bpref(B, p):
    return [_bpref(B)]


def m_gm_bpref(B, p):
    return [B.np.asarray([math.log(max(v, MIN_GEO_MEAN)) for v in _bpref(B).tolist()])]


def m_recip_rank(B, p):
    np = B.np
    if B.L == 0:
        return [np.zeros(B.nq)]
    first = np.argmax(B.rel, axis=1)
    return [np.where(B.rel.any(axis=1), 1.0 / (first + 1), 0.0)]


def _recall_cutoffs(B, x: float):
    """iprec's cutoff per query: (long)(x * R + 0.9) in 9.0.8, lround(x * R) in 10.0."""
    np = B.np
    v = x * B.R
    if B.opts.version == "9":
        return np.trunc(v + 0.9).astype(np.int64)
    return np.where(v >= 0, np.floor(v + 0.5), -np.floor(-v + 0.5)).astype(np.int64)


def _interpolated(B, percents) -> list:
    """m_iprec_at_recall.c: at the rank of the c-th relevant document, the best precision at
    that rank or below it.

    The C loop walks up from the bottom with rel_so_far = num_rel_ret, one less at each grade
    >= -l: at rank i it holds (grades >= -l in the top i) - extra, extra being how many more
    such grades the ranking has than num_rel_ret (NONPOOL and UNJUDGED with -l below 0), and
    it stops where rel_so_far reaches 0; so cutoff c is met at the (c + extra)-th grade >= -l."""
    np = B.np
    nrr, found = B.nrr, B.found
    with np.errstate(all="ignore"):
        init = np.where(B.n > 0, nrr / B.n, NEG_NAN)
        pre = B.pre_rel()[:, 1:]
        if B.level < 0:
            pre = pre - B.extra[:, None]
        prec = pre / np.arange(1, B.L + 1, dtype=np.float64)
    prec[~B.valid] = -np.inf
    best = np.maximum.accumulate(prec[:, ::-1], axis=1)[:, ::-1]
    at = best[B.rel]  # row by row, the rank of each grade >= -l in order
    offsets = np.cumsum(found) - found + B.extra
    out = []
    for x in percents:
        c = _recall_cutoffs(B, x)
        k = np.clip(c - 1, 0, np.maximum(nrr - 1, 0))
        picked = at[np.minimum(offsets + k, max(len(at) - 1, 0))] if len(at) else np.zeros(B.nq)
        value = np.where(c > nrr, 0.0, picked)
        out.append(np.where(nrr == 0, np.where(c > 0, 0.0, init), value))
    return out


def m_iprec_at_recall(B, p):
    return _interpolated(B, p)


def m_11pt_avg(B, p):
    if not p:
        raise CmrkitError("11pt_avg needs at least one recall point")
    s = 0.0
    for v in reversed(_interpolated(B, p)):  # summed from the last cutoff down
        s = s + v
    return [s / len(p)]


def m_P(B, p):
    pre = B.pre_rel()
    return [B.at(pre, k) / k for k in p]


def _if_relevant(B, pre, p, divisor):
    """For each cutoff k: the prefix value at k over ``divisor(k)``, 0.0 where R is 0."""
    return [B.np.where(B.R > 0, B.at(pre, k) / divisor(k), 0.0) for k in p]


def m_recall(B, p):
    return _if_relevant(B, B.pre_rel(), p, lambda k: B.R)


def m_relative_P(B, p):
    return _if_relevant(B, B.pre_rel(), p, lambda k: B.np.where(k > B.R, B.R, k))


def m_success(B, p):
    np = B.np
    pre = B.pre_rel()
    return [np.where(B.at(pre, k) > 0, 1.0, 0.0) for k in p]


def m_unj(B, p):
    pre = B.prefix("unj", lambda: (B.A == NONPOOL) | (B.A == UNJUDGED))
    return [B.at(pre, k) / k for k in p]


def m_map_cut(B, p):
    return _if_relevant(B, B.ap_prefix(), p, lambda k: B.R)


def m_ndcg_cut(B, p):
    """m_ndcg_cut.c: DCG over the top k with the grades as gains, over the ideal's."""
    np = B.np
    A = B.A
    gains = np.where(B.valid & (A > 0), A, 0).astype(np.float64)
    results = np.zeros((B.nq, B.L + 1))
    np.cumsum(gains / log2_discounts(B.L), axis=1, out=results[:, 1:])
    seqs = []
    for rl, nl in zip(B.rel_levels, B.num_rel_levels, strict=True):
        seq: list[float] = []
        for level in range(nl - 1, 0, -1):
            seq.extend([float(level)] * rl[level])
        seqs.append(seq)
    seq_m, m = B.padded(seqs, max(p))
    W = seq_m.shape[1]
    ideal = np.zeros((B.nq, W + 1))
    np.cumsum(seq_m / log2_discounts(W), axis=1, out=ideal[:, 1:])
    out = []
    for k in p:
        value = results[:, min(k, B.L)]
        i = ideal[:, min(k, W)]
        with np.errstate(all="ignore"):
            out.append(np.where(i > 0.0, value / i, value))
    return out


def _tables(B, p):
    """Per query: gain_init.c's table for the parameters ``p`` (shared: copy before changing)."""
    version = B.opts.version
    return B.cached(
        ("tables", repr(p)),
        lambda: [
            gains(rl, nl, p, version) for rl, nl in zip(B.rel_levels, B.num_rel_levels, strict=True)
        ],
    )


def _dcgs(B, p):
    """m_ndcg.c: (results_dcg, ideal_dcg) per query, each summed term by term in rank order;
    None when the gains or the ideal rankings do not fit the matrix."""
    np = B.np
    got = _gain_setup(B, p)
    if got is None:
        return None
    _, g, _, seq_m, m = got
    results = B.row_sums(g / log2_discounts(B.L))
    W = seq_m.shape[1]
    ideal = np.cumsum(seq_m / log2_discounts(W), axis=1)[:, -1] if W else np.zeros(B.nq)
    return results, ideal


def m_ndcg(B, p):
    d = _dcgs(B, p)
    if d is None:
        return None
    results, ideal = d
    np = B.np
    with np.errstate(all="ignore"):
        return [np.where(ideal > 0.0, results / ideal, 0.0)]


def m_dcg(B, p):
    d = _dcgs(B, p)
    return None if d is None else [d[0]]


def m_ideal_dcg(B, p):
    d = _dcgs(B, p)
    return None if d is None else [d[1]]


def _c_div(np, a, b):
    """C double division elementwise: x/0 is inf, 0/0 the x86 default NaN (printed -nan)."""
    with np.errstate(all="ignore"):
        inf = np.copysign(np.inf, a) * np.copysign(1.0, b)
        zero = np.where((a == 0) | np.isnan(a), NEG_NAN, inf)
        return np.where(b == 0, zero, a / np.where(b == 0, 1.0, b))


def _gain_setup(B, p):
    """(tables, gains of the ranked documents, ideal sequences, their zero-padded matrix at
    least L wide, their lengths); None when the ideal rankings would make the matrix mostly
    padding (the caller then takes the block a row at a time)."""

    def make():
        tables = _tables(B, p)
        g = B.gain_rows([gain_map(t) for t in tables])
        seqs = [ideal_seq(t) for t in tables]
        total = sum(len(s) for s in seqs) + B.nq * B.L
        widest = max([B.L] + [len(s) for s in seqs])
        if B.nq * widest > _SPARSE * total + (1 << 20):
            return False
        seq_m, m = B.padded(seqs)
        if seq_m.shape[1] < B.L:
            seq_m = B.np.pad(seq_m, ((0, 0), (0, B.L - seq_m.shape[1])))
        return tables, g, seqs, seq_m, m

    return B.cached(("gain", repr(p)), make) or None


def m_G(B, p):
    """m_G.c: gain over log2 of (2 + ideal cost so far - gain so far), normalised by the ideal
    gain; the cost of a rank is the ideal gain there, at least 1."""
    got = _gain_setup(B, p)
    if got is None:
        return None
    g, seq_m = got[1], got[3]
    np, L = B.np, B.L
    cost = np.where(seq_m[:, :L] >= 1.0, seq_m[:, :L], 1.0)
    sum_results = np.cumsum(g, axis=1)
    sum_cost = np.cumsum(cost, axis=1)
    nz = g != 0
    arg = 2 + sum_cost[nz] - sum_results[nz]
    whole = arg.astype(np.int64)
    table = log2_discounts(int(whole.max(initial=0)) + 1)
    exact = (whole == arg) & (whole >= 2)
    logs = np.empty(len(arg))
    logs[exact] = table[whole[exact] - 2]  # math.log2(i + 2), the same libm values
    logs[~exact] = [math.log2(x) for x in arg[~exact].tolist()]
    terms = np.zeros(g.shape)
    terms[nz] = g[nz] / logs
    results_g = B.row_sums(terms)
    sum_ideal = np.cumsum(seq_m, axis=1)[:, -1] if seq_m.shape[1] else np.zeros(B.nq)
    return [np.where(sum_ideal > 0.0, results_g / sum_ideal, 0.0)]


def m_ndcg_rel(B, p):
    """m_ndcg_rel.c: the mean over relevant documents of nDCG at their ranks (the ideal's
    relevant beyond the ranking scored with the final nDCG)."""
    np = B.np
    got = _gain_setup(B, p)
    if got is None:
        return None
    _, g, _, seq_m, m = got
    L = B.L
    results = np.cumsum(g / log2_discounts(L), axis=1) if L else np.zeros((B.nq, 0))
    W = seq_m.shape[1]
    ideal = np.cumsum(seq_m / log2_discounts(W), axis=1)
    total_r = results[:, -1] if L else np.zeros(B.nq)
    total_i = ideal[:, -1] if W else np.zeros(B.nq)
    pos = g > 0
    terms = np.where(pos, _c_div(np, results, ideal[:, :L]), 0.0)
    s = B.row_sums(terms)
    s = s + _c_div(np, (m - pos.sum(axis=1)) * total_r, total_i)
    return [np.where(s > 0.0, _c_div(np, s, m.astype(np.float64)), 0.0)]


def m_Rndcg(B, p):
    """m_Rndcg.c: nDCG taken where the ideal ranking's gain changes, averaged."""
    np = B.np
    got = _gain_setup(B, p)
    if got is None:
        return None
    tables, g, _, seq_m, m = got
    walks = []
    for t in tables:
        if not t or t[-1][1] <= 0.0:
            init = t[-1][1] if t else 0.0
            walks.append(([], init, init))
        else:
            runs, stop = ideal_runs(t)
            walks.append((runs, t[-1][1], stop))
    L = B.L
    rp = np.zeros((B.nq, L + 1))
    if L:
        np.cumsum(g / log2_discounts(L), axis=1, out=rp[:, 1:])
    W = seq_m.shape[1]
    ip = np.zeros((B.nq, W + 1))
    if W:
        np.cumsum(seq_m / log2_discounts(W), axis=1, out=ip[:, 1:])
    out = []
    for q, (runs, init, stop) in enumerate(walks):
        if B.R[q] == 0:
            out.append(0.0)
            continue
        n, mq = int(B.n[q]), int(m[q])
        rpq, ipq = rp[q], ip[q]
        s = 0.0
        changed = 0
        if init > 0.0:  # the gain changes at the start of a run and where the walk stops
            old = init
            j = 0
            for gain, count in [*runs, (stop, 0)]:
                if gain != old:
                    ideal = float(ipq[min(j, mq)])
                    if ideal > 0.0:
                        s += float(rpq[min(j, n)]) / ideal
                        changed += 1
                    old = gain
                j += count
            end1 = min(n, mq + 1)
        else:
            end1 = 0
        if end1 < n and ipq[mq] > 0.0:  # documents ranked below the ideal's last relevant
            s += float(rpq[n]) / float(ipq[mq])
            changed += 1
        if changed:
            out.append(s / changed)
        else:
            out.append(NEG_NAN if s == 0 or math.isnan(s) else math.copysign(math.inf, s))
    return [out]


def m_infAP(B, p):
    """m_infap.c, term by term in rank order."""
    np = B.np
    A = B.A
    level = B.level
    nonrel = B.valid & (A >= 0) & (A < level)
    rel = B.valid & (A >= 0) & ~nonrel
    r = np.cumsum(rel, axis=1) - 1  # relevant above
    nr = np.cumsum(nonrel, axis=1)
    unj = np.cumsum(A == UNJUDGED, axis=1)
    fj = np.broadcast_to(np.arange(B.L, dtype=np.float64), A.shape)
    with np.errstate(all="ignore"):
        terms = 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((r + nr + unj) / fj) * (
            (r + INFAP_EPSILON) / ((r + nr) + 2 * INFAP_EPSILON)
        )
        if B.L:
            terms[:, 0] = 1.0
        s = B.row_sums(np.where(rel, terms, 0.0))
        return [np.where(B.R > 0, s / B.R, s)]


def m_Rprec_mult(B, p):
    """m_Rprec_mult.c: precision at rank c = (long)(x * R + 0.9); past the ranking, the
    relevant retrieved over c; 0 above the first relevant document. (With -l below 0 the C
    loop's rel_so_far at rank c is the grades >= -l in the top c less ``extra``; see
    :func:`_interpolated`.)"""
    np = B.np
    pre = B.pre_rel()
    out = []
    for x in p:
        c = np.trunc(x * B.R + 0.9).astype(np.int64)
        cnt = np.take_along_axis(pre, np.clip(c, 0, B.L)[:, None], axis=1)[:, 0] - B.extra
        with np.errstate(all="ignore"):
            value = np.where((c > 0) & (cnt > 0), cnt / c, 0.0)
            out.append(np.where(c > B.n, B.nrr / c, value))
    return out


def m_utility(B, p):
    if len(p) != 4:
        raise CmrkitError(
            f"utility takes 4 coefficients (utility.a,b,c,d), not {len(p)}; e.g. utility.1,-1,0,0"
        )
    n, R, nrr = B.n, B.R, B.nrr
    N = B.opts.num_docs_in_coll
    return [p[0] * nrr + p[1] * (n - nrr) + p[2] * (R - nrr) + p[3] * (N + nrr - n - R)]


def m_binG(B, p):
    """m_binG.c: 1 / log2(2 + non-relevant above) per relevant document, over R."""
    np = B.np
    before = np.arange(B.L)[None, :] - B.pre_rel()[:, :-1]
    l2 = log2_discounts(B.L + 1)
    with np.errstate(all="ignore"):
        terms = np.where(B.rel, 1.0 / l2[before], 0.0)
        s = B.row_sums(terms)
        return [np.where(B.found > 0, s / B.R, 0.0)]


def rbp_persistence(p) -> float:
    """rbp's p (0.9 unless ``rbp.p=X``)."""
    value = 0.9
    for name, v in p or ():
        if name == "p":
            value = float(v)
    return value


def _powers(B, persistence: float, n: int):
    """1, p, p*p, ... multiplied one by one as m_rbp.c does."""
    np = B.np
    steps = np.full(n, persistence)
    if n:
        steps[0] = 1.0
    return np.cumprod(steps)


def m_rbp(B, p):
    np = B.np
    persistence = rbp_persistence(p)
    gmaps = []
    for table in [[list(g) for g in t] for t in _tables(B, p)]:
        # m_rbp.c leaves min and max uninitialised; built without optimisation they start at 0
        lo = min([0.0] + [g[1] for g in table])
        hi = max([0.0] + [g[1] for g in table])
        if lo < 0 or hi > 1:
            for g in table:
                g[1] = (g[1] - lo) / (hi - lo)
        gmaps.append(gain_map(table))
    g = B.gain_rows(gmaps)
    s = B.row_sums(g * _powers(B, persistence, B.L))
    return [np.where(B.n > 0, (1.0 - persistence) * s, 0.0)]


def m_rbp_resid(B, p):
    np = B.np
    persistence = rbp_persistence(p)
    unj = B.valid & (B.A < 0)
    cur_p = _powers(B, persistence, B.L + 1)
    s = B.row_sums(np.where(unj, cur_p[: B.L], 0.0))
    value = cur_p[B.n] + (1 - persistence) * s
    return [np.where((B.n > 0) & unj.any(axis=1), value, 0.0)]


def m_set_P(B, p):
    return [_where(B.np, B.n > 0, B.nrr / B.n, 0.0)]


def m_set_relative_P(B, p):
    np = B.np
    return [_where(np, (B.n > 0) & (B.R > 0), B.nrr / np.minimum(B.n, B.R), 0.0)]


def m_set_recall(B, p):
    return [_where(B.np, B.R > 0, B.nrr / B.R, 0.0)]


def m_set_map(B, p):
    np = B.np
    nrr = B.nrr.astype(float)
    return [_where(np, (B.n > 0) & (B.R > 0), (nrr * nrr) / (B.n.astype(float) * B.R), 0.0)]


def m_set_F(B, p):
    np = B.np
    x = p[0]
    with np.errstate(all="ignore"):
        P = B.nrr / B.n
        R = B.nrr / B.R
        return [np.where(B.nrr > 0, (x + 1.0) * P * R / (x * P + R), 0.0)]


def m_num_nonrel_judged_ret(B, p):
    np = B.np
    nonpool = (B.A == NONPOOL).sum(axis=1)
    unjudged = (B.A == UNJUDGED).sum(axis=1)
    return [(B.n - nonpool - unjudged - B.nrr).astype(np.float64)]


_CHARS = {NONPOOL: "-", UNJUDGED: "."}


def m_relstring(B, p):
    k = int(p[0])
    rows = B.A[:, : max(min(k, B.L), 0)].tolist()
    out = []
    for row, n in zip(rows, B.n.tolist(), strict=True):
        chars = []
        for r in row[: max(min(k, n), 0)]:
            if r > 9:
                chars.append(">")
            elif r >= 0:
                chars.append(chr(48 + r))
            else:
                chars.append(_CHARS.get(r, "<"))
        out.append("".join(chars))
    return [out]


MEASURES: dict[str, Callable] = {
    name[2:]: fn for name, fn in list(globals().items()) if name.startswith("m_")
}


def values(B: Block, columns) -> list:
    """One list per printed value name (a value per row of the block), for ``columns``; a
    family that does not fit the block (gains whose ideal rankings would make it mostly
    padding) is computed a row at a time."""
    out: list = []
    for col in columns:
        name = col.family.name
        if name == "runid":
            continue
        fn = MEASURES[name]
        with B.np.errstate(all="ignore"):
            got = fn(B, col.params)
            if got is None:
                rows = [fn(B.row(k), col.params) for k in range(B.nq)]
                got = [[r[j][0] for r in rows] for j in range(len(col.names))]
        out.extend(v if isinstance(v, list) else v.tolist() for v in got)
    return out
