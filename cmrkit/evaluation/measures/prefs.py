"""trec_eval's preference measures (``-R prefs`` and ``-R qrels_prefs``, ``-m all_prefs``),
each defined beside its one kernel (m_prefs_*.c, identical in 9.0.8 and 10.0).

A kernel takes one query's preference counts (``trec_prefs.form_prefs_counts``: the judgment
groups, each as equivalence classes or a preference array, with the counts of preferences
fulfilled and possible among retrieved, implied and non-occurring documents) and returns its
value.
"""

from __future__ import annotations

from typing import Any

from cmrkit.evaluation.measures.base import PREFS, SUM, Family, define


def _num_prefs_poss(c: Any) -> float:
    return float(sum(j.poss_ret + j.poss_imp + j.poss_notoccur for j in c.jgs))


def _num_prefs_ful(c: Any) -> float:
    return float(sum(j.ful_ret + j.ful_imp for j in c.jgs))


def _num_prefs_ful_ret(c: Any) -> float:
    return float(sum(j.ful_ret for j in c.jgs))


def _simp(ful: int, poss: int) -> float:
    return ful / poss if poss else 0.0


def _prefs_simp(c):
    ful = sum(j.ful_ret + j.ful_imp for j in c.jgs)
    return _simp(ful, sum(j.poss_ret + j.poss_imp + j.poss_notoccur for j in c.jgs))


def _prefs_simp_ret(c):
    return _simp(sum(j.ful_ret for j in c.jgs), sum(j.poss_ret for j in c.jgs))


def _prefs_simp_imp(c):
    ful = sum(j.ful_ret + j.ful_imp for j in c.jgs)
    return _simp(ful, sum(j.poss_ret + j.poss_imp for j in c.jgs))


def _avgjg(c, ful_of, poss_of) -> float:
    s = 0.0
    for j in c.jgs:
        poss = poss_of(j)
        if poss:
            s += ful_of(j) / poss
    return s / len(c.jgs) if s > 0.0 else 0.0


def _prefs_avgjg(c):
    return _avgjg(
        c, lambda j: j.ful_ret + j.ful_imp, lambda j: j.poss_ret + j.poss_imp + j.poss_notoccur
    )


def _prefs_avgjg_ret(c):
    return _avgjg(c, lambda j: j.ful_ret, lambda j: j.poss_ret)


def _prefs_avgjg_imp(c):
    return _avgjg(c, lambda j: j.ful_ret + j.ful_imp, lambda j: j.poss_ret + j.poss_imp)


def _pair(c: Any, ranges) -> float:
    s = 0.0
    pairs = 0
    pref = c.pref
    for rows, cols, add in ranges:
        for i in rows:
            for j in cols(i):
                a, b = pref.get((i, j), 0), pref.get((j, i), 0)
                if a or b:
                    pairs += 1
                    if add:
                        s += a / (a + b)
    return s / pairs if pairs else 0.0


def _prefs_pair(c):
    r, n = c.num_judged_ret, c.num_judged
    return _pair(
        c,
        [
            (range(r), lambda i: range(i + 1, r), True),
            (range(r), lambda i: range(r, n), True),
            (range(r, n), lambda i: range(i + 1, n), False),
        ],
    )


def _prefs_pair_ret(c):
    r = c.num_judged_ret
    return _pair(c, [(range(r), lambda i: range(i + 1, r), True)])


def _prefs_pair_imp(c):
    r, n = c.num_judged_ret, c.num_judged
    return _pair(
        c,
        [(range(r), lambda i: range(i + 1, r), True), (range(r), lambda i: range(r, n), True)],
    )


