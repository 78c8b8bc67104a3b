"""The discounted cumulative gain family, each measure defined beside its one kernel: nDCG@k
(``ndcg_cut``, cmrkit's ``nDCG@k``), and trec_eval's gain-table measures ``ndcg`` (cmrkit's
``nDCG``), ``dcg``, ``ideal_dcg``, ``ndcg_rel``, ``Rndcg`` and ``G``; with gain_init.c's gain
tables and the ideal ranking's DCG (:func:`ideal_dcg`), the one computation of it.

Ranks are discounted by log2(rank + 1) from Python's ``math`` (libm, as C), never numpy; sums
run in rank order, term by term (m_ndcg.c, m_ndcg_cut.c, m_ndcg_rel.c, m_Rndcg.c, m_G.c,
m_dcg.c, m_ideal_dcg.c), so every value is bitwise trec_eval's. ``ndcg_cut`` runs on any
ranking layout, the gain-table measures on trec_eval's matrices (``trec_bulk.Block``).
"""

from __future__ import annotations

import math
import re
from functools import cmp_to_key

from cmrkit.evaluation.measures.base import (
    CUT_LONG,
    CUTOFF,
    P_PAIR,
    RANKED,
    SPARSE,
    Family,
    Kind,
    define,
    sequential_sums,
    within,
)
from cmrkit.evaluation.measures.cmath import NEG_NAN, c_divide
from cmrkit.trec import c_atol

_LONG9 = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_L2: list[float] = []  # _L2[i] == math.log2(i + 2), the rank discount, grown on demand
_L2_ARRAY: list = [None]


def discounts(n: int):
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


def ideal_dcg(gains, counts, cutoffs) -> list:
    """The ideal ranking's DCG over each cutoff's top k (None: all) for every query: its
    positive gains ``gains``, highest first, ``counts[q]`` of query q one query after another,
    each over log2(rank + 1), added one by one from the top (numpy arrays)."""
    import numpy as np

    pos = within(counts)
    if None not in cutoffs:  # gains below the deepest cutoff count nothing
        keep = pos < max(cutoffs)
        gains, pos, counts = gains[keep], pos[keep], np.minimum(counts, max(cutoffs))
    terms = gains / discounts(int(counts.max(initial=0)))[pos]
    picks = [counts if k is None else np.minimum(counts, k) for k in cutoffs]
    return sequential_sums(terms, counts, picks)


def ndcg_at(L, cutoffs):
    """m_ndcg_cut.c: the DCG of the top k with the grades as gains over the ideal ranking's
    (the DCG itself where the ideal's is 0); cutoff None (cmrkit's rescoring): the whole
    ranking."""
    import numpy as np

    h = L.hits("gain")
    width = int(h.rank.max(initial=-1)) + 1
    terms = h.grade / discounts(width)[h.rank]
    got = L.total(h, terms, cutoffs)
    ideals = ideal_dcg(*L.ideal_gains(), cutoffs)
    return [np.where(i > 0.0, d / i, d) for d, i in zip(got, ideals, strict=True)]


def gain_tables(B, p):
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
    import itertools

    np = B.np
    got = _gain_setup(B, p)
    if got is None:
        return None
    _, g, seqs, _, m = got
    results = B.row_sums(g / discounts(B.L))
    flat = np.fromiter(itertools.chain.from_iterable(seqs), np.float64, int(m.sum()))
    (ideal,) = ideal_dcg(flat, m, [None])
    return results, ideal


def ndcg(B, p):
    d = _dcgs(B, p)
    if d is None:
        return None
    results, ideal = d
    np = B.np
    with np.errstate(all="ignore"):
        return [np.where(ideal > 0.0, results / ideal, 0.0)]


def dcg(B, p):
    d = _dcgs(B, p)
    return None if d is None else [d[0]]


def ideal_dcg_values(B, p):
    d = _dcgs(B, p)
    return None if d is None else [d[1]]


