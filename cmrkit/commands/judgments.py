"""`cmrkit judgments`: the group, and its commands on people's answers: `aggregate` (answers to
qrels) and `simulate` (answers from simulated assessors). `auto` (automatic judges) and `check`
(how far a judge can be trusted) join the group from commands/judge.py and judge_check.py."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cmrkit.commands.group import group
from cmrkit.commands.options import FORCE_OUTPUTS, assessors_option, noise_option
from cmrkit.console import console, out, user_errors

judgments_app = group(
    order=("simulate", "auto", "check", "aggregate"),
    help="Turn answers into qrels; simulate assessors; judge automatically, check a judge.",
)

MAX_QUERY_ROWS = 30


def register(app: typer.Typer) -> None:
    """Add the `judgments` group to the app."""
    app.add_typer(judgments_app, name="judgments")


@judgments_app.command("aggregate")
@user_errors
def aggregate_command(
    files: list[Path] = typer.Argument(
        ..., metavar="JUDGMENTS", help="MTurk batch results or simple CSV files."
    ),
    pool_file: Path = typer.Option(..., "--pool", help="The pool the judgments are for."),
    output: Path = typer.Option(..., "-o", "--output", help="Qrels to write."),
    keys: list[Path] = typer.Option(
        [],
        "--key",
        help="Answer key(s) from `pool export` mapping blind pair ids back (repeatable, one per "
        "export); their gold pairs score the workers.",
    ),
    known: list[Path] = typer.Option(
        [], "--qrels", help="Known judgments (the annotations' qrels) to merge in (repeatable)."
    ),
    gold: Path | None = typer.Option(
        None, help="Qrels of the gold pairs shown to assessors (the --key files hold them too)."
    ),
    min_agree: int = typer.Option(4, help="Assessors who must agree for a label."),
    min_unanimous: int = typer.Option(
        3,
        help="Or this many, all agreeing (no dissent), for a label (one assessor per pair: 1).",
    ),
    max_assessors: int = typer.Option(5, help="Most assessors a pair may get (for --needs-more)."),
    min_worker_accuracy: float = typer.Option(
        0.0, help="Drop workers below this accuracy on gold pairs."
    ),
    hard_threshold: float = typer.Option(
        0.5, help="Set aside queries whose share of pairs with disagreement exceeds this."
    ),
    hard: Path | None = typer.Option(
        None, help="Qrels of the hard queries (default: OUTPUT with .hard before the suffix)."
    ),
    min_relevant: int = typer.Option(
        5,
        help="Drop queries with fewer relevant pairs (the CMR protocol's rule; build-collection "
        "keeps every query with one known relevant).",
    ),
    needs_more: Path | None = typer.Option(
        None, help="Write the pairs that need more assessments as a pool file here."
    ),
    report: Path | None = typer.Option(None, help="Also write the full report as JSON here."),
    force: bool = FORCE_OUTPUTS,
) -> None:
    """Aggregate assessors' labels into qrels: 1, 0, or -1 when too few agree.

    Example: cmrkit judgments aggregate pools/round1.csv --pool pools/sample.pool.jsonl
    --key pools/sample.key.tsv --qrels qrels/sample.test.txt -o qrels/sample.pooled.txt
    """
    from cmrkit.commands.output import check_order

    usage = "usage: cmrkit judgments aggregate JUDGMENTS.csv... --pool POOL.jsonl -o QRELS"
    check_order([*((f, "a CSV") for f in files), (pool_file, "JSON lines"),
                 *((k, "qrels") for k in [*known, *([gold] if gold else [])])], usage)  # fmt: skip
    from cmrkit.assess.key import merge_keys
    from cmrkit.assess.tasks import read_gold
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.judgments.human import aggregate, nothing_kept, read_judgments
    from cmrkit.pooling import read_pool, subset_pool, write_pool
    from cmrkit.trec import read_qrels, write_qrels

    hard = hard or output.with_name(f"{output.stem}.hard{output.suffix}")
    targets = [output, hard] + [p for p in (needs_more, report) if p]
    with RepeatableOutputs(targets, force=force) as staged:
        pool = read_pool(pool_file)
        key = merge_keys(keys) if keys else None
        known_answers = read_gold(gold) if gold else {}
        for entry in (key or {}).values():
            if entry.gold is not None:
                known_answers.setdefault((entry.qid, entry.docno), entry.gold)
        counts: dict[str, int] = {}
        judgments = [j for f in files for j in read_judgments(f, counts, key)]
        merged: dict[str, dict[str, int]] = {}
        for k in known:
            for qid, docs in read_qrels(k).items():
                merged.setdefault(qid, {}).update(docs)
        result = aggregate(
            judgments,
            pool,
            known=merged,
            gold=known_answers or None,
            min_agree=min_agree,
            min_unanimous=min_unanimous,
            max_assessors=max_assessors,
            min_worker_accuracy=min_worker_accuracy,
            hard_threshold=hard_threshold,
            min_relevant=min_relevant,
            counts=counts,
            can_get=max_assessors if needs_more else None,  # the next rounds' pairs
        )
        with open(staged.path(output), "w", encoding="utf-8", newline="\n") as f:
            write_qrels(f, result.qrels)
        with open(staged.path(hard), "w", encoding="utf-8", newline="\n") as f:
            write_qrels(f, result.hard)
        if needs_more:
            extra = {"needs_more_of": [str(p) for p in files], "min_agree": min_agree}
            write_pool(subset_pool(pool, result.needs_more, extra), staged.path(needs_more))
        if report:
            staged.path(report).write_text(
                json.dumps(result.report, indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
    _print_aggregate_report(result.report, min_relevant)
    if (empty := nothing_kept(result, min_relevant, hard_threshold)) is not None:
        console.print(f"warning: {empty}", markup=False, soft_wrap=True)
    if staged.up_to_date:
        out.print(f"{output} is up to date; --force rewrites it", markup=False)
        return
    console.print(f"wrote {output} and {hard}" + (f" and {needs_more}" if needs_more else ""))


def _print_aggregate_report(rep: dict, min_relevant: int) -> None:
    from cmrkit.commands.tables import Table, cell, render

    a = rep["agreement"]
    out.print(
        f"judgments {rep['judgments']}  ignored (not in pool) {rep['ignored_not_in_pool']}  "
        f"rejected assignments {rep['rejected_assignments']}  duplicate votes "
        f"{rep['duplicate_votes']}  dropped-worker judgments {rep['dropped_worker_judgments']}"
    )
    for ex in rep["ignored_examples"]:
        out.print(f"  ignored: {ex}")
    out.print(
        f"agreement over {a['pairs']} pairs with 2+ assessors: unanimous "
        f"{cell(a['unanimous'])}  Fleiss kappa {cell(a['kappa'])}  "
        f"(5-point {cell(a['kappa_likert'])})"
    )
    lab = rep["labels"]
    out.print(
        f"qrels: relevant {lab['relevant']}  non-relevant {lab['non_relevant']}  "
        f"unknown {lab['unknown']}  pairs needing more assessments {rep['needs_more']}"
    )
    if "judge_labelled" in rep:
        out.print(
            f"the judge's labels taken for {rep['judge_labelled']} pairs (hybrid pool, "
            f"{rep['judge'].get('worker')}, --confident {rep['judge'].get('confident')})",
            markup=False,
        )
    if any(w["gold"] for w in rep["workers"].values()):
        t = Table("workers on gold pairs", ("worker", "judgments", "gold", "accuracy", "dropped"))
        for name, w in rep["workers"].items():
            t.add_row(
                name,
                str(w["judgments"]),
                str(w["gold"]),
                cell(w["accuracy"]),
                "yes" if w["dropped"] else "",
            )
        render(t, out)
    statuses = [q["status"] for q in rep["queries"].values()]
    out.print(
        f"queries kept {statuses.count('kept')}  hard (set aside) {len(rep['hard_queries'])}  "
        f"dropped with fewer than {min_relevant} relevant {len(rep['dropped_queries'])} "
        "(--min-relevant: the CMR protocol drops queries with 4 or fewer relevant; "
        "build-collection keeps any query with 1)"
    )
    if len(statuses) > MAX_QUERY_ROWS:
        out.print("per-query agreement and incompleteness: see --report FILE.json")
        return
    cols = (
        "status",
        "judged",
        "relevant",
        "unknown",
        "incompleteness",
        "pairs",
        "unanimous",
        "kappa",
    )
    t = Table("queries", ("query", *cols), keys=2)
    for qid, q in rep["queries"].items():
        t.add_row(qid, *(cell(q[c]) for c in cols))
    render(t, out)


@judgments_app.command("simulate")
@user_errors
def simulate_command(
    qrels: Path = typer.Option(..., "--qrels", help="Complete gold qrels the assessors know."),
    pool_file: Path = typer.Option(..., "--pool", help="The pool whose pairs to answer."),
    output: Path = typer.Option(..., "-o", "--output", help="Simple CSV to write."),
    assessors: int = assessors_option("Number of fake assessors (each answers every pair)."),
    noise: float = noise_option("Probability that an assessor flips the truth."),
    seed: int = typer.Option(0, help="Seed of the assessors' errors and Likert choices."),
    worker_prefix: str = typer.Option("sim", help="Worker ids are PREFIX01, PREFIX02, ..."),
    force: bool = FORCE_OUTPUTS,
) -> None:
    """Fake assessors answering the pool from complete qrels, with a given error rate.

    Example: cmrkit judgments simulate --qrels qrels/sample.test.txt
    --pool pools/sample.pool.jsonl --assessors 3 --noise 0.1 -o pools/round1.csv
    """
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.judgments.human import write_simple_csv
    from cmrkit.judgments.simulated import simulate
    from cmrkit.pooling import read_pool
    from cmrkit.trec import read_qrels

    with RepeatableOutputs([output], force=force) as staged:
        rows = simulate(
            read_pool(pool_file),
            read_qrels(qrels),
            assessors=assessors,
            noise=noise,
            seed=seed,
            worker_prefix=worker_prefix,
        )
        write_simple_csv(rows, staged.path(output))
    if staged.up_to_date:
        out.print(f"{output} is up to date; --force rewrites it", markup=False)
        return
    console.print(f"wrote {len(rows)} judgments to {output}")
