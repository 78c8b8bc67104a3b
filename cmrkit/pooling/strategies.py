"""Which pooled pairs to judge, in which order: depth, RBP, RRF, Move-to-Front, MaxMean, strata.

A pool holds every candidate (the top ``depth`` of each run per query); a strategy chooses the
pairs to judge within a budget, per query or in total:

- ``depth``: by best rank (rank 1 of every run, then rank 2, ...); in total, the same depth for
  every query, the last level partly filled.
- ``rbp``: by summed rank-biased-precision weight ``sum_runs (1 - p) p^(rank - 1)`` (Moffat,
  Webber and Zobel 2007), persistence ``p``; in total, the heaviest pairs of all queries.
- ``rrf``: by reciprocal-rank-fusion score ``sum_runs 1 / (k + rank)``; in total, the best of all.
- ``mtf``: Move-to-Front (Cormack, Palmer and Clarke 1998): the runs form a queue; the run at the
  front gives its next unjudged document; a non-relevant one sends the run to the back.
- ``maxmean``: MaxMean bandit (Losada, Parapar and Barreiro 2016): each run is an arm whose
  posterior mean relevance is ``(relevant + 1) / (judged + 2)`` over the documents it was asked
  for; the arm with the highest mean gives its next unjudged document.
- ``strata``: stratified random sampling by best rank, TREC style (``1-10:1.0,11-30:0.5``); each
  pair records its stratum and its inclusion probability (sampled / candidates of the stratum).

Ties go to the run given first (adaptive), then the better best rank, then the query (natural
order) and the docno. The adaptive strategies (mtf, maxmean) need each judgment before the next
choice: they run in rounds (``cmrkit pool next``) or against simulated assessors; a round that
asks several pairs of one query takes them from the same state (no feedback in between). A
total budget is split evenly over the queries for them (what a query cannot use goes to the
others); for strata it scales every rate by one factor (capped at 1), per query or for all.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmrkit.errors import CmrkitError, check_range
from cmrkit.pooling.pool import Pool, natural_key

STRATEGIES = ("depth", "rbp", "rrf", "mtf", "maxmean", "strata")
ADAPTIVE = frozenset({"mtf", "maxmean"})
DEFAULT_STRATA = "1-10:1.0,11-30:0.5,31-100:0.1"

Labels = Mapping[tuple[str, str], int]


@dataclass(frozen=True)
class StrategyOptions:
    """A pooling strategy and its parameters."""

    name: str = "depth"
    budget: int | None = None  # pairs to judge: per query, or in total
    per_query: bool = False
    rbp_p: float = 0.8  # rbp: persistence
    rrf_k: float = 60.0  # rrf: the constant k
    strata: str | None = None  # strata: LO-HI:RATE,... (default DEFAULT_STRATA)
    batch: int | None = None  # adaptive: pairs per round (default one per query)
    seed: int = 0  # strata: the random draw

    def check(self) -> None:
        """Refuse options that do not fit the strategy."""
        if self.name not in STRATEGIES:
            raise CmrkitError(f"--strategy {self.name!r} is not one of {', '.join(STRATEGIES)}")
        if self.budget is not None and self.budget < 1:
            raise CmrkitError(f"--budget must be at least 1, not {self.budget}")
        if self.name in ADAPTIVE and self.budget is None:
            raise CmrkitError(f"--strategy {self.name} needs a --budget (pairs to judge)")
        if self.per_query and self.budget is None:
            raise CmrkitError("--per-query applies to a --budget; give one")
        if not 0.0 < self.rbp_p < 1.0:
            raise CmrkitError(
                f"--rbp-p (persistence) must lie strictly between 0 and 1, not {self.rbp_p}"
            )
        check_range(self.rrf_k, 0.0, 1e6, "--rrf-k")  # NaN or infinity would make every gain equal
        if self.strata is not None and self.name != "strata":
            raise CmrkitError("--strata goes with --strategy strata")
        if self.batch is not None and (self.name not in ADAPTIVE or self.batch < 1):
            raise CmrkitError("--batch (pairs per round) is at least 1 and goes with mtf/maxmean")
        if self.name == "strata":
            parse_strata(self.strata_spec)

    @property
    def strata_spec(self) -> str:
        return self.strata or DEFAULT_STRATA

    def to_json(self) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "name": self.name,
            "budget": self.budget,
            "per_query": self.per_query,
        }
        if self.name == "rbp":
            rec["p"] = self.rbp_p
        elif self.name == "rrf":
            rec["k"] = self.rrf_k
        elif self.name == "strata":
            rec["strata"] = self.strata_spec
            rec["seed"] = self.seed
        elif self.name in ADAPTIVE:
            rec["batch"] = self.batch
        return rec


def options_from_header(rec: Mapping[str, Any]) -> StrategyOptions:
    """The options recorded in a pool header's ``strategy``."""
    return StrategyOptions(
        name=rec["name"],
        budget=rec.get("budget"),
        per_query=bool(rec.get("per_query")),
        rbp_p=rec.get("p", 0.8),
        rrf_k=rec.get("k", 60.0),
        strata=rec.get("strata"),
        batch=rec.get("batch"),
        seed=rec.get("seed", 0),
    )


