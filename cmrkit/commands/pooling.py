"""`cmrkit pool`: plan, create, next, export, sample-qrels, bias."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import typer

from cmrkit.commands.choices import ExportFormat, Strategy
from cmrkit.commands.group import group
from cmrkit.commands.options import (
    FORCE_OUTPUT,
    FORCE_OUTPUTS,
    PER_QUERY,
    POOL_ARG,
    POOL_COLLECTION,
    assessors_option,
    confident_option,
    hybrid_labels,
    noise_option,
)
from cmrkit.console import console, out, user_errors

pool_app = group(
    order=("plan", "create", "next", "export", "sample-qrels", "bias"),
    help="Pool runs into assessment tasks; test a pool's reusability.",
)


def _write_json(path: Path | None, data: object, force: bool) -> None:
    if path is None:
        return
    from cmrkit.fileio import RepeatableOutputs

    with RepeatableOutputs([path], force=force) as staged:
        staged.path(path).write_text(
            json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8"
        )


@pool_app.command("create")
@user_errors
def create_command(
    runs: list[Path] = typer.Argument(..., help="TREC run files to pool."),
    output: Path = typer.Option(..., "-o", "--output", help="Pool file to write (JSONL)."),
    collection: Path | None = typer.Option(
        None,
        "--collection",
        help="Collection folder of the runs [default: collections/NAME for runs/NAME/*.trec].",
    ),
    depth: int | None = typer.Option(
        None,
        help="Pool the top DEPTH documents of each run per query (default 30; strata: where "
        "the last stratum ends).",
    ),
    qrels: list[Path] = typer.Option(
        [],
        "--qrels",
        help="Judged pairs to leave out of the pool (repeatable), e.g. the collection's own "
        "qrels: its annotated positives need no judging.",
    ),
    topics: Path | None = typer.Option(
        None, help="Pool only these queries (topics TSV or topics.jsonl)."
    ),
    sample: str | None = typer.Option(
        None,
        help="Judging budget: share to judge per best-rank stratum, e.g. 1-10:1.0,11-30:0.5;"
        " the rest stays pooled but unjudged (-1).",
    ),
    strategy: Strategy = typer.Option(
        Strategy.depth, help="Which pairs to judge: depth, rbp, rrf, mtf, maxmean or strata."
    ),
    budget: int | None = typer.Option(
        None, help="Pairs to judge, in total (or per query with --per-query)."
    ),
    per_query: bool = PER_QUERY,
    rbp_p: float = typer.Option(0.8, help="rbp: persistence p of the RBP weights."),
    rrf_k: float = typer.Option(60.0, help="rrf: the constant k of 1/(k + rank)."),
    strata: str | None = typer.Option(
        None,
        help="strata: best-rank strata and sampling rates (default 1-10:1.0,11-30:0.5,"
        "31-100:0.1); a --budget scales the rates.",
    ),
    batch: int | None = typer.Option(
        None,
        "--batch",
        help="mtf, maxmean: pairs in the first round (default one per query).",
    ),
    simulate: Path | None = typer.Option(
        None,
        help="mtf, maxmean: run every round against simulated assessors who know these qrels.",
    ),
    assessors: int = assessors_option("--simulate: number of assessors (majority vote)."),
    noise: float = noise_option("--simulate: probability an assessor flips the truth."),
    seed: int = typer.Option(0, help="Seed of the --sample or strata draw and of --simulate."),
    report: Path | None = typer.Option(None, help="Also write the pool report as JSON here."),
    auto: Path | None = typer.Option(
        None,
        "--auto",
        metavar="LABELS",
        help="Hybrid judging: an automatic judge's labels of this pool (`judgments auto`); the "
        "pairs it is sure of (--confident) take its label, people judge the rest.",
    ),
    confident: float | None = confident_option(),
    force: bool = FORCE_OUTPUTS,
) -> None:
    """Pool the top DEPTH of each run per query; a strategy picks the pairs to judge.

    Pairs already judged (--qrels) are left out. Without --strategy or --budget every pair is
    judged (or a --sample of them).

    Example: cmrkit pool create runs/sample/bm25.test.trec runs/sample/fields-doc.test.trec
    --depth 30 --qrels qrels/sample.test.txt -o pools/sample.pool.jsonl

    Example: cmrkit pool create runs/sample/bm25.test.trec runs/sample/fields-doc.test.trec
    --strategy maxmean --budget 20 --per-query --depth 100 -o pools/maxmean.pool.jsonl
    """
    from cmrkit.collection.layout import bare_name
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.pooling import (
        StrategyOptions,
        annotated_pairs,
        infer_collection,
        plain_pool,
        pool_report,
        pool_runs,
        write_pool,
    )

    opts = StrategyOptions(
        name=strategy,
        budget=budget,
        per_query=per_query,
        rbp_p=rbp_p,
        rrf_k=rrf_k,
        strata=strata,
        batch=batch,
        seed=seed,
    )
    plain_pool(opts, sample)  # refused before any output is claimed
    hybrid = hybrid_labels(auto, confident)
    where = bare_name(collection) if collection else infer_collection(runs)
    targets = [output] + ([report] if report else [])
    with RepeatableOutputs(targets, force=force) as staged, console.status("pooling the runs"):
        pool = pool_runs(
            runs,
            where,
            opts,
            depth=depth,
            exclude=qrels,
            topics=topics,
            sample=sample,
            simulate=simulate,
            assessors=assessors,
            noise=noise,
        )
        write_pool(pool, staged.path(output))
        if hybrid is not None:
            from cmrkit.fileio import sha256_file

            hybrid.check_pool(pool, sha256_file(staged.path(output)), output)
            hybrid.apply(pool)
            write_pool(pool, staged.path(output))
        rep = pool_report(pool)
        if report:
            staged.path(report).write_text(
                json.dumps(rep, indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
    _print_pool_report(rep)
    if not qrels:
        for path, n in annotated_pairs(pool, where).items():
            out.print(
                f"note: {n:,} pooled pairs are already judged in {path} (the annotations); "
                f"pass --qrels {path} to leave them out",
                markup=False,
            )
    chosen = pool.header.get("strategy")
    if chosen and chosen.get("rounds") and not chosen.get("simulated"):
        out.print(
            f"round 1: {rep['sampled']} pairs to judge; then `cmrkit pool next {output} "
            "--judgments FILE -o NEXT`",
            markup=False,
        )
    if staged.up_to_date:
        out.print(f"{output} is up to date; --force rewrites it", markup=False)
        return
    console.print(f"wrote {output}")


@pool_app.command("next")
@user_errors
def next_command(
    pool_file: Path = typer.Argument(..., metavar="POOL", help="An mtf or maxmean pool."),
    judgments: list[Path] = typer.Option(
        ...,
        "--judgments",
        "-j",
        help="Judgments of the pairs chosen so far: assessors' CSVs (simple or MTurk) or qrels "
        "(repeatable).",
    ),
    output: Path = typer.Option(..., "-o", "--output", help="The pool with the next round."),
    n: int | None = typer.Option(
        None, "--batch", help="Pairs in the next round (default one per query)."
    ),
    keys: list[Path] = typer.Option(
        [],
        "--key",
        help="Answer key(s) from `pool export` mapping blind pair ids back (repeatable).",
    ),
    gold: Path | None = typer.Option(
        None, help="Qrels of the known-answer pairs shown to assessors (their judgments skipped)."
    ),
    force: bool = FORCE_OUTPUT,
) -> None:
    """Record the judgments of an adaptive pool's chosen pairs and choose the next round.

    The next round's pairs are the ones to judge (`sampled`): export them with `pool export`.

    Example: cmrkit pool next pools/mtf.pool.jsonl --judgments round1.csv
    --key pools/mtf.key.tsv --batch 200 -o pools/mtf.round2.pool.jsonl
    """
    from cmrkit.assess.key import merge_keys
    from cmrkit.errors import CmrkitError
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.judgments.human import read_feedback
    from cmrkit.pooling import next_round, pool_report, read_pool, write_pool
    from cmrkit.trec import read_qrels

    if n is not None and n < 1:
        raise CmrkitError(f"--batch must be at least 1, not {n}")
    with RepeatableOutputs([output], force=force) as staged:
        pool = read_pool(pool_file)
        key = merge_keys(keys) if keys else None
        known: dict[tuple[str, str], int] = {}
        if gold is not None:
            known = {(q, d): r for q, docs in read_qrels(gold).items() for d, r in docs.items()}
        for entry in (key or {}).values():
            if entry.gold is not None:
                known.setdefault((entry.qid, entry.docno), entry.gold)
        labels, where = read_feedback(judgments, known, key)
        new = next_round(pool, labels, n, where)
        write_pool(new, staged.path(output))
    rep = pool_report(new)
    s = new.header["strategy"]
    out.print(
        f"round {s['rounds']}: {rep['sampled']} pairs to judge ({s['selected']} chosen of the "
        f"budget {s['budget']}{' per query' if s['per_query'] else ''})",
        markup=False,
    )
    if staged.up_to_date:
        out.print(f"{output} is up to date; --force rewrites it", markup=False)
        return
    console.print(f"wrote {output}", markup=False)


@pool_app.command("sample-qrels")
@user_errors
def sample_qrels_command(
    pool_file: Path = typer.Argument(..., metavar="POOL", help="A strata pool (or a full one)."),
    qrels: Path = typer.Argument(..., help="Qrels of its judgments (`judgments aggregate`)."),
    output: Path = typer.Option(..., "-o", "--output", help="sample_eval qrels to write."),
    force: bool = FORCE_OUTPUT,
) -> None:
    """Write sample_eval's qrels (qid 0 docno stratum rel) for xinfAP and infNDCG.

    Every pooled pair is listed with its stratum, -1 when it was not sampled; judged pairs
    outside the pool (the annotations left out of it) form the stratum `known`.

    Example: cmrkit pool sample-qrels pools/strata.pool.jsonl qrels/sample.pooled.txt
    -o qrels/sample.strata.txt
    """
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.pooling import read_pool, sample_qrels
    from cmrkit.trec import read_qrels, write_sampled_qrels

    with RepeatableOutputs([output], force=force) as staged:
        judged, strata = sample_qrels(read_pool(pool_file), read_qrels(qrels))
        with open(staged.path(output), "w", encoding="utf-8", newline="\n") as f:
            write_sampled_qrels(f, judged, strata)
    if staged.up_to_date:
        out.print(f"{output} is up to date; --force rewrites it", markup=False)
        return
    lines = sum(len(d) for d in judged.values())
    console.print(f"wrote {lines} lines for {len(judged)} queries to {output}", markup=False)


def _print_pool_report(rep: dict) -> None:
    from cmrkit.commands.tables import Table, render

    pq = rep["per_query"]
    out.print(
        f"queries {rep['queries']}  pairs {rep['pairs']}  to judge {rep['sampled']}  "
        + (
            f"taken by the judge {rep['judge_labelled']}  "
            if rep.get("judge_labelled") is not None
            else ""
        )
        + f"known pairs left out {rep['excluded_known']}  candidates per query: "
        f"mean {pq['mean']:.1f} min {pq['min']} max {pq['max']}"
    )
    t = Table("runs", ("run", "contributed", "unique"))
    for name, r in rep["runs"].items():
        t.add_row(name, str(r["contributed"]), str(r["unique"]))
    render(t, out)
    if rep["overlap"]:
        t = Table("overlap between runs", ("runs", "shared", "jaccard"))
        for pair, o in rep["overlap"].items():
            t.add_row(pair.replace("|", " & "), str(o["shared"]), f"{o['jaccard']:.3f}")
        render(t, out)


def _plan(tasks, price: float | None, assignments: int) -> str:
    t = tasks.tasks
    gold = tasks.gold_pairs
    line = (
        f"{len(t) - gold:,} pool pairs"
        + (f" + {gold:,} gold pairs" if gold else "")
        + f" in {tasks.hits:,} HITs"
    )
    if price is not None:
        cost = tasks.hits * price * assignments
        line += (
            f"; at ${price:.2f} per HIT x {assignments} assignment(s): ${cost:,.2f} "
            "(before MTurk fees)"
        )
    return line


def _int_list(text: str, option: str) -> tuple[int, ...]:
    from cmrkit.errors import CmrkitError

    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise CmrkitError(f"{option} {text!r} is not a comma-separated list of integers") from None
    if not values:
        raise CmrkitError(f"{option} lists nothing")
    return values


@pool_app.command("plan")
@user_errors
def plan_command(
    runs: list[Path] = typer.Argument(..., help="TREC run files (two or more)."),
    qrels: Path = typer.Option(
        ..., "--qrels", help="Complete (or dense enough) qrels: the truth the simulation uses."
    ),
    budgets: str = typer.Option(
        ..., help="Budgets to simulate, comma-separated pairs to judge (e.g. 5,10,20,30,50)."
    ),
    per_query: bool = typer.Option(False, "--per-query", help="The budgets are per query."),
    strategies: str = typer.Option(
        "depth,rbp,rrf,mtf,maxmean,strata", help="Strategies to simulate, comma-separated."
    ),
    collection: Path | None = typer.Option(
        None, "--collection", help="Collection folder of the runs [default: inferred]."
    ),
    depth: int = typer.Option(100, help="Candidates: the top DEPTH of each run per query."),
    measure: str = typer.Option(
        "AP", help="AP or nDCG (strata are scored with xinfAP or infNDCG)."
    ),
    assessors: int = assessors_option("Simulated assessors per pair (majority vote)."),
    noise: float = noise_option("Probability an assessor flips the truth."),
    seed: int = typer.Option(0, help="Seed of the assessors and of the strata draw."),
    rbp_p: float = typer.Option(0.8, help="rbp: persistence."),
    rrf_k: float = typer.Option(60.0, help="rrf: the constant k."),
    strata: str | None = typer.Option(None, help="strata: strata and rates (scaled to budgets)."),
    auto: Path | None = typer.Option(
        None,
        "--auto",
        metavar="LABELS",
        help="Also simulate the automatic judge (strategy judge): at each budget the least sure "
        "of its labelled pairs go to people, the rest keep its label.",
    ),
    per_run: bool = typer.Option(False, "--per-run", help="Also a table of each run's bias."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the full results as JSON."),
    plot: Path | None = typer.Option(
        None,
        help="Write tau, relevant found and bias by budget as FILE.png (300 dpi), FILE.pdf or "
        "FILE.svg.",
    ),
    force: bool = FORCE_OUTPUTS,
) -> None:
    """Simulate pooling strategies x budgets with noisy assessors against complete qrels.

    Reports relevant found, judgments, Kendall's tau and the largest swap of the run ranking,
    score bias, and the leave-one-run-out bias of a new system; seeded. With --auto LABELS the
    automatic judge is a strategy too: at each budget of human judgments, the least sure of
    its labelled pairs go to the simulated people and the rest keep the judge's label.

    Example: cmrkit pool plan runs/sample/bm25.test.trec runs/sample/fields-doc.test.trec
    --qrels qrels/sample.test.txt --budgets 5,10,20,30,50 --per-query --plot plan.png
    """
    from cmrkit.collection.layout import bare_name
    from cmrkit.figures import figure_format
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.pooling import infer_collection
    from cmrkit.pooling.plan import PlanOptions, plan_pool, plot_plan, unjudged_warning

    if plot is not None:
        figure_format(plot)  # a name that is no PNG, PDF or SVG fails before any work
    names = tuple(s.strip() for s in strategies.split(",") if s.strip())
    judge = None
    if auto is not None:
        from cmrkit.judgments.auto.labels import read_labels
        from cmrkit.pooling.plan import JUDGE

        judge = {lb.key: (lb.label, lb.probability) for lb in read_labels(auto)}
        names = names if JUDGE in names else (*names, JUDGE)
    options = PlanOptions(
        budgets=_int_list(budgets, "--budgets"),
        strategies=names,
        per_query=per_query,
        depth=depth,
        measure=measure,
        assessors=assessors,
        noise=noise,
        seed=seed,
        rbp_p=rbp_p,
        rrf_k=rrf_k,
        strata=strata,
    )
    options.check()
    targets = [p for p in (json_out, plot) if p is not None]
    staging = RepeatableOutputs(targets, force=force) if targets else contextlib.nullcontext()
    with staging as staged:
        from cmrkit.console import progress_bar

        with progress_bar(True, "simulating strategies", transient=True, eta=False) as bar:
            task = bar.add_task("plan", total=None)
            result = plan_pool(
                runs,
                bare_name(collection) if collection else infer_collection(runs),
                qrels,
                options,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
                judge=judge,
            )
        if json_out is not None:
            staged.path(json_out).write_text(
                json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
        if plot is not None:
            plot_plan(result, staged.path(plot))
    _print_plan(result, per_run)
    if (unjudged := unjudged_warning(result, qrels)) is not None:
        console.print(f"warning: {unjudged}", markup=False, soft_wrap=True)
    if targets and staging.up_to_date:
        out.print(f"{', '.join(map(str, targets))}: up to date; --force rewrites", markup=False)
        return
    for p in targets:
        console.print(f"wrote {p}", markup=False)


def _print_plan(plan, per_run: bool) -> None:
    from cmrkit.commands.tables import Table, render
    from cmrkit.pooling.plan import MEASURES

    o = plan.options
    labels = plan.info["assessor_labels"]
    out.print(
        f"{len(plan.runs)} runs, {plan.queries} queries, {plan.relevant} relevant pairs "
        f"({plan.findable} among the\n{plan.info['candidates']} candidates, depth "
        f"{o.candidate_depth}); {o.assessors} assessor(s), noise {o.noise}, seed {o.seed}:\n"
        f"{labels['relevant']} candidates judged relevant, {labels['not_relevant']} not, "
        f"{labels['tied']} tied",
        markup=False,
    )
    out.print(f"{o.measure} on the complete qrels:", markup=False)
    for r in plan.runs:
        out.print(f"  {plan.reference[r]:.4f}  {r}", markup=False)
    unit = "per query" if o.per_query else "in total"
    t = Table(
        f"strategies x budgets ({unit}); bias = simulated - complete {o.measure}",
        ("strategy", "budget", "judged", "found", "tau", "swap", "bias", "|bias|", "LOO"),
        caption="found: relevant pairs judged / all relevant. tau, swap: the run ranking vs "
        "the complete qrels. bias: mean over runs; |bias|: the largest. LOO: mean change of a "
        f"run's score when left out of the pool. strata are scored with {MEASURES[o.measure]}."
        + (
            " judge: judged by people (their share of the judge's labelled pairs), the rest "
            "the judge's label; found: relevant pairs labelled relevant / all relevant."
            if "judge" in o.strategies
            else ""
        ),
    )
    for r in plan.rows:
        share = f" ({100 * r['people_share']:.0f}%)" if "people_share" in r else ""
        t.add_row(
            r["strategy"],
            str(r["budget"]),
            f"{r['judged']}{share}",
            f"{100 * r['found']:.1f}%",
            "-" if r["tau"] is None else f"{r['tau']:.2f}",
            f"{r['swap']:.3f}",
            f"{r['mean_bias']:+.3f}",
            f"{r['max_abs_bias']:.3f}",
            f"{r['mean_loo']:+.3f}",
        )
    render(t, out)
    if per_run:
        t = Table("per run", ("strategy", "budget", "run", "score", "bias", "LOO"), keys=3)
        for r in plan.rows:
            for run in plan.runs:
                t.add_row(
                    r["strategy"],
                    str(r["budget"]),
                    run,
                    f"{r['scores'][run]:.4f}",
                    f"{r['bias'][run]:+.4f}",
                    f"{r['loo'][run]:+.4f}",
                )
        render(t, out)


@pool_app.command("export")
@user_errors
def export_command(
    pool_file: Path = POOL_ARG,
    fmt: ExportFormat = typer.Option(..., "--format", "-f", help="mturk, jsonl or html."),
    output: Path = typer.Option(
        ...,
        "-o",
        "--output",
        help="Output file (jsonl, html) or folder (mturk: batch-input.csv + hit-layout.html).",
    ),
    key: Path | None = typer.Option(
        None,
        "--key",
        help="Answer key to write (pair ids -> query, candidate, gold); keep it from the "
        "assessors. [default: OUTPUT with .key.tsv, beside it]",
    ),
    collection: Path | None = POOL_COLLECTION,
    per_hit: int = typer.Option(10, help="Pool pairs per HIT."),
    gold: Path | None = typer.Option(
        None, help="Qrels of known answers (rel > 0 relevant, 0 not) for quality-control pairs."
    ),
    gold_per_hit: int = typer.Option(0, help="Pairs of known answer added to each HIT."),
    seed: int = typer.Option(0, help="Seed for the order of pairs, HITs and gold pairs."),
    blind: bool = typer.Option(
        True,
        "--blind/--no-blind",
        help="Blind: assessors see opaque pair ids only, no marks on the candidates' annotated "
        "mentions, no titles that tell annotated units from distractors. --no-blind shows the "
        "real ids, titles and annotated mentions (they reveal which candidates were annotated).",
    ),
    context_chars: int = typer.Option(
        600, help="Characters of each unit shown around its mention; the rest is folded."
    ),
    price_per_hit: float | None = typer.Option(
        None, help="Print the cost of the batch at this price per HIT (e.g. 0.13)."
    ),
    assignments: int = typer.Option(
        3, help="Assessors per HIT, for the cost (the CMR protocol: 3, then 2 more)."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the pairs, HITs and cost; write nothing."
    ),
    title: str = typer.Option("Coreference search assessment", help="Title of the HTML page."),
    force: bool = FORCE_OUTPUTS,
) -> None:
    """Write assessment tasks for the pool's pairs: MTurk batch, JSON lines or an HTML page.

    Prints the number of pairs and HITs (and the cost, with --price-per-hit) before writing.
    Tasks are blind by default: `judgments aggregate --key KEY` maps the pair ids back.

    Example: cmrkit pool export pools/sample.pool.jsonl --format html -o pools/sample.html
    """
    from cmrkit.assess.key import default_key_path, write_key
    from cmrkit.assess.render import write_html, write_jsonl, write_mturk
    from cmrkit.assess.tasks import build_tasks, read_gold
    from cmrkit.collection.layout import bare_name
    from cmrkit.errors import CmrkitError
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.pooling import check_collection, read_pool

    if context_chars < 100:
        raise CmrkitError(f"--context-chars must be at least 100, not {context_chars}")
    if assignments < 1:
        raise CmrkitError(f"--assignments must be at least 1, not {assignments}")
    pool = read_pool(pool_file)
    where = bare_name(collection) if collection else Path(pool.header["collection"]["path"])
    check_collection(pool, where, pool_file)
    known = read_gold(gold) if gold else None
    key = key or Path(default_key_path(output))
    targets = (
        [output / "batch-input.csv", output / "hit-layout.html"] if fmt == "mturk" else [output]
    )
    if key.resolve() in {t.resolve() for t in targets}:
        raise CmrkitError("--key must not be the tasks file itself; name another file", path=key)
    with console.status("reading the collection"):
        tasks = build_tasks(
            pool,
            where,
            per_hit=per_hit,
            gold=known,
            gold_per_hit=gold_per_hit,
            seed=seed,
            blind=blind,
            max_chars=context_chars,
        )
    out.print(_plan(tasks, price_per_hit, assignments), markup=False)
    for note in tasks.notes:
        out.print(note, markup=False)
    if dry_run:
        return
    with RepeatableOutputs([*targets, key], force=force, anchor=output.parent) as staged:
        if fmt == "mturk":
            write_mturk(tasks, staged.path(targets[0]), staged.path(targets[1]))
        elif fmt == "jsonl":
            write_jsonl(tasks, staged.path(output))
        else:
            write_html(tasks, staged.path(output), title)
        write_key(tasks.key(), staged.path(key))
    if staged.up_to_date:
        out.print(f"{output} and {key} are up to date; --force rewrites them", markup=False)
        return
    size = sum(p.stat().st_size for p in targets)
    console.print(
        f"wrote {len(tasks.tasks)} tasks in {tasks.hits} HITs to {output} ({size / 1e6:.1f} MB) "
        f"and the answer key to {key} (keep it from the assessors)",
        markup=False,
        soft_wrap=True,
    )


@pool_app.command("bias")
@user_errors
def bias_command(
    pool_file: Path = POOL_ARG,
    runs: list[Path] = typer.Argument(..., help="The pooled run files."),
    qrels: Path = typer.Option(..., "--qrels", help="Qrels made from the pool."),
    measure: str = typer.Option("infAP", help="trec_eval measure to score with."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the rows as JSON."),
    force: bool = FORCE_OUTPUTS,
) -> None:
    """Leave-one-run-out reusability: each run rescored without the pairs only it pooled.

    Example: cmrkit pool bias pools/sample.pool.jsonl runs/sample/bm25.test.trec
    runs/sample/fields-doc.test.trec --qrels qrels/sample.pooled.txt
    """
    from cmrkit.commands.tables import Table, cell, render
    from cmrkit.pooling import pool_bias, read_pool

    rows = pool_bias(read_pool(pool_file), runs, qrels, measure=measure)
    _write_json(json_out, rows, force)
    cols = {
        "run": "run",
        "unique_pairs": "only it",
        "unique_relevant": "rel only it",
        "score": "score",
        "score_without": "score w/o",
        "delta": "delta",
        "rank": "rank",
        "rank_without": "rank w/o",
    }
    caption = (
        "only it: pairs only this run pooled (rel: the relevant ones); w/o: scored and ranked "
        "without them"
    )
    t = Table(f"leave one run out ({measure})", list(cols.values()), caption=caption)
    for r in rows:
        t.add_row(*(cell(r[c]) for c in cols))
    render(t, out)


def register(app: typer.Typer) -> None:
    """Add the `pool` group to the app (`judgments`: commands/judgments.py)."""
    app.add_typer(pool_app, name="pool")