def _recalc(jg: Any, ret: int, num_judged: int, only_ret: bool) -> tuple[int, int]:
    """recalculate() of m_prefs_avgjg_Rnonrel[_ret].c: non-relevant documents cut to R."""
    ful = poss = 0
    if jg.pa is None:
        ecs = jg.ecs
        limit = jg.num_rel_ret if only_ret else jg.num_rel
        new_nonrel = ecs[-1][1][:limit]

        def count(p1, p2):
            nonlocal ful, poss
            if only_ret:
                if p1 < p2:
                    ful += 1
                else:
                    poss += 1
            elif p1 < p2 and p1 < ret:
                ful += 1
            else:
                poss += 1

        def prefix(ranks):
            out = []
            for r in ranks:
                if only_ret and r >= ret:
                    break
                out.append(r)
            return out

        for e1 in range(len(ecs)):
            for e2 in range(e1 + 1, len(ecs) - 1):
                for p1 in prefix(ecs[e1][1]):
                    for p2 in prefix(ecs[e2][1]):
                        count(p1, p2)
        for e1 in range(len(ecs)):
            for p1 in prefix(ecs[e1][1]):
                for p2 in prefix(new_nonrel):
                    count(p1, p2)
        return ful, poss + ful
    rel_array, pa = jg.rel_array, jg.pa
    seen = 0
    scan = ret if only_ret else num_judged
    i = 0
    while i < scan:
        if rel_array[i] == 0.0:
            seen += 1
            if seen == jg.num_rel + 1:
                break
        i += 1
    first = i

    def dropped(k):
        return k >= first and rel_array[k] == 0.0

    for i in range(ret):
        if dropped(i):
            continue
        for j in range(i):
            if not dropped(j) and j in pa[i]:
                poss += 1
        for j in range(i + 1, ret):
            if not dropped(j) and j in pa[i]:
                ful += 1
        if not only_ret:
            for j in range(ret, num_judged):
                if not dropped(j) and j in pa[i]:
                    ful += 1
    if not only_ret:
        for i in range(ret, num_judged):
            if dropped(i):
                continue
            for j in range(num_judged):
                if not dropped(j) and j in pa[i]:
                    poss += 1
    return ful, poss + ful


def _prefs_avgjg_Rnonrel(c):
    s = 0.0
    for j in c.jgs:
        R, N = j.num_rel, j.num_nonrel
        if R >= N:
            ful = j.ful_ret + j.ful_imp + j.num_rel_ret * (R - N)
            poss = j.poss_ret + j.poss_imp + j.poss_notoccur + j.num_rel * (R - N)
        else:
            ful, poss = _recalc(j, c.num_judged_ret, c.num_judged, False)
        s += _cdiv(ful, poss)
    return s / len(c.jgs) if s > 0.0 else 0.0


def _prefs_avgjg_Rnonrel_ret(c):
    s = 0.0
    for j in c.jgs:
        R, N = j.num_rel_ret, j.num_nonrel_ret
        if R >= N:
            ful = j.ful_ret + j.num_rel_ret * (R - N)
            poss = j.poss_ret + j.num_rel * (R - N)
        else:
            ful, poss = _recalc(j, c.num_judged_ret, c.num_judged, True)
        s += _cdiv(ful, poss)
    return s / len(c.jgs) if s > 0.0 else 0.0


def _cdiv(a: float, b: float) -> float:
    if b == 0:
        return -float("nan") if a == 0 else float("inf")
    return a / b


def _prefs(name: str, kernel, help: str, counts: bool = False) -> Family:
    """A preference family: its kernel takes one query's counts; ``counts``: a count (summed,
    printed as an integer)."""
    extra = {"summary": SUM, "integer": True} if counts else {}
    return Family(name, rel_format="prefs", help=help, kernel=kernel, layout=PREFS, **extra)


define(
    _prefs("prefs_num_prefs_poss", _num_prefs_poss, "preferences possible", counts=True),
    _prefs("prefs_num_prefs_ful", _num_prefs_ful, "preferences fulfilled", counts=True),
    _prefs("prefs_num_prefs_ful_ret", _num_prefs_ful_ret,
           "preferences fulfilled among retrieved documents", counts=True),
    _prefs("prefs_simp", _prefs_simp, "fraction of preferences fulfilled"),
    _prefs("prefs_pair", _prefs_pair, "mean over judged documents of prefs_simp"),
    _prefs("prefs_avgjg", _prefs_avgjg, "prefs_simp averaged over judgment groups"),
    _prefs("prefs_avgjg_Rnonrel", _prefs_avgjg_Rnonrel,
           "prefs_avgjg, non-relevant documents limited to R"),
    _prefs("prefs_simp_ret", _prefs_simp_ret, "prefs_simp over retrieved documents"),
    _prefs("prefs_pair_ret", _prefs_pair_ret, "prefs_pair over retrieved documents"),
    _prefs("prefs_avgjg_ret", _prefs_avgjg_ret, "prefs_avgjg over retrieved documents"),
    _prefs("prefs_avgjg_Rnonrel_ret", _prefs_avgjg_Rnonrel_ret,
           "prefs_avgjg_Rnonrel over retrieved documents"),
    _prefs("prefs_simp_imp", _prefs_simp_imp, "prefs_simp, implied preferences"),
    _prefs("prefs_pair_imp", _prefs_pair_imp, "prefs_pair, implied preferences"),
    _prefs("prefs_avgjg_imp", _prefs_avgjg_imp, "prefs_avgjg, implied preferences"),
)  # fmt: skip
