"""Choose a pooling strategy before paying: simulate strategies x budgets with noisy assessors
against complete qrels, and see what each would find and how far its scores would be off.

For every strategy and budget, the strategy chooses pairs from the runs' candidates (the top
``depth`` of each run), simulated assessors (``judgments simulate``'s noise model, the same
answers for every strategy) judge them, and the runs are scored on the resulting qrels
(unjudged = not relevant; strata are scored with xinfAP or infNDCG from their inclusion
probabilities). Reported against the complete qrels:

- ``found``: share of the relevant pairs of the complete qrels that the strategy chose to judge;
- ``judged``: pairs chosen;
- ``tau``: Kendall's tau-b between the run ranking by the simulated scores and by the complete
  qrels; ``swap``: the largest difference of complete-qrels scores between two runs the
  simulated scores order the other way (0 when none); both from ``evaluation/agreement.py``;
- ``bias``: per run, simulated score minus complete-qrels score;
- ``loo``: leave one run out: the strategy pools the other runs only, and the left-out run is
  scored on that pool's judgments; ``loo`` is that score minus its score when it was pooled.

The automatic judge (``judge``, given its labels: pair -> (Likert label, probability)) is a
strategy of its own: at a budget of B human judgments, the B candidates the judge is least sure
of (probability nearest 0.5; a label without a probability first) go to the simulated people
and every other labelled candidate keeps the judge's label (4-5 relevant); candidates the labels
lack stay unjudged. Its ``found`` is the share of the complete qrels' relevant pairs that end up
labelled relevant, ``people_share`` the share of the labelled candidates people judged.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.agreement import ranking_agreement
from cmrkit.judgments.simulated import SIMULATION, SimulatedAssessors, check_assessors
from cmrkit.pooling.pool import Pool, create_pool, natural_key
from cmrkit.pooling.strategies import (
    ADAPTIVE,
    STRATEGIES,
    QueryCandidates,
    Selection,
    StrategyOptions,
    candidate_arrays,
    parse_strata,
    query_candidates,
    select_many,
)
from cmrkit.trec import Qrels, Strata, read_qrels, read_run

MEASURES = {"AP": "xinfAP", "nDCG": "infNDCG"}  # measure -> its estimator from strata
JUDGE = "judge"  # the automatic judge as a strategy (its labels given to plan_pool)


def plan_measure(text: str) -> str:
    """AP or nDCG from any name `cmrkit eval` takes for them; other measures are refused with
    the reason (pool plan scores strata with their estimators xinfAP and infNDCG)."""
    from cmrkit.evaluation.measures import parse_measure

    if text in MEASURES:
        return text
    try:
        measure = parse_measure(text)
    except CmrkitError:
        measure = None
    if measure is not None and measure.cutoff is None and measure.kind in MEASURES:
        return measure.kind
    raise CmrkitError(
        f"--measure {text!r}: pool plan simulates AP or nDCG (any of their names: AP, map, "
        "nDCG, ndcg), whose estimators from strata are xinfAP and infNDCG; "
        f"{text} has no such estimator"
    )


@dataclass(frozen=True)
class PlanOptions:
    """What ``pool plan`` simulates."""

    budgets: tuple[int, ...]
    strategies: tuple[str, ...] = STRATEGIES
    per_query: bool = False
    depth: int = 100  # candidates per run and query
    measure: str = "AP"
    assessors: int = SIMULATION.assessors
    noise: float = SIMULATION.noise
    seed: int = 0
    rbp_p: float = 0.8
    rrf_k: float = 60.0
    strata: str | None = None

    def __post_init__(self) -> None:
        # any name `cmrkit eval` takes for AP or nDCG (map, MAP, ndcg, nDCG) means it
        object.__setattr__(self, "measure", plan_measure(self.measure))

    def check(self) -> None:
        unknown = [s for s in self.strategies if s not in (*STRATEGIES, JUDGE)]
        if unknown or not self.strategies:
            raise CmrkitError(
                f"--strategies {','.join(unknown) or '(none)'}: choose from {', '.join(STRATEGIES)}"
                " (and judge, with --auto LABELS)"
            )
        judge_only = set(self.strategies) == {JUDGE}  # 0: the judge alone
        if not self.budgets or min(self.budgets) < (0 if judge_only else 1):
            raise CmrkitError(
                "--budgets must list positive numbers of pairs, e.g. 5,10,20"
                + (" (0 too, with --strategies judge alone)" if not judge_only else "")
            )
        if self.depth < 1:
            raise CmrkitError(f"--depth must be at least 1, not {self.depth}")
        if self.measure not in MEASURES:
            raise CmrkitError(f"--measure {self.measure!r} is not one of {', '.join(MEASURES)}")
        check_assessors(self.assessors, self.noise)
        for name in self.strategies:
            if name != JUDGE:
                self.strategy(name, None).check()

    def strategy(self, name: str, budget: int | None) -> StrategyOptions:
        return StrategyOptions(
            name=name,
            budget=budget if budget is not None else (1 if name in ADAPTIVE else None),
            per_query=self.per_query and budget is not None,
            rbp_p=self.rbp_p,
            rrf_k=self.rrf_k,
            strata=self.strata if name == "strata" else None,
            seed=self.seed,
        )

    @property
    def candidate_depth(self) -> int:
        if "strata" in self.strategies:
            return max(self.depth, parse_strata(self.strategy("strata", None).strata_spec)[-1].hi)
        return self.depth

    def to_json(self) -> dict[str, Any]:
        return {
            "budgets": list(self.budgets),
            "strategies": list(self.strategies),
            "per_query": self.per_query,
            "depth": self.depth,
            "measure": self.measure,
            "assessors": self.assessors,
            "noise": self.noise,
            "seed": self.seed,
            "rbp_p": self.rbp_p,
            "rrf_k": self.rrf_k,
            "strata": self.strategy("strata", None).strata_spec,
        }


@dataclass
class Plan:
    """The simulation's rows (one per strategy and budget) and what it ran on."""

    rows: list[dict[str, Any]]
    runs: list[str]
    reference: dict[str, float]
    queries: int
    relevant: int
    findable: int
    options: PlanOptions
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "options": self.options.to_json(),
            "runs": self.runs,
            "reference": self.reference,
            "queries": self.queries,
            "relevant": self.relevant,
            "relevant_in_candidates": self.findable,
            "rows": self.rows,
            **self.info,
        }


