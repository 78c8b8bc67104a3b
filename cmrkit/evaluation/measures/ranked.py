"""The measures of a ranking's relevant documents, each defined beside its one kernel: the
counts, AP (``map``, ``map_cut``, ``gm_map``, ``yaap``), infAP, RR, P, R, Success, and
ir_measures' Judged@k (and RR@k, cmrkit's own).

The kernels run on any ranking layout (``base.RANKED``: trec_eval's matrices, the ranking
engine's flat arrays, rescoring's hits) and follow trec_eval's C files operation for operation
(m_map.c, m_map_cut.c, m_infap.c, m_P.c, m_recall.c, m_recip_rank.c, m_success.c): the same
double operations in the same order, so the values are bitwise trec_eval's on every layout.
"""

from __future__ import annotations

import math

from cmrkit.evaluation.measures.base import (
    CUT_LONG,
    CUTOFF,
    CUTOFF_REQUIRED,
    GEOMETRIC,
    NUM_Q,
    NUM_REL,
    RANKED,
    SUM,
    Family,
    Kind,
    define,
)
from cmrkit.evaluation.measures.cmath import c_div, c_log

INFAP_EPSILON = 0.00001  # trec_eval's INFAP_EPSILON
MIN_GEO_MEAN = 0.00001  # trec_eval's MIN_GEO_MEAN
_LONG9 = (5, 10, 15, 20, 30, 100, 200, 500, 1000)


def _np():
    import numpy as np

    return np


# ----------------------------------------------------------------------------- counts


def num_ret(L, cutoffs):
    return [L.n.astype(float)]


def num_rel(L, cutoffs):
    return [L.R.astype(float)]


def num_rel_ret(L, cutoffs):
    return [L.nrr.astype(float)]


def num_q(L, cutoffs):
    return [_np().ones(L.nq)]


define(
    Family("num_q", summary=NUM_Q, integer=True, per_query=False, ir_name="NumQ",
           help="number of queries evaluated", kernel=num_q, layout=RANKED),
    Family("num_ret", summary=SUM, integer=True, ir_name="NumRet",
           help="documents retrieved", kernel=num_ret, layout=RANKED),
    Family("num_rel", summary=NUM_REL, integer=True, ir_name="NumRel",
           help="relevant documents (rel >= -l)", kernel=num_rel, layout=RANKED),
    Family("num_rel_ret", summary=SUM, integer=True, ir_name="NumRelRet",
           help="relevant documents retrieved", kernel=num_rel_ret, layout=RANKED),
    Kind("NumRel", "number of relevant documents"),
    Kind("NumRet", "number of retrieved documents"),
    Kind("NumRelRet", "number of relevant documents retrieved"),
    Kind("NumQ", "number of queries evaluated"),
)  # fmt: skip


# ----------------------------------------------------------------------------- AP


def ap_sums(L, cutoffs):
    """The AP sum over each cutoff's top k, term by term as m_map.c adds them: at each
    relevant document, the relevant so far over its rank."""
    h = L.hits("rel")
    return L.total(h, h.ordinal / (h.rank + 1.0), cutoffs)


def ap(L, cutoffs):
    """m_map.c (cutoff None: 0 unless a relevant document is ranked) and m_map_cut.c (0 where
    the query has no relevant judgment)."""
    np = _np()
    out = []
    for k, s in zip(cutoffs, ap_sums(L, cutoffs), strict=True):
        guard = L.found > 0 if k is None else L.R > 0
        out.append(np.where(guard, s / L.R, 0.0))
    return out


def gm_ap(L, cutoffs):
    """m_gm_map.c: the log of AP, at least MIN_GEO_MEAN (the summary is exp of the mean)."""
    np = _np()
    (s,) = ap_sums(L, [None])
    s = np.where(L.found > 0, s / L.R, s)
    return [np.asarray([math.log(max(v, MIN_GEO_MEAN)) for v in s.tolist()])]


def yaap(L, cutoffs):
    """m_yaap.c: log((1 + AP sum) / (1 + R - AP sum)), as C divides and logs."""
    (s,) = ap_sums(L, [None])
    pairs = zip(s.tolist(), L.R.tolist(), strict=True)
    return [_np().asarray([c_log(c_div(1.0 + v, 1.0 + r - v)) for v, r in pairs])]


