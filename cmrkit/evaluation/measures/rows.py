"""trec_eval's measures of whole rows, each defined beside its one kernel: Rprec, bpref,
interpolated precision, relative_P, unj, Rprec_mult, utility, binG, rbp, the set measures,
num_nonrel_judged_ret and relstring.

Their kernels run on trec_eval's matrices (``trec_bulk.Block``: a row of grades per query,
NONPOOL and UNJUDGED marked, with form_res_rels.c's relevance levels) and are named after the
C files they port (``m_bpref`` is m_bpref.c): the same double operations in the same order,
so every value is bitwise trec_eval's. The ranking engine hands them a matrix of its rankings.
"""

from __future__ import annotations

import math

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures.base import (
    CUT_DOUBLE,
    CUT_LONG,
    GEOMETRIC,
    NO_SUMMARY,
    NONPOOL,
    P_DOUBLE,
    P_PAIR,
    SUM,
    UNJUDGED,
    Family,
    Kind,
    define,
)
from cmrkit.evaluation.measures.cmath import NEG_NAN
from cmrkit.evaluation.measures.dcg import discounts, gain_map, gain_tables
from cmrkit.evaluation.measures.ranked import MIN_GEO_MEAN

_LONG9 = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_RECALL11 = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_RPREC = (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)
_CHARS = {NONPOOL: "-", UNJUDGED: "."}


def _where(np, cond, a, b):
    return np.where(cond, a, b)  # (divisions by zero are masked: :func:`values` ignores them)


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


def _if_relevant(B, pre, p, divisor):
    """For each cutoff k: the prefix value at k over ``divisor(k)``, 0.0 where R is 0."""
    return [B.np.where(B.R > 0, B.at(pre, k) / divisor(k), 0.0) for k in p]


def m_relative_P(B, p):
    return _if_relevant(B, B.pre_rel(), p, lambda k: B.np.where(k > B.R, B.R, k))


def m_unj(B, p):
    pre = B.prefix("unj", lambda: (B.A == NONPOOL) | (B.A == UNJUDGED))
    return [B.at(pre, k) / k for k in p]


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
    l2 = discounts(B.L + 1)
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
    for table in [[list(g) for g in t] for t in gain_tables(B, p)]:
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


define(
    Family("runid", summary=NO_SUMMARY, per_query=False, help="the run's tag"),
    Family("Rprec", ir_name="Rprec", help="precision after R documents", kernel=m_Rprec),
    Family("bpref", ir_name="Bpref", help="binary preference", kernel=m_bpref),
    Family("iprec_at_recall", CUT_DOUBLE, _RECALL11, ir_name="IPrec",
           help="interpolated precision at recall levels (10.0 rounds the cutoff, 9.0.8 adds "
           "0.9 and truncates)", kernel=m_iprec_at_recall),
    Family("relstring", P_DOUBLE, (10.0,), summary=NO_SUMMARY,
           help="relevance of the top N documents as a string", kernel=m_relstring),
    Family("gm_bpref", summary=GEOMETRIC, per_query=False, help="geometric mean of bpref",
           kernel=m_gm_bpref),
    Family("Rprec_mult", CUT_DOUBLE, _RPREC, help="precision at x*R documents",
           kernel=m_Rprec_mult),
    Family("utility", P_DOUBLE, (1.0, -1.0, 0.0, 0.0),
           help="a*rel_ret + b*nonrel_ret + c*rel_nonret + d*nonrel_nonret", kernel=m_utility),
    Family("11pt_avg", P_DOUBLE, _RECALL11,
           help="mean interpolated precision at the recall points", kernel=m_11pt_avg),
    Family("binG", help="binary G (Dupret)", kernel=m_binG),
    Family("relative_P", CUT_LONG, _LONG9, help="P@k divided by the best possible P@k",
           kernel=m_relative_P),
    Family("set_P", ir_name="SetP", help="precision of the retrieved set", kernel=m_set_P),
    Family("set_relative_P", help="set_P divided by the best possible",
           kernel=m_set_relative_P),
    Family("set_recall", ir_name="SetR", help="recall of the retrieved set",
           kernel=m_set_recall),
    Family("set_map", ir_name="SetAP", help="set_P * set_recall", kernel=m_set_map),
    Family("set_F", P_DOUBLE, (1.0,), ir_name="SetF", help="F measure of the retrieved set",
           kernel=m_set_F),
    Family("num_nonrel_judged_ret", summary=SUM, integer=True, ir_name="NumNonRelJudgedRet",
           help="judged non-relevant documents retrieved", kernel=m_num_nonrel_judged_ret),
    Family("Rprec_mult_avgjg", CUT_DOUBLE, _RPREC, rel_format="qrels_jg",
           help="Rprec_mult averaged over judgment groups", averages="Rprec_mult"),
    Family("rbp", P_PAIR, versions=("10",), ir_name="RBP",
           help="rank-biased precision (p=0.9 unless rbp.p=X)", kernel=m_rbp),
    Family("rbp_resid", P_PAIR, versions=("10",), help="RBP residual of unjudged documents",
           kernel=m_rbp_resid),
    Family("unj", CUT_LONG, (5, 10, 20), versions=("10",),
           help="fraction of the top k not judged", kernel=m_unj),
    Kind("Bpref", "binary preference (bpref)"),
    Kind("Rprec", "precision at rank R (Rprec)"),
)  # fmt: skip