class _Scorer:
    """Mean of one measure over a fixed set of queries (missing ones score 0)."""

    def __init__(self, runs: Mapping[str, Any], queries: Sequence[str], measure: str):
        self.runs = runs
        self.queries = list(queries)
        self.measure = measure

    def score(self, run: str, judgments: Any) -> float:
        return self.runs[run].mean(self.measure, judgments, self.queries)


def _judged(
    cands: Sequence[QueryCandidates], selection: Selection, labels: Mapping[tuple[str, str], int]
) -> tuple[Qrels, Strata | None]:
    """The qrels the simulated assessors give the chosen pairs (strata: every candidate of a
    stratum listed, -1 when not chosen, with its stratum)."""
    qrels: Qrels = {}
    strata: Strata | None = {} if selection.strata is not None else None
    for q, (c, picks) in enumerate(zip(cands, selection.picks, strict=True)):
        docs: dict[str, int] = {}
        if strata is not None and selection.strata is not None:
            where: dict[str, str] = {}
            for label, _, members in selection.strata[q]:
                for i in members:
                    docs[c.docnos[i]] = -1
                    where[c.docnos[i]] = label
            strata[c.qid] = where
        for pick in picks:
            docs[c.docnos[pick.index]] = labels[(c.qid, c.docnos[pick.index])]
        qrels[c.qid] = docs
    return qrels, strata