# --- strata --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stratum:
    """Best ranks ``lo``..``hi`` (inclusive), sampled at ``rate``."""

    lo: int
    hi: int
    rate: float

    @property
    def label(self) -> str:
        return f"{self.lo}-{self.hi}"


def parse_strata(spec: str) -> list[Stratum]:
    """``1-10:1.0,11-30:0.5`` -> strata; they must start at rank 1 and leave no gap."""
    strata: list[Stratum] = []
    for part in spec.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*:\s*([0-9.]+)\s*", part)
        if not m:
            raise CmrkitError(
                f"--strata stratum {part.strip()!r} is not LO-HI:RATE "
                "(e.g. 1-10:1.0,11-30:0.5,31-100:0.1)"
            )
        try:
            rate = float(m[3])
        except ValueError:
            rate = -1.0
        s = Stratum(int(m[1]), int(m[2]), rate)
        if s.lo < 1 or s.hi < s.lo or not 0.0 < s.rate <= 1.0:
            raise CmrkitError(
                f"--strata stratum {part.strip()!r}: ranks must satisfy 1 <= LO <= HI and the "
                "rate must lie in (0, 1]"
            )
        if strata:
            prev = strata[-1]
            if s.lo <= prev.hi:
                raise CmrkitError(f"--strata {prev.label} and {s.label} overlap")
            if s.lo > prev.hi + 1:
                raise CmrkitError(
                    f"--strata {prev.label} and {s.label} leave ranks {prev.hi + 1}-{s.lo - 1} "
                    "out; strata must follow each other"
                )
        elif s.lo != 1:
            raise CmrkitError(f"--strata must start at rank 1, not {s.lo}")
        strata.append(s)
    return strata


# --- candidates ----------------------------------------------------------------------------


@dataclass
class QueryCandidates:
    """One query's candidates: docnos (pool order), their ranks in the runs considered, and
    each run's candidates (indices into ``docnos``) in rank order."""

    qid: str
    docnos: list[str]
    ranks: list[dict[str, int]]
    lists: list[list[int]]
    best: list[int] = field(default_factory=list)  # best rank of each candidate


