"""The layout of trec_eval's preference measures (``-R prefs`` and ``-R qrels_prefs``, ``-m
all_prefs``): a port of form_prefs_counts.c (identical in 9.0.8 and 10.0 but for the rel_level
type), the counts the m_prefs_*.c kernels read (``measures/prefs.py``).

Each judgment group (JG) of a query holds preferences among documents: as equivalence classes
of equal rel_level when the group has one subgroup (EC), else as a preference array closed
under transitivity (PA). Documents get internal ranks: retrieved judged documents first, in
retrieval order, then the unretrieved judged ones by docno.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cmp_to_key

from cmrkit.errors import CmrkitError


@dataclass
class JG:
    ecs: list[tuple[float, list[int]]] = field(default_factory=list)  # (rel_level, ranks)
    pa: list[set[int]] | None = None  # pa[i]: the docs i is preferred to (PA form)
    rel_array: list[float] | None = None
    ful_ret: int = 0
    poss_ret: int = 0
    ful_imp: int = 0
    poss_imp: int = 0
    poss_notoccur: int = 0
    num_nonrel: int = 0
    num_nonrel_ret: int = 0
    num_rel: int = 0
    num_rel_ret: int = 0


@dataclass
class Counts:
    jgs: list[JG]
    num_judged: int
    num_judged_ret: int
    pref: dict[tuple[int, int], int]  # (i, j) -> number of JGs preferring i to j


def _key(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def form_prefs_counts(ranked: list[str], prefs: list[tuple[str, str, float, str]], qid: str):
    """``ranked``: docnos in retrieval order (ties by docno ascending, cut at -M)."""
    judged_docs = {p[3] for p in prefs}
    retrieved = [d for d in ranked if d in judged_docs]
    rank = {d: i for i, d in enumerate(retrieved)}
    num_judged_ret = len(retrieved)
    nxt = num_judged_ret
    for d in sorted(judged_docs - set(retrieved), key=_key):
        rank[d] = nxt
        nxt += 1
    num_judged = nxt
    items = [(jg, jsg, level, docno, rank[docno]) for jg, jsg, level, docno in prefs]

    def order(a, b):
        ka, kb = _key(a[0]), _key(b[0])
        if ka != kb:
            return -1 if ka < kb else 1
        ka, kb = _key(a[1]), _key(b[1])
        if ka != kb:
            return -1 if ka < kb else 1
        if a[2] > b[2]:
            return -1
        if a[2] < b[2]:
            return 1
        return a[4] - b[4]

    items.sort(key=cmp_to_key(order))
    pref: dict[tuple[int, int], int] = defaultdict(int)
    jgs: list[JG] = []
    start = 0
    n = len(items)
    while start < n:
        end = start
        while end < n and items[end][0] == items[start][0]:
            end += 1
        group = items[start:end]
        subgroups = len({g[1] for g in group})
        jg = JG()
        if subgroups > 1:
            _form_pa(jg, group, num_judged, num_judged_ret, pref, qid)
        else:
            for _, _, level, _, r in group:
                if jg.ecs and jg.ecs[-1][0] == level:
                    jg.ecs[-1][1].append(r)
                else:
                    jg.ecs.append((level, [r]))
            _add_ec(jg, num_judged_ret, pref, qid)
        jgs.append(jg)
        start = end
    return Counts(jgs, num_judged, num_judged_ret, pref)


def _count(jg: JG, better: int, worse: int, ret: int) -> None:
    """Count one preference for the document at internal rank ``better`` over the one at
    ``worse`` (ranks below ``ret`` are retrieved), as form_prefs_counts.c does in both its EC
    and PA forms: fulfilled (ful_*) when ``better`` ranks higher, else possible (poss_*);
    _ret when both are retrieved, _imp when only the higher-ranked one is, poss_notoccur when
    neither is."""
    fulfilled = better < worse
    if max(better, worse) < ret:
        if fulfilled:
            jg.ful_ret += 1
        else:
            jg.poss_ret += 1
    elif min(better, worse) < ret:
        if fulfilled:
            jg.ful_imp += 1
        else:
            jg.poss_imp += 1
    else:
        jg.poss_notoccur += 1


def _close_counts(jg: JG) -> None:
    """The fulfilled preferences are possible ones too."""
    jg.poss_ret += jg.ful_ret
    jg.poss_imp += jg.ful_imp


def _add_ec(jg: JG, ret: int, pref, qid: str) -> None:
    ecs = jg.ecs
    for e1, (level, ranks1) in enumerate(ecs):
        k = 0
        while k < len(ranks1) and ranks1[k] < ret:
            k += 1
        if level > 0.0:
            jg.num_rel_ret += k
            jg.num_rel += len(ranks1)
        else:
            jg.num_nonrel_ret += k
            jg.num_nonrel += len(ranks1)
        for e2 in range(e1 + 1, len(ecs)):
            for p1 in ranks1:
                for p2 in ecs[e2][1]:
                    pref[(p1, p2)] += 1
                    if p1 == p2:
                        raise CmrkitError(
                            f"query {qid}: a document has two rel_levels in one judgment "
                            "subgroup of the prefs file"
                        )
                    _count(jg, p1, p2, ret)
    _close_counts(jg)


def _form_pa(jg: JG, group, num_judged: int, ret: int, pref, qid: str) -> None:
    rel_array = [-1.0] * num_judged
    pa: list[set[int]] = [set() for _ in range(num_judged)]
    m = len(group)
    for i in range(m):
        _, jsg, level, docno, r = group[i]
        if (rel_array[r] > 0.0 and level == 0.0) or (rel_array[r] == 0.0 and level > 0.0):
            raise CmrkitError(
                f"query {qid}: document {docno} has both 0 and non-0 rel_level in one "
                "judgment group of the prefs file"
            )
        rel_array[r] = level
        j = i + 1
        while j < m and group[j][1] == jsg and group[j][2] == level:
            j += 1
        while j < m and group[j][1] == jsg:
            pa[r].add(group[j][4])
            j += 1
    # transitive closure (add_transitives: repeated products until nothing changes)
    closed: list[set[int]] = []
    for i in range(num_judged):
        reach = set(pa[i])
        todo = list(reach)
        while todo:
            k = todo.pop()
            for nxt in pa[k]:
                if nxt not in reach:
                    reach.add(nxt)
                    todo.append(nxt)
        reach.discard(i)
        closed.append(reach)
    pa = closed
    for i in range(num_judged):
        for j in pa[i]:
            if i in pa[j]:
                raise CmrkitError(
                    f"query {qid}: the preferences contradict each other (internal ranks {i} "
                    f"and {j})"
                )
    jg.pa, jg.rel_array = pa, rel_array
    for i in range(ret):
        if rel_array[i] > 0.0:
            jg.num_rel_ret += 1
        elif rel_array[i] == 0.0:
            jg.num_nonrel_ret += 1
    jg.num_rel, jg.num_nonrel = jg.num_rel_ret, jg.num_nonrel_ret
    for i in range(ret, num_judged):
        if rel_array[i] > 0.0:
            jg.num_rel += 1
        elif rel_array[i] == 0.0:
            jg.num_nonrel += 1
    for i in range(num_judged):
        for j in pa[i]:
            pref[(i, j)] += 1
            _count(jg, i, j, ret)
    _close_counts(jg)


def __getattr__(name: str):
    if name == "MEASURES":  # the kernels, now registered beside their definitions
        import warnings

        from cmrkit.evaluation.measures import trec as defs

        warnings.warn(
            "cmrkit.evaluation.trec_prefs.MEASURES is now each family's kernel "
            "(cmrkit.evaluation.measures.trec.BY_NAME[name].kernel, defined in "
            "measures/prefs.py); the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return {f.name: f.kernel for f in defs.FAMILIES if f.rel_format == "prefs"}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