def plan_pool(
    runs: Sequence[str | os.PathLike],
    collection: str | os.PathLike,
    qrels: str | os.PathLike,
    options: PlanOptions,
    progress: Any = None,
    judge: Mapping[tuple[str, str], tuple[int, float | None]] | None = None,
) -> Plan:
    """Simulate every strategy at every budget (see the module's docstring); ``progress``, when
    given, is called with the number of steps done and their total; ``judge``: the automatic
    judge's labels, for the ``judge`` strategy."""
    options.check()
    if JUDGE in options.strategies and judge is None:
        raise CmrkitError("--strategies judge needs the judge's labels: --auto LABELS")
    from cmrkit.evaluation.rescore import Judgments, RankedRun

    truth = read_qrels(qrels)
    read = {str(r): read_run(r) for r in runs}
    pool, queries = _judged_pool(runs, collection, qrels, truth, read, options)
    names = pool.run_names
    assessors = SimulatedAssessors(
        truth, options.assessors, options.noise, options.seed, {"path": str(qrels)}
    )
    labels = assessors.labels((p.qid, p.docno) for p in pool.pairs)
    loaded = {meta["name"]: RankedRun(read[meta["path"]]) for meta in pool.header["runs"]}
    plain = options.measure
    scorer = _Scorer(loaded, queries, plain)
    estimator = _Scorer(loaded, queries, MEASURES[plain])
    complete = Judgments(truth)
    relevant = {(q, d) for q in queries for d, r in truth[q].items() if r > 0}
    subsets = [tuple(names)] + [tuple(n for n in names if n != left) for left in names]
    sim = _Simulation(
        names=list(names),
        subsets=subsets,
        cands_of={subset: query_candidates(pool, subset) for subset in subsets},
        labels=labels,
        relevant=relevant,
        relevant_total=sum(1 for q in queries for r in truth[q].values() if r > 0),
        reference={name: scorer.score(name, complete) for name in names},
    )
    findable = sum(1 for p in pool.pairs if (p.qid, p.docno) in relevant)
    steps = len(options.strategies) * len(subsets)
    done = 0
    arrays_of = {}
    if any(name in ("depth", "rbp", "rrf") for name in options.strategies):
        arrays_of = {s: candidate_arrays(sim.cands_of[s], s) for s in subsets}
    others = [name for name in options.strategies if name != JUDGE]
    if others and not options.per_query and min(options.budgets) < len(sim.cands_of[subsets[0]]):
        raise CmrkitError(
            f"--budgets {min(options.budgets)} in total is below the number of queries "
            f"({len(sim.cands_of[subsets[0]])}): every query needs at least one judgment; "
            "raise it or give --per-query"
        )
    rows = []
    for name in options.strategies:
        if name == JUDGE and judge is not None:
            rows.extend(sim.judge_rows(judge, options, scorer))
            done += len(subsets)
            if progress is not None:
                progress(done, steps)
            continue
        chosen: dict[tuple[str, ...], dict[int | None, Selection]] = {}
        for subset in subsets:
            opts = options.strategy(name, options.budgets[0])
            chosen[subset] = select_many(
                sim.cands_of[subset],
                subset,
                opts,
                list(options.budgets),
                labels,
                arrays_of.get(subset),
            )
            done += 1
            if progress is not None:
                progress(done, steps)
        score = estimator if name == "strata" else scorer
        measure = MEASURES[plain] if name == "strata" else plain
        for budget in options.budgets:
            rows.append(sim.row(name, budget, chosen, score, measure))
    info = {
        "candidates": len(pool.pairs),
        "assessor_labels": _label_counts(labels),
        "unjudged": _unjudged(truth, queries, pool),
    }
    return Plan(
        rows, names, sim.reference, len(queries), sim.relevant_total, findable, options, info
    )