def query_candidates(pool: Pool, runs: Sequence[str] | None = None) -> list[QueryCandidates]:
    """The pool's candidates per query (natural order), seen through ``runs`` (default all):
    a pair only other runs pooled is left out."""
    names = list(runs) if runs is not None else pool.run_names
    wanted = set(names)
    grouped: dict[str, QueryCandidates] = {}
    for p in pool.pairs:
        ranks = {r: k for r, k in p.ranks.items() if r in wanted}
        if not ranks:
            continue
        c = grouped.get(p.qid)
        if c is None:
            c = grouped[p.qid] = QueryCandidates(p.qid, [], [], [[] for _ in names])
        c.docnos.append(p.docno)
        c.ranks.append(ranks)
        c.best.append(min(ranks.values()))
    column = {r: j for j, r in enumerate(names)}
    for c in grouped.values():
        by_run: list[list[tuple[int, int]]] = [[] for _ in names]
        for i, ranks in enumerate(c.ranks):
            for run, rank in ranks.items():
                by_run[column[run]].append((rank, i))
        c.lists = [[i for _, i in sorted(pairs)] for pairs in by_run]
    return [grouped[q] for q in sorted(grouped, key=natural_key)]


# --- non-adaptive orders -------------------------------------------------------------------


@dataclass
class CandidateArrays:
    """All queries' candidates as arrays (one row per candidate, queries in order): the rank
    in each run (0: not retrieved), the best rank, the query, the docno's place in text order."""

    ranks: Any
    best: Any
    query: Any
    docno: Any
    offsets: list[int]


def candidate_arrays(cands: Sequence[QueryCandidates], runs: Sequence[str]) -> CandidateArrays:
    """The arrays the depth, rbp and rrf orders are computed on."""
    import numpy as np

    sizes = [len(c.docnos) for c in cands]
    column = {r: j for j, r in enumerate(runs)}
    rows, cols, values = [], [], []
    at = 0
    for c in cands:
        for i, rr in enumerate(c.ranks, at):
            for run, k in rr.items():
                rows.append(i)
                cols.append(column[run])
                values.append(k)
        at += len(c.docnos)
    ranks = np.zeros((at, len(runs)))
    ranks[rows, cols] = values
    best = np.where(ranks > 0, ranks, np.inf).min(axis=1) if at else np.zeros(0)
    docno = np.zeros(at, dtype=np.int64)
    at = 0
    for c in cands:
        order = sorted(range(len(c.docnos)), key=c.docnos.__getitem__)
        docno[[at + i for i in order]] = np.arange(len(order))
        at += len(c.docnos)
    query = np.repeat(np.arange(len(cands)), sizes)
    return CandidateArrays(ranks, best, query, docno, [0, *np.cumsum(sizes).tolist()])


def _orders(
    arrays: CandidateArrays, opts: StrategyOptions, totals: bool
) -> tuple[list[list[int]], list[int] | None]:
    """Each query's candidates in the order a depth, rbp or rrf strategy takes them and, for a
    total budget, the query of every candidate in the order all queries together are taken:
    by the strategy's key (depth: best rank, then the run given first; rbp, rrf: weight or
    score descending, then best rank), then query (natural order), then docno."""
    import numpy as np

    a = arrays
    present = a.ranks > 0
    if opts.name == "depth":
        keys = [a.best, np.argmax(a.ranks == a.best[:, None], axis=1)]
    else:
        safe = np.where(present, a.ranks, 1.0)
        if opts.name == "rbp":
            gain = (1 - opts.rbp_p) * opts.rbp_p ** (safe - 1)
        else:
            gain = 1.0 / (opts.rrf_k + safe)
        # summed run by run in the order given, as a Python loop would
        keys = [-np.where(present, gain, 0.0).sum(axis=1), a.best]
    flat = np.lexsort((a.docno, *reversed(keys), a.query)).tolist()
    off = a.offsets
    orders = [[i - off[q] for i in flat[off[q] : off[q + 1]]] for q in range(len(off) - 1)]
    merged = None
    if totals:
        merged = a.query[np.lexsort((a.docno, a.query, *reversed(keys)))].tolist()
    return orders, merged


# --- adaptive strategies -------------------------------------------------------------------


