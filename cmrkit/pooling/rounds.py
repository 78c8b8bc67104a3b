"""Applying a strategy to a pool: marking the pairs to judge, the rounds of the adaptive
strategies (``cmrkit pool next``), and creating a pool with a strategy."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from cmrkit.errors import CmrkitError
from cmrkit.judgments.simulated import SIMULATION, SimulatedAssessors
from cmrkit.pooling.pool import Pool, PoolPair, create_pool, natural_key
from cmrkit.pooling.strategies import (
    ADAPTIVE,
    Labels,
    Pick,
    QueryCandidates,
    Selection,
    StrategyOptions,
    allocate,
    bandit,
    check_budget,
    global_order,
    options_from_header,
    parse_strata,
    query_candidates,
    select_many,
)


def _mark(
    pool: Pool,
    cands: Sequence[QueryCandidates],
    selection: Selection,
    *,
    adaptive: bool,
    runs: Sequence[str],
    first_order: int = 1,
    round_no: int | None = None,
) -> None:
    index = pool.pair_index()
    if selection.strata is not None:
        for c, row in zip(cands, selection.strata, strict=True):
            for label, inclusion, members in row:
                for i in members:
                    pair = index[(c.qid, c.docnos[i])]
                    pair.stratum, pair.inclusion = label, inclusion
    for n, (q, k) in enumerate(global_order(cands, selection), first_order):
        c, pick = cands[q], selection.picks[q][k]
        pair = index[(c.qid, c.docnos[pick.index])]
        pair.sampled = True
        pair.order = n
        if adaptive:
            pair.arm = runs[pick.arm] if pick.arm is not None else None
            pair.round = round_no if round_no is not None else k + 1
            pair.label = pick.label


def apply_strategy(pool: Pool, opts: StrategyOptions, labels: Labels | None = None) -> None:
    """Choose the pairs to judge, in place: ``sampled``, ``order`` and the strategy's fields.

    An adaptive strategy runs to the end of its budget against ``labels`` (simulated
    assessors: the judgment of every candidate) or, without them, chooses its first round.
    """
    opts.check()
    runs = pool.run_names
    cands = query_candidates(pool)
    check_budget(opts, len(cands))
    header = dict(opts.to_json())
    for p in pool.pairs:
        p.sampled = False
    if opts.name in ADAPTIVE and labels is None:
        nxt = next_picks(pool, opts, cands, [[] for _ in cands], opts.batch)
        _mark(pool, cands, nxt, adaptive=True, runs=runs, round_no=1)
        header["rounds"] = 1
    else:
        selection = select_many(cands, runs, opts, [opts.budget], labels)[opts.budget]
        _mark(pool, cands, selection, adaptive=opts.name in ADAPTIVE, runs=runs)
        header.update(selection.info)
        if opts.name in ADAPTIVE:
            header["rounds"] = max((len(p) for p in selection.picks), default=0)
    header["selected"] = sum(p.sampled for p in pool.pairs)
    pool.header["strategy"] = header


def next_picks(
    pool: Pool,
    opts: StrategyOptions,
    cands: Sequence[QueryCandidates],
    history: Sequence[Sequence[Sequence[Pick]]],
    n: int | None,
) -> Selection:
    """The next round of an adaptive strategy: ``history`` holds, per query, its earlier rounds
    (picks with their labels); ``n`` pairs (default one per query with budget left) are spread
    evenly over the queries that still have budget and candidates."""
    sizes = [len(c.docnos) for c in cands]
    budget = opts.budget or 0
    alloc = [min(budget, s) for s in sizes] if opts.per_query else allocate(budget, sizes)
    states = []
    room = []
    for q, c in enumerate(cands):
        b = bandit(opts.name, c)
        done = 0
        for rnd in history[q]:
            for pick in rnd:
                b.take(pick.index)
            for pick in rnd:
                if pick.arm is not None:
                    b.observe(pick.arm, (pick.label or 0) > 0)
            done += len(rnd)
        states.append(b)
        room.append(max(0, alloc[q] - done))
    active = [q for q in range(len(cands)) if room[q] > 0]
    want = n if n is not None else len(active)
    share = [0] * len(cands)
    left = want
    while left > 0 and active:
        for q in list(active):
            if left == 0:
                break
            share[q] += 1
            left -= 1
            if share[q] == room[q]:
                active.remove(q)
    picks: list[list[Pick]] = []
    for q, b in enumerate(states):
        got: list[Pick] = []
        while len(got) < share[q]:
            nxt = b.pick()
            if nxt is None:
                break
            got.append(Pick(nxt[0], nxt[1]))
        picks.append(got)
    return Selection(picks)


def _history(pool: Pool, cands: Sequence[QueryCandidates]) -> list[list[list[Pick]]]:
    """Per query, its rounds so far (picks in order, with arm and label) from the pool."""
    arms = {r: j for j, r in enumerate(pool.run_names)}
    position = {(c.qid, d): (q, i) for q, c in enumerate(cands) for i, d in enumerate(c.docnos)}
    rounds: dict[int, dict[int, list[tuple[int, Pick]]]] = {}
    for p in pool.pairs:
        if p.order is None:
            continue
        q, i = position[(p.qid, p.docno)]
        pick = Pick(i, arms.get(p.arm) if p.arm is not None else None, p.label)
        rounds.setdefault(q, {}).setdefault(p.round or 1, []).append((p.order, pick))
    return [
        [[pk for _, pk in sorted(r[k])] for k in sorted(r)]
        for r in (rounds.get(q, {}) for q in range(len(cands)))
    ]


def next_round(
    pool: Pool,
    feedback: Labels,
    n: int | None = None,
    where: Mapping[tuple[str, str], str] | None = None,
) -> Pool:
    """A copy of an adaptive pool with the judgments of its selected pairs recorded and the next
    round chosen (the new round's pairs are the ``sampled`` ones).

    ``feedback`` maps judged pairs to 1 (relevant), 0 or -1 (unknown: not relevant for the
    strategy); pairs chosen earlier and not in it keep the label they have, or count as not
    relevant. A judgment of a pair the pool has not chosen is refused (``where`` says where
    each was read).
    """
    rec = pool.header.get("strategy") or {}
    if rec.get("name") not in ADAPTIVE:
        raise CmrkitError(
            f"`pool next` continues an mtf or maxmean pool; this one was made with strategy "
            f"{rec.get('name', 'depth')!r}"
        )
    opts = options_from_header(rec)
    index = pool.pair_index()
    for key in sorted(feedback, key=lambda k: (natural_key(k[0]), k[1])):
        pair = index.get(key)
        if pair is None or pair.order is None:
            what = "is not in the pool" if pair is None else "has not been chosen by the pool yet"
            raise CmrkitError(
                f"a judgment of query {key[0]} document {key[1]}, which {what}; give the "
                "judgments of the pairs `pool create`/`pool next` chose for this pool",
                where=(where or {}).get(key),
            )
    pairs = [PoolPair(**vars(p)) for p in pool.pairs]
    for p in pairs:
        p.ranks = dict(p.ranks)
        if p.order is not None and (p.qid, p.docno) in feedback:
            p.label = feedback[(p.qid, p.docno)]
        p.sampled = False
    new = Pool(dict(pool.header), pairs)
    cands = query_candidates(new)
    history = _history(new, cands)
    nxt = next_picks(new, opts, cands, history, n)
    if nxt.size == 0:
        judged = sum(p.order is not None for p in pairs)
        raise CmrkitError(
            f"the pool's budget is spent: {judged} pairs chosen in {rec.get('rounds', 0)} "
            "round(s); aggregate the judgments into qrels"
        )
    rounds = int(rec.get("rounds", 0)) + 1
    first = 1 + max((p.order for p in pairs if p.order is not None), default=0)
    _mark(new, cands, nxt, adaptive=True, runs=new.run_names, first_order=first, round_no=rounds)
    header = dict(rec)
    header["rounds"] = rounds
    header["selected"] = sum(p.order is not None for p in pairs)
    new.header["strategy"] = header
    return new


def strategy_depth(opts: StrategyOptions, depth: int | None) -> int:
    """Candidates per run and query: ``depth`` (default 30), or where the strata end."""
    if opts.name != "strata":
        return 30 if depth is None else depth
    end = parse_strata(opts.strata_spec)[-1].hi
    if depth is not None and depth != end:
        raise CmrkitError(
            f"--depth {depth} differs from where the strata end ({end}); the strata set the depth"
        )
    return end


def plain_pool(opts: StrategyOptions, sample: str | None) -> bool:
    """Whether the options ask for the plain depth pool (every pair judged, or a ``sample``);
    ``sample`` with a strategy is refused."""
    opts.check()
    plain = opts.name == "depth" and opts.budget is None and not opts.per_query
    if sample is not None and not plain:
        raise CmrkitError("--sample goes with the plain depth pool; use --strategy strata")
    return plain


def pool_runs(
    runs: Sequence[str | os.PathLike],
    collection: str | os.PathLike,
    opts: StrategyOptions,
    *,
    depth: int | None = None,
    exclude: Sequence[str | os.PathLike] = (),
    topics: str | os.PathLike | None = None,
    sample: str | None = None,
    simulate: str | os.PathLike | None = None,
    assessors: int = SIMULATION.assessors,
    noise: float = SIMULATION.noise,
) -> Pool:
    """The pool `cmrkit pool create` makes: the plain depth pool (top ``depth``, default 30,
    or a stratified ``sample`` of it), else the strategy's, its adaptive rounds run against
    ``assessors`` simulated ones who know the qrels ``simulate`` when given."""
    if plain_pool(opts, sample) and simulate is None:
        return create_pool(
            runs,
            collection,
            depth=strategy_depth(opts, depth),
            exclude=exclude,
            topics=topics,
            sample=sample,
            seed=opts.seed,
        )
    simulated = None
    if simulate is not None:
        if opts.name not in ADAPTIVE:
            raise CmrkitError(
                "--simulate feeds judgments to mtf or maxmean; this strategy needs none"
            )
        from cmrkit.fileio import sha256_file
        from cmrkit.trec import read_qrels

        simulated = SimulatedAssessors(
            read_qrels(simulate),
            assessors,
            noise,
            opts.seed,
            {"path": str(simulate), "sha256": sha256_file(simulate)},
        )
    pool = create_pool(
        runs, collection, depth=strategy_depth(opts, depth), exclude=exclude, topics=topics
    )
    labels = simulated.labels((p.qid, p.docno) for p in pool.pairs) if simulated else None
    apply_strategy(pool, opts, labels)
    if simulated is not None:
        pool.header["strategy"]["simulated"] = simulated.to_json()
    return pool