def _unjudged(truth: Qrels, queries: Sequence[str], pool: Pool) -> dict[str, int]:
    """The qrels' -1 (unjudged) lines of the plan's queries: how many, on how many queries, and
    how many of them are candidates (the simulated assessors answer those not relevant)."""
    lines = {(q, d) for q in queries for d, r in truth[q].items() if r < 0}
    return {
        "lines": len(lines),
        "queries": len({q for q, _ in lines}),
        "candidates": sum(1 for p in pool.pairs if (p.qid, p.docno) in lines),
    }


def unjudged_warning(plan: Plan, qrels: str | os.PathLike) -> str | None:
    """What a plan against qrels holding -1 (unjudged) lines should be told (None: none)."""
    u = plan.info.get("unjudged") or {}
    if not u.get("lines"):
        return None
    return (
        f"{qrels} is not complete: it holds {u['lines']:,} unjudged line(s) (-1) on "
        f"{u['queries']:,} of the {plan.queries:,} queries, {u['candidates']:,} of them among the "
        "candidates. The simulation takes them as not relevant (the simulated assessors answer "
        "them so and the complete-qrels scores count them so), so a relevant pair among them is "
        "missed by every strategy alike and found, tau and bias are measured against qrels "
        "that lack it; judge them, or plan with qrels without -1 lines"
    )


def _judged_pool(
    runs: Sequence[str | os.PathLike],
    collection: str | os.PathLike,
    qrels: str | os.PathLike,
    truth: Qrels,
    read: Mapping[str, Any],
    options: PlanOptions,
) -> tuple[Pool, list[str]]:
    """The candidates of the runs for the queries the qrels judge, and those queries."""
    pool = create_pool(runs, collection, depth=options.candidate_depth, preloaded=read)
    if len(pool.run_names) < 2:
        raise CmrkitError("give at least two runs: the plan compares the rankings of runs")
    queries = sorted((q for q in truth if q in set(pool.queries)), key=natural_key)
    if not queries:
        raise CmrkitError(
            "the qrels judge none of the runs' queries; are they from another collection?",
            path=qrels,
        )
    keep = set(queries)
    return Pool(dict(pool.header), [p for p in pool.pairs if p.qid in keep]), queries