class _Bandit:
    """Runs as arms over one query's candidates; a document taken by one arm is skipped by all."""

    def __init__(self, c: QueryCandidates) -> None:
        self.lists = c.lists
        self.pos = [0] * len(c.lists)
        self.taken = bytearray(len(c.docnos))

    def head(self, arm: int) -> int | None:
        """The arm's next candidate nobody has taken, or None when it has none left."""
        lst, p = self.lists[arm], self.pos[arm]
        while p < len(lst) and self.taken[lst[p]]:
            p += 1
        self.pos[arm] = p
        return lst[p] if p < len(lst) else None

    def take(self, i: int) -> None:
        self.taken[i] = 1

    def choose(self) -> int | None:
        raise NotImplementedError

    def pick(self) -> tuple[int, int] | None:
        """(candidate, arm) of the next pair to judge, taken; None when every arm is empty."""
        arm = self.choose()
        if arm is None:
            return None
        i = self.head(arm)
        assert i is not None
        self.take(i)
        return i, arm

    def observe(self, arm: int, relevant: bool) -> None:
        raise NotImplementedError


class MoveToFront(_Bandit):
    """Move-to-Front: the front run gives documents while they are relevant."""

    def __init__(self, c: QueryCandidates) -> None:
        super().__init__(c)
        self.queue = list(range(len(c.lists)))

    def choose(self) -> int | None:
        while self.queue:
            if self.head(self.queue[0]) is not None:
                return self.queue[0]
            self.queue.pop(0)
        return None

    def observe(self, arm: int, relevant: bool) -> None:
        if not relevant and arm in self.queue:
            self.queue.remove(arm)
            self.queue.append(arm)


class MaxMean(_Bandit):
    """MaxMean: the arm of highest posterior mean ``(relevant + 1) / (judged + 2)``."""

    def __init__(self, c: QueryCandidates) -> None:
        super().__init__(c)
        self.relevant = [0] * len(c.lists)
        self.judged = [0] * len(c.lists)

    def choose(self) -> int | None:
        best, best_mean = None, -1.0
        for arm in range(len(self.lists)):
            if self.head(arm) is None:
                continue
            mean = (self.relevant[arm] + 1) / (self.judged[arm] + 2)
            if mean > best_mean:
                best, best_mean = arm, mean
        return best

    def observe(self, arm: int, relevant: bool) -> None:
        self.judged[arm] += 1
        self.relevant[arm] += relevant


_BANDITS = {"mtf": MoveToFront, "maxmean": MaxMean}


def bandit(name: str, c: QueryCandidates) -> _Bandit:
    """A fresh bandit of strategy ``name`` (mtf, maxmean) over one query's candidates."""
    return _BANDITS[name](c)


@dataclass(frozen=True)
class Pick:
    """One chosen candidate: its index, the arm it came from, and the label fed back."""

    index: int
    arm: int | None = None
    label: int | None = None


def simulate_query(c: QueryCandidates, name: str, labels: Labels, limit: int) -> list[Pick]:
    """Up to ``limit`` picks of an adaptive strategy on one query, one at a time, each judged
    (``labels``: 1 relevant, 0 or -1 not) before the next choice."""
    b = bandit(name, c)
    picks: list[Pick] = []
    while len(picks) < limit:
        got = b.pick()
        if got is None:
            break
        i, arm = got
        label = labels[(c.qid, c.docnos[i])]
        b.observe(arm, label > 0)
        picks.append(Pick(i, arm, label))
    return picks


# --- budgets -------------------------------------------------------------------------------


def allocate(budget: int, sizes: Sequence[int]) -> list[int]:
    """Split a total budget evenly over queries of ``sizes`` candidates (never more than a
    query has); what is left after an even split goes one by one to the first queries."""
    alloc = [0] * len(sizes)
    left = budget
    active = [q for q, n in enumerate(sizes) if n > 0]
    while left > 0 and active:
        share = left // len(active)
        if share == 0:
            for q in active[:left]:
                alloc[q] += 1
            break
        for q in active:
            give = min(share, sizes[q] - alloc[q])
            alloc[q] += give
            left -= give
        active = [q for q in active if alloc[q] < sizes[q]]
    return alloc


