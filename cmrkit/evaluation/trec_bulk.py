"""trec_eval's padded matrices, a data layout of its qrels measures: every evaluated query's
ranking at once, with numpy.

The rankings of the evaluated queries are padded matrices (a row per query, its grades in rank
order; rankings of similar lengths share one, :func:`evaluate_rows`), with form_res_rels.c's
counts per row (:class:`Block`). Each family's kernel (``measures/``, registered beside its
definition) computes the C program's per-query values row-wise: the same double operations in
the same order (sums are sequential ``cumsum`` along a row; the padding adds ``0.0``, which
leaves a double unchanged), so every value is bitwise the C program's. A Block offers what
every ranking layout does (``measures/base.py``: counts of a class of documents in the top k,
their hits, sums in rank order, the ideal gains) and the rows themselves, which trec_eval's
other kernels (``measures/rows.py``, ``dcg.py``'s gain measures) read.

Also what the layouts share: the relevance-level statics of form_res_rels.c (:func:`levels`),
each query's judged grades (:func:`judged_grades`) and the bound on grades
(:func:`check_grades`).
"""

from __future__ import annotations

from collections.abc import Sequence

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures.base import NONPOOL, SPARSE, UNJUDGED

PAD = -(1 << 40)  # below every grade and -l level: the cells past a ranking's end
# form_res_rels.c keeps a counter per grade from 0 to the highest, for every query: a grade of
# 2147483648 makes trec_eval fail (or crash) and would take tens of GB here
MAX_GRADE = 1_000_000


# ----------------------------------------------------------------------------- shared pieces


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

    # ------------------------------------------------ what every ranking layout offers

    def mask(self, cls: str):
        """Which cells hold a document of class ``cls`` (``measures/base.py``)."""
        A, valid, level = self.A, self.valid, self.level
        masks = {
            "rel": lambda: self.rel,
            "judged_rel": lambda: valid & (A >= 0) & (A >= level),
            "nonrel": lambda: valid & (A >= 0) & (A < level),
            "unjudged": lambda: A == UNJUDGED,
            "nonpool": lambda: A == NONPOOL,
            "judged": lambda: valid & (A != NONPOOL),
            "unj": lambda: (A == NONPOOL) | (A == UNJUDGED),
            "gain": lambda: valid & (A > 0),
        }
        return self.cached(("mask", cls), masks[cls])

    def count(self, cls: str, k: int | None):
        """Documents of class ``cls`` in each row's top ``k`` (None: the whole row)."""
        return self.at(self.prefix(cls, lambda: self.mask(cls)), self.L if k is None else k)

    def first(self, cls: str):
        """The 0-based rank of each row's first document of class ``cls``, -1 where none."""
        np = self.np
        if self.L == 0:
            return np.full(self.nq, -1, dtype=np.int64)
        m = self.mask(cls)
        return np.where(m.any(axis=1), np.argmax(m, axis=1), -1)

    def hits(self, cls: str) -> _BlockHits:
        return self.cached(("hits", cls), lambda: _BlockHits(self, cls))

    def total(self, hits: _BlockHits, terms, cutoffs) -> list:
        """Each row's ``terms`` at its hits added one by one from the left, over the top k of
        each cutoff (None: the whole row)."""
        np = self.np
        sums = np.zeros((self.nq, self.L + 1))
        if self.L:
            np.cumsum(np.where(hits.mask, terms, 0.0), axis=1, out=sums[:, 1:])
        return [self.at(sums, self.L if k is None else k) for k in cutoffs]

    def ideal_gains(self):
        """The ideal ranking's gains (the grades, from the relevance levels of
        form_res_rels.c: a query whose grades are all negative sees the previous query's, as
        in C), highest first, one row after another, and how many each row has."""
        np = self.np
        gains: list[float] = []
        sizes = []
        for rl, nl in zip(self.rel_levels, self.num_rel_levels, strict=True):
            start = len(gains)
            for level in range(nl - 1, 0, -1):
                gains.extend([float(level)] * rl[level])
            sizes.append(len(gains) - start)
        return np.asarray(gains, dtype=np.float64), np.asarray(sizes, dtype=np.int64)

    # ------------------------------------------------ the rows themselves

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