@dataclass
class _Simulation:
    """What every row of a plan compares with: the runs, the run subsets (all, then each run
    left out), their candidates, the simulated labels, the truth's relevant pairs and the
    runs' scores with the complete qrels."""

    names: list[str]
    subsets: list[tuple[str, ...]]
    cands_of: dict[tuple[str, ...], list[QueryCandidates]]
    labels: Mapping[tuple[str, str], int]
    relevant: set[tuple[str, str]]
    relevant_total: int
    reference: dict[str, float]

    def row(
        self,
        name: str,
        budget: int,
        chosen: Mapping[tuple[str, ...], Mapping[int | None, Selection]],
        score: _Scorer,
        measure: str,
    ) -> dict[str, Any]:
        """One strategy at one budget: the share of relevant found, the rankings' agreement
        with the reference, each run's bias, and the bias of leaving each run out."""
        from cmrkit.evaluation.rescore import Judgments

        names, labels = self.names, self.labels
        full = tuple(names)
        sel = chosen[full][budget]
        judged = Judgments(*_judged(self.cands_of[full], sel, labels))
        sim = {run: score.score(run, judged) for run in names}
        found = sum(
            1
            for c, picks in zip(self.cands_of[full], sel.picks, strict=True)
            for pick in picks
            if (c.qid, c.docnos[pick.index]) in self.relevant
        )
        loo = {}
        for left, subset in zip(names, self.subsets[1:], strict=True):
            without = Judgments(*_judged(self.cands_of[subset], chosen[subset][budget], labels))
            loo[left] = score.score(left, without) - sim[left]
        return {
            "strategy": name,
            "budget": budget,
            "judged": sel.size,
            **self._figures(sim, loo, found, measure),
        }

    def _figures(
        self, sim: dict[str, float], loo: dict[str, float], found: int, measure: str
    ) -> dict[str, Any]:
        """What a row says of qrels whose scores are ``sim`` (``loo``: each run's change when
        it is left out of the pool), ``found`` relevant pairs among them: the share found, the
        agreement of the ranking with the reference's, each run's bias."""
        agreement = ranking_agreement({r: self.reference[r] for r in self.names}, sim)
        bias = {r: sim[r] - self.reference[r] for r in self.names}
        return {
            "found": found / self.relevant_total if self.relevant_total else 0.0,
            "tau": agreement.tau_b,
            "swap": agreement.swap,
            "scores": sim,
            "bias": bias,
            "mean_bias": sum(bias.values()) / len(bias),
            "max_abs_bias": max(abs(b) for b in bias.values()),
            "loo": loo,
            "mean_loo": sum(loo.values()) / len(loo),
            "max_abs_loo": max(abs(v) for v in loo.values()),
            "measure": measure,
        }

    def judge_rows(
        self,
        judge: Mapping[tuple[str, str], tuple[int, float | None]],
        options: PlanOptions,
        score: _Scorer,
    ) -> list[dict[str, Any]]:
        """The automatic judge at every budget of human judgments (the module's docstring)."""
        from cmrkit.evaluation.rescore import Judgments

        names = self.names
        full = tuple(names)
        rows = []
        for budget in options.budgets:
            final, judged, labelled = _judge_final(
                self.cands_of[full], judge, self.labels, budget, options.per_query
            )
            if not labelled:
                raise CmrkitError(
                    "the judge's labels hold none of the candidates: are they of these runs' "
                    "pool (the same collection, split and depth)?"
                )
            qrels = Judgments(_qrels_of(self.cands_of[full], final))
            sim = {run: score.score(run, qrels) for run in names}
            loo = {}
            for left, subset in zip(names, self.subsets[1:], strict=True):
                without = Judgments(_qrels_of(self.cands_of[subset], final))
                loo[left] = score.score(left, without) - sim[left]
            found = sum(1 for pair in self.relevant if final.get(pair) == 1)
            rows.append(
                {
                    "strategy": JUDGE,
                    "budget": budget,
                    "judged": judged,
                    "people_share": judged / labelled,
                    "judge_labelled": labelled - judged,
                    **self._figures(sim, loo, found, score.measure),
                }
            )
        return rows


def _qrels_of(cands: Sequence[QueryCandidates], final: Mapping[tuple[str, str], int]) -> Qrels:
    """The final labels of the candidates of ``cands`` as qrels (every query listed)."""
    return {c.qid: {d: final[(c.qid, d)] for d in c.docnos if (c.qid, d) in final} for c in cands}


def _judge_final(
    cands: Sequence[QueryCandidates],
    judge: Mapping[tuple[str, str], tuple[int, float | None]],
    people: Mapping[tuple[str, str], int],
    budget: int,
    per_query: bool,
) -> tuple[dict[tuple[str, str], int], int, int]:
    """Each labelled candidate's final label when the ``budget`` least sure go to people (the
    judge's binary label for the rest), how many people judged, and how many are labelled."""
    labelled = [
        (c.qid, d) for c in cands for d in c.docnos if (c.qid, d) in judge
    ]  # pool order: the order of ties

    def doubt(pair: tuple[str, str]) -> float:
        p = judge[pair][1]
        return 0.0 if p is None else abs(p - 0.5)

    ranked = sorted(range(len(labelled)), key=lambda i: (doubt(labelled[i]), i))
    chosen: set[tuple[str, str]] = set()
    if per_query:
        taken: dict[str, int] = {}
        for i in ranked:
            q = labelled[i][0]
            if taken.get(q, 0) < budget:
                taken[q] = taken.get(q, 0) + 1
                chosen.add(labelled[i])
    else:
        chosen = {labelled[i] for i in ranked[:budget]}
    final = {
        pair: people[pair] if pair in chosen else (1 if judge[pair][0] >= 4 else 0)
        for pair in labelled
    }
    return final, len(chosen), len(labelled)