def _gain_setup(B, p):
    """(tables, gains of the ranked documents, ideal sequences, their zero-padded matrix at
    least L wide, their lengths); None when the ideal rankings would make the matrix mostly
    padding (the caller then takes the block a row at a time)."""

    def make():
        tables = gain_tables(B, p)
        g = B.gain_rows([gain_map(t) for t in tables])
        seqs = [ideal_seq(t) for t in tables]
        total = sum(len(s) for s in seqs) + B.nq * B.L
        widest = max([B.L] + [len(s) for s in seqs])
        if B.nq * widest > SPARSE * total + (1 << 20):
            return False
        seq_m, m = B.padded(seqs)
        if seq_m.shape[1] < B.L:
            seq_m = B.np.pad(seq_m, ((0, 0), (0, B.L - seq_m.shape[1])))
        return tables, g, seqs, seq_m, m

    return B.cached(("gain", repr(p)), make) or None


def cumulative_gain(B, p):
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
    table = discounts(int(whole.max(initial=0)) + 1)
    exact = (whole == arg) & (whole >= 2)
    logs = np.empty(len(arg))
    logs[exact] = table[whole[exact] - 2]  # math.log2(i + 2), the same libm values
    logs[~exact] = [math.log2(x) for x in arg[~exact].tolist()]
    terms = np.zeros(g.shape)
    terms[nz] = g[nz] / logs
    results_g = B.row_sums(terms)
    sum_ideal = np.cumsum(seq_m, axis=1)[:, -1] if seq_m.shape[1] else np.zeros(B.nq)
    return [np.where(sum_ideal > 0.0, results_g / sum_ideal, 0.0)]


def ndcg_rel(B, p):
    """m_ndcg_rel.c: the mean over relevant documents of nDCG at their ranks (the ideal's
    relevant beyond the ranking scored with the final nDCG)."""
    np = B.np
    got = _gain_setup(B, p)
    if got is None:
        return None
    _, g, _, seq_m, m = got
    L = B.L
    results = np.cumsum(g / discounts(L), axis=1) if L else np.zeros((B.nq, 0))
    W = seq_m.shape[1]
    ideal = np.cumsum(seq_m / discounts(W), axis=1)
    total_r = results[:, -1] if L else np.zeros(B.nq)
    total_i = ideal[:, -1] if W else np.zeros(B.nq)
    pos = g > 0
    terms = np.where(pos, c_divide(np, results, ideal[:, :L]), 0.0)
    s = B.row_sums(terms)
    s = s + c_divide(np, (m - pos.sum(axis=1)) * total_r, total_i)
    return [np.where(s > 0.0, c_divide(np, s, m.astype(np.float64)), 0.0)]


def rndcg(B, p):
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
        np.cumsum(g / discounts(L), axis=1, out=rp[:, 1:])
    W = seq_m.shape[1]
    ip = np.zeros((B.nq, W + 1))
    if W:
        np.cumsum(seq_m / discounts(W), axis=1, out=ip[:, 1:])
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


define(
    Family("dcg", P_PAIR, versions=("10",), help="discounted cumulative gain", kernel=dcg),
    Family("ideal_dcg", P_PAIR, versions=("10",), help="ideal discounted cumulative gain",
           kernel=ideal_dcg_values),
    Family("ndcg", P_PAIR, ir_name="nDCG", help="normalized DCG, gains = rel levels",
           kernel=ndcg),
    Family("ndcg_rel", P_PAIR, help="nDCG averaged over relevant documents", kernel=ndcg_rel),
    Family("Rndcg", P_PAIR, help="nDCG averaged at the rank of each gain change", kernel=rndcg),
    Family("ndcg_cut", CUT_LONG, _LONG9, ir_name="nDCG", help="nDCG at k", kernel=ndcg_at,
           layout=RANKED),
    Family("G", P_PAIR, help="normalized cumulative gain with a cost (Dupret)",
           kernel=cumulative_gain),
    Kind("nDCG", "normalized DCG with the grades as gains (nDCG@k: ndcg_cut_k)", (CUTOFF,)),
)  # fmt: skip