class _BlockHits:
    """The documents of one class in every row, in rank order, as matrices over the cells
    (``mask`` marks them; ``rank`` is a row of ranks that broadcasts over the rows)."""

    def __init__(self, block: Block, cls: str) -> None:
        self.block, self.cls = block, cls
        self.mask = block.mask(cls)
        self.rank = block.np.arange(block.L)
        self.ordinal = block.prefix(cls, lambda: self.mask)[:, 1:]
        self.grade = block.A

    def before(self, cls: str):
        b = self.block
        return b.prefix(cls, lambda: b.mask(cls))[:, :-1]


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
    if nq * int(lens.max(initial=0)) <= SPARSE * total + (1 << 20):
        return [None]
    order = np.argsort(lens, kind="stable")
    ordered = lens[order].tolist()
    chunks = []
    start = 0
    while start < nq:
        end, size = start + 1, ordered[start]
        while end < nq and (end + 1 - start) * ordered[end] <= SPARSE * (size + ordered[end]) + (
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


def values(B: Block, columns) -> list:
    """One list per printed value name (a value per row of the block), for ``columns``; a
    family that does not fit the block (gains whose ideal rankings would make it mostly
    padding) is computed a row at a time."""
    out: list = []
    for col in columns:
        name = col.family.name
        if name == "runid":
            continue
        fam = col.family
        with B.np.errstate(all="ignore"):
            got = fam.compute(B, col.params)
            if got is None:
                rows = [fam.compute(B.row(k), col.params) for k in range(B.nq)]
                got = [[r[j][0] for r in rows] for j in range(len(col.names))]
        out.extend(v if isinstance(v, list) else v.tolist() for v in got)
    return out


_MOVED = {  # old name -> (its module now, its name there): kept for one release
    "MIN_GEO_MEAN": ("cmrkit.evaluation.measures.ranked", "MIN_GEO_MEAN"),
    "INFAP_EPSILON": ("cmrkit.evaluation.measures.ranked", "INFAP_EPSILON"),
    "NEG_NAN": ("cmrkit.evaluation.measures.cmath", "NEG_NAN"),
    "c_div": ("cmrkit.evaluation.measures.cmath", "c_div"),
    "c_log": ("cmrkit.evaluation.measures.cmath", "c_log"),
    "log2_discounts": ("cmrkit.evaluation.measures.dcg", "discounts"),
    "gains": ("cmrkit.evaluation.measures.dcg", "gains"),
    "gain_map": ("cmrkit.evaluation.measures.dcg", "gain_map"),
    "ideal_runs": ("cmrkit.evaluation.measures.dcg", "ideal_runs"),
    "ideal_walk": ("cmrkit.evaluation.measures.dcg", "ideal_walk"),
    "ideal_seq": ("cmrkit.evaluation.measures.dcg", "ideal_seq"),
    "rbp_persistence": ("cmrkit.evaluation.measures.rows", "rbp_persistence"),
}


def __getattr__(name: str):
    """The names that moved to ``measures/`` (one release, with a DeprecationWarning); the old
    ``MEASURES`` table and its ``m_NAME`` functions are each family's kernel now."""
    import warnings

    from cmrkit.evaluation.measures import trec as defs
    from cmrkit.evaluation.moved import moved

    if name == "MEASURES" or (name.startswith("m_") and name[2:] in defs.BY_NAME):
        warnings.warn(
            f"{__name__}.{name} is now each family's kernel "
            "(cmrkit.evaluation.measures.trec.BY_NAME[name].compute); the old name goes in the "
            "next release",
            DeprecationWarning,
            stacklevel=2,
        )
        qrels = [f for f in defs.FAMILIES if f.kernel is not None and f.rel_format == "qrels"]
        table = {f.name: f.compute for f in qrels}
        return table if name == "MEASURES" else table[name[2:]]
    return moved(__name__, name, _MOVED)