def _label_counts(labels: Mapping[tuple[str, str], int]) -> dict[str, int]:
    values = list(labels.values())
    return {
        "relevant": values.count(1),
        "not_relevant": values.count(0),
        "tied": values.count(-1),
    }


def plot_plan(plan: Plan, path: str | os.PathLike, fmt: str | None = None) -> None:
    """Write :func:`plan_figure` as PNG (300 dpi), PDF or SVG (``fmt``, default: from the
    file's extension)."""
    from cmrkit.figures import save_figure

    save_figure(plan_figure(plan), path, fmt)


def plan_figure(plan: Plan):
    """Budget on x; Kendall's tau, the share of relevant found and the largest score bias on
    y; one line per strategy. Returns the matplotlib Figure.

    Strategies often tie (tau 1.0 at every budget), so each has its own colour (Okabe-Ito),
    marker, line style and a small sideways offset: a line under another still shows. The
    budget ticks are the budgets simulated; strata rows are scored with xinfAP (or infNDCG),
    and their legend entry says so.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from cmrkit.figures import LINESTYLES, MARKERS, PALETTE

    names = list(plan.options.strategies)
    budgets = sorted({r["budget"] for r in plan.rows})
    gaps = [b - a for a, b in zip(budgets, budgets[1:], strict=False)]
    spacing = min(gaps) if gaps else max(budgets[:1] + [1])
    step = 0.1 * spacing  # the sideways offset between two strategies' points
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    for i, name in enumerate(names):
        rows = [r for r in plan.rows if r["strategy"] == name]
        shift = (i - (len(names) - 1) / 2) * step
        x = [r["budget"] + shift for r in rows]
        measure = rows[0]["measure"] if rows else plan.options.measure
        label = name if measure == plan.options.measure else f"{name} ({measure})"
        style = {
            "color": PALETTE[i % len(PALETTE)],
            "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINESTYLES[i % len(LINESTYLES)],
            "markersize": 8 - 3 * i / max(len(names) - 1, 1),  # larger ones drawn first
            "markerfacecolor": "none" if i % 2 else PALETTE[i % len(PALETTE)],
            "linewidth": 1.4,
            "label": label,
            "zorder": 2 + i,
        }
        tau = [r["tau"] if r["tau"] is not None else float("nan") for r in rows]
        axes[0].plot(x, tau, **style)
        axes[1].plot(x, [100 * r["found"] for r in rows], **style)
        axes[2].plot(x, [r["max_abs_bias"] for r in rows], **style)
    unit = "pairs per query" if plan.options.per_query else "pairs in total"
    axes[0].set_ylabel("Kendall's tau vs complete qrels")
    axes[0].set_ylim(-1.05, 1.05)
    taus = {r["tau"] for r in plan.rows}
    if len(taus) == 1 and None not in taus:  # every point on one line: say so in words
        axes[0].text(
            0.5,
            0.45,
            f"tau {taus.pop():.2f} for every strategy\nat every budget",
            transform=axes[0].transAxes,
            ha="center",
            fontsize=9,
        )
    axes[1].set_ylabel("relevant found (%)")
    axes[1].set_ylim(0, 100)
    estimated = sorted({r["measure"] for r in plan.rows} - {plan.options.measure})
    also = f" ({', '.join(estimated)} for strata)" if estimated else ""
    axes[2].set_ylabel(f"largest |bias| of a run's {plan.options.measure}{also}")
    for ax in axes:
        ax.set_xlabel(f"budget ({unit})")
        ax.set_xticks(budgets, [f"{b:,}" for b in budgets])
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=9)
    fig.suptitle(
        f"{len(plan.runs)} runs, {plan.queries} queries, {plan.options.assessors} assessor(s) "
        f"with noise {plan.options.noise}, seed {plan.options.seed}",
        fontsize=10,
    )
    fig.tight_layout()
    return fig