def check_budget(opts: StrategyOptions, queries: int) -> None:
    """A total budget must give every query at least one pair."""
    if opts.budget is not None and not opts.per_query and opts.budget < queries:
        raise CmrkitError(
            f"--budget {opts.budget} in total is below the number of queries ({queries}): "
            "every query needs at least one judgment; raise it or give --per-query"
        )


# --- selection -----------------------------------------------------------------------------


@dataclass
class Selection:
    """What a strategy chose: per query (in ``query_candidates`` order) its picks in order;
    for strata also, per query, each stratum's label, inclusion probability and members."""

    picks: list[list[Pick]]
    strata: list[list[tuple[str, float, list[int]]]] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    sequence: list[int] | None = None  # total budgets of depth, rbp, rrf: the query of each pick

    @property
    def size(self) -> int:
        return sum(len(p) for p in self.picks)


def _counts(
    orders: Sequence[Sequence[int]],
    merged: Sequence[int] | None,
    opts: StrategyOptions,
    budget: int | None,
) -> list[int]:
    """How many of each query's order to take under ``budget``; ``merged`` is the query of
    every candidate in the order a total budget takes them (None: split evenly)."""
    sizes = [len(o) for o in orders]
    if budget is None:
        return sizes
    if opts.per_query:
        return [min(budget, n) for n in sizes]
    if merged is None:
        return allocate(budget, sizes)
    counts = [0] * len(orders)
    for q in merged[:budget]:
        counts[q] += 1
    return counts


def _strata_selection(
    cands: Sequence[QueryCandidates], opts: StrategyOptions, budgets: Sequence[int | None]
) -> dict[int | None, Selection]:
    strata = parse_strata(opts.strata_spec)
    # per query and stratum: members (candidate indices) in a seeded random order
    members: list[list[list[int]]] = []
    for c in cands:
        groups: list[list[int]] = [[] for _ in strata]
        for i, best in enumerate(c.best):
            for s, st in enumerate(strata):
                if st.lo <= best <= st.hi:
                    groups[s].append(i)
                    break
        for s, g in enumerate(groups):
            g.sort(key=lambda i: c.docnos[i])
            random.Random(f"{opts.seed}:{c.qid}:{strata[s].label}").shuffle(g)
        members.append(groups)

    def as_given(n: int, rate: float) -> int:
        return min(n, max(1, math.floor(rate * n + 0.5))) if n else 0

    def steps(q: int) -> list[tuple[float, int, int]]:
        """(scale, query, stratum) at which a stratum draws one more member: its m-th when
        ``scale * rate * n + 0.5`` reaches m."""
        out = []
        for s, g in enumerate(members[q]):
            n, rate = len(g), strata[s].rate
            out += [((m - 0.5) / (rate * n), q, s) for m in range(2, n + 1)]
        return out

    def scaled(
        groups: Sequence[int], budget: int, events: Sequence[tuple[float, int, int]]
    ) -> tuple[dict[tuple[int, int], int], float]:
        """Members drawn per (query, stratum) at the largest common scale of the rates that
        keeps ``groups`` within ``budget`` (``events``: their steps, sorted), and that scale."""
        counts = {(q, s): 1 for q in groups for s, g in enumerate(members[q]) if g}
        if len(counts) > budget:
            where = f"query {cands[groups[0]].qid} has" if len(groups) == 1 else "the queries have"
            raise CmrkitError(
                f"--budget {budget} is below the {len(counts)} strata {where} candidates in "
                "(each stratum needs one judgment); raise the budget or use fewer strata"
            )
        used, scale = len(counts), 0.0
        k = 0
        while k < len(events):
            j = k
            while j < len(events) and events[j][0] == events[k][0]:
                j += 1
            if used + (j - k) > budget:
                break
            for _, q, s in events[k:j]:
                counts[(q, s)] += 1
            used += j - k
            scale = events[k][0]
            k = j
        return counts, (math.inf if k == len(events) else scale)

    result: dict[int | None, Selection] = {}
    own = [sorted(steps(q)) for q in range(len(cands))] if any(budgets) else []
    merged = sorted(e for events in own for e in events) if not opts.per_query else []
    for budget in budgets:
        counts: dict[tuple[int, int], int] = {}
        extra: dict[str, Any] = {}
        if budget is None:
            for q in range(len(cands)):
                for s, g in enumerate(members[q]):
                    counts[(q, s)] = as_given(len(g), strata[s].rate)
        elif opts.per_query:
            for q in range(len(cands)):
                counts.update(scaled([q], budget, own[q])[0])
        else:
            counts, scale = scaled(list(range(len(cands))), budget, merged)
            extra["scale"] = None if scale == math.inf else scale
        picks: list[list[Pick]] = []
        info: list[list[tuple[str, float, list[int]]]] = []
        for q in range(len(cands)):
            chosen: list[Pick] = []
            row = []
            for s, g in enumerate(members[q]):
                if g:
                    k = counts.get((q, s), 0)
                    row.append((strata[s].label, k / len(g), g))
                    chosen += [Pick(i) for i in g[:k]]
            picks.append(chosen)
            info.append(row)
        result[budget] = Selection(picks, info, extra)
    return result