define(
    Family("map", ir_name="AP", help="mean average precision", kernel=ap, layout=RANKED),
    Family("gm_map", summary=GEOMETRIC, per_query=False,
           help="geometric mean of AP (each AP at least 0.00001)", kernel=gm_ap, layout=RANKED),
    Family("map_cut", CUT_LONG, _LONG9, ir_name="AP", help="AP over the top k", kernel=ap,
           layout=RANKED),
    Family("yaap", help="yet another AP (Robertson)", kernel=yaap, layout=RANKED),
    Family("map_avgjg", rel_format="qrels_jg", help="map averaged over judgment groups",
           averages="map"),
    Kind("AP", "average precision (AP@k: map_cut_k, divides by all relevant)", (CUTOFF,)),
)  # fmt: skip


# ----------------------------------------------------------------------------- infAP


def infap(L, cutoffs):
    """m_infap.c, term by term in rank order: at each judged relevant document at rank k + 1
    (k above it, of which r relevant, n judged non-relevant and u pooled but unjudged),
    1/(k+1) + k/(k+1) * (r+n+u)/k * (r+eps)/(r+n+2eps); 1 at the first rank."""
    np = _np()
    h = L.hits("judged_rel")
    before = h.ordinal - 1
    nonrel = h.before("nonrel")
    fj = h.rank.astype(np.float64)
    x = (before + nonrel + h.before("unjudged")) / fj
    y = (before + INFAP_EPSILON) / ((before + nonrel) + 2 * INFAP_EPSILON)
    terms = np.where(h.rank == 0, 1.0, 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * x * y)
    (s,) = L.total(h, terms, [None])
    return [np.where(L.R > 0, s / L.R, s)]


define(
    Family("infAP", ir_name="infAP", help="inferred AP (Yilmaz & Aslam 2006)", kernel=infap,
           layout=RANKED),
    Kind("infAP", "inferred AP (Yilmaz & Aslam 2006): negative grades are pooled but unjudged"),
)  # fmt: skip


# ----------------------------------------------------------------------------- RR


def rr(L, cutoffs):
    """m_recip_rank.c: 1 over the rank of the first relevant document; RR@k (cmrkit's own,
    trec_eval has no cutoff): 0 when it is below rank k."""
    np = _np()
    first = L.first("rel")
    out = []
    for k in cutoffs:
        ok = first >= 0 if k is None else (first >= 0) & (first < k)
        out.append(np.where(ok, 1.0 / (np.maximum(first, 0) + 1.0), 0.0))
    return out


define(
    Family("recip_rank", ir_name="RR", help="reciprocal rank of the first relevant document",
           kernel=rr, layout=RANKED),
    Kind("RR", "reciprocal rank of the first relevant document (RR@k: 0 below rank k)",
         (CUTOFF,), kernel=rr),
)  # fmt: skip


# ----------------------------------------------------------------------------- at a cutoff


def precision(L, cutoffs):
    """m_P.c: relevant documents in the top k over k."""
    return [L.count("rel", k) / k for k in cutoffs]


def recall(L, cutoffs):
    """m_recall.c: relevant documents in the top k over all relevant (0 without any)."""
    np = _np()
    return [np.where(L.R > 0, L.count("rel", k) / L.R, 0.0) for k in cutoffs]


def success(L, cutoffs):
    """m_success.c: 1 when a relevant document is in the top k."""
    np = _np()
    return [np.where(L.count("rel", k) > 0, 1.0, 0.0) for k in cutoffs]


def judged(L, cutoffs):
    """ir_measures' Judged@k: the share of the top k (of the whole ranking when shorter) that
    the qrels hold with any grade; 0 for an empty ranking."""
    np = _np()
    out = []
    for k in cutoffs:
        head = np.minimum(L.n, k)
        out.append(np.where(head > 0, L.count("judged", k) / np.maximum(head, 1), 0.0))
    return out


define(
    Family("P", CUT_LONG, _LONG9, ir_name="P", help="precision at k", kernel=precision,
           layout=RANKED),
    Family("recall", CUT_LONG, _LONG9, ir_name="R", help="recall at k", kernel=recall,
           layout=RANKED),
    Family("success", CUT_LONG, (1, 5, 10), ir_name="Success",
           help="1 if a relevant document is in the top k", kernel=success, layout=RANKED),
    Family("P_avgjg", CUT_LONG, _LONG9, rel_format="qrels_jg",
           help="P@k averaged over judgment groups", averages="P"),
    Kind("R", "recall at k (recall_k)", (CUTOFF_REQUIRED,)),
    Kind("P", "precision at k (P_k)", (CUTOFF_REQUIRED,)),
    Kind("Success", "1 if a relevant document is in the top k (success_k)", (CUTOFF_REQUIRED,)),
    Kind("Judged", "fraction of the top k present in the qrels, any grade (ir_measures Judged@k)",
         (CUTOFF_REQUIRED,), kernel=judged),
)  # fmt: skip