def select_many(
    cands: Sequence[QueryCandidates],
    runs: Sequence[str],
    opts: StrategyOptions,
    budgets: Sequence[int | None],
    labels: Labels | None = None,
    arrays: CandidateArrays | None = None,
) -> dict[int | None, Selection]:
    """What the strategy chooses at each budget (None: no budget, everything for depth, rbp and
    rrf, the given rates for strata). Adaptive strategies need ``labels`` (the judgment of
    every candidate) and are simulated one pick per query at a time; ``arrays`` (from
    :func:`candidate_arrays`) saves recomputing them for several strategies."""
    if opts.name == "strata":
        return _strata_selection(cands, opts, budgets)
    if opts.name in ADAPTIVE:
        if labels is None:
            raise CmrkitError(f"--strategy {opts.name} needs judgments as it goes")
        sizes = [len(c.docnos) for c in cands]
        limits = [0] * len(cands)
        for budget in budgets:
            if budget is None:
                raise CmrkitError(f"--strategy {opts.name} needs a --budget")
            alloc = [min(budget, n) for n in sizes] if opts.per_query else allocate(budget, sizes)
            limits = [max(a, b) for a, b in zip(limits, alloc, strict=True)]
        seqs = [
            simulate_query(c, opts.name, labels, limit)
            for c, limit in zip(cands, limits, strict=True)
        ]
        result = {}
        for budget in budgets:
            counts = _counts(seqs, None, opts, budget)
            result[budget] = Selection([s[:k] for s, k in zip(seqs, counts, strict=True)])
        return result
    totals = any(b is not None for b in budgets) and not opts.per_query
    orders, merged = _orders(arrays or candidate_arrays(cands, runs), opts, totals)
    result = {}
    for budget in budgets:
        counts = _counts(orders, merged, opts, budget)
        result[budget] = Selection(
            [[Pick(i) for i in o[:k]] for o, k in zip(orders, counts, strict=True)],
            sequence=merged[:budget] if merged is not None and budget is not None else None,
        )
    return result


def global_order(cands: Sequence[QueryCandidates], selection: Selection) -> list[tuple[int, int]]:
    """(query, pick) pairs in the order of selection: for a total budget of depth, rbp or rrf
    the strategy's order over all queries; otherwise the first pick of every query, then the
    second, ... (queries in natural order)."""
    if selection.sequence is not None:
        seen = [0] * len(cands)
        out = []
        for q in selection.sequence:
            out.append((q, seen[q]))
            seen[q] += 1
        return out
    longest = max((len(p) for p in selection.picks), default=0)
    return [
        (q, k) for k in range(longest) for q in range(len(cands)) if k < len(selection.picks[q])
    ]
