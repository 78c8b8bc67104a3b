"""`cmrkit pool` (create, export, bias) and `cmrkit judgments` (aggregate, simulate)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cmrkit.commands.group import group
from cmrkit.console import console, out, user_errors

pool_app = group(
    order=("create", "export", "bias"),
    help="Pool runs into assessment tasks; test a pool's reusability.",
)
judgments_app = group(
    order=("simulate", "aggregate"),
    help="Turn assessors' answers into qrels; simulate assessors.",
)

FORMATS = ("mturk", "jsonl", "html")
MAX_QUERY_ROWS = 30


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


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
def create(
    runs: list[Path] = typer.Argument(..., help="TREC run files to pool."),
    output: Path = typer.Option(..., "-o", "--output", help="Pool file to write (JSONL)."),
    collection: Path | None = typer.Option(
        None,
        "--collection",
        help="Collection folder of the runs [default: collections/NAME for runs/NAME/*.trec].",
    ),
    depth: int = typer.Option(30, help="Pool the top DEPTH documents of each run per query."),
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
    seed: int = typer.Option(0, help="Seed of the --sample draw."),
    report: Path | None = typer.Option(None, help="Also write the pool report as JSON here."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing outputs."),
) -> None:
    """Pool the top DEPTH of each run per query, leaving out pairs already judged.

    Example: cmrkit pool create runs/sample/bm25.test.trec runs/sample/fields-doc.test.trec
    --depth 30 --qrels qrels/sample.test.txt -o pools/sample.pool.jsonl
    """
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.pooling import (
        annotated_pairs,
        create_pool,
        infer_collection,
        pool_report,
        write_pool,
    )

    where = collection or infer_collection(runs)
    targets = [output] + ([report] if report else [])
    with RepeatableOutputs(targets, force=force) as staged, console.status("pooling the runs"):
        pool = create_pool(
            runs,
            where,
            depth=depth,
            exclude=qrels,
            topics=topics,
            sample=sample,
            seed=seed,
        )
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
    if staged.up_to_date:
        out.print(f"{output} is up to date; --force rewrites it", markup=False)
        return
    console.print(f"wrote {output}")


def _print_pool_report(rep: dict) -> None:
    from cmrkit.tables import Table, render

    pq = rep["per_query"]
    out.print(
        f"queries {rep['queries']}  pairs {rep['pairs']}  to judge {rep['sampled']}  "
        f"known pairs left out {rep['excluded_known']}  candidates per query: "
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


@pool_app.command("export")
@user_errors
def export(
    pool_file: Path = typer.Argument(..., metavar="POOL", help="Pool file from `pool create`."),
    fmt: str = typer.Option(..., "--format", "-f", help="mturk, jsonl or html."),
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
    collection: Path | None = typer.Option(
        None, "--collection", help="The pool's collection folder [default: as recorded]."
    ),
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
    force: bool = typer.Option(False, "--force", help="Overwrite existing outputs."),
) -> None:
    """Write assessment tasks for the pool's pairs: MTurk batch, JSON lines or an HTML page.

    Prints the number of pairs and HITs (and the cost, with --price-per-hit) before writing.
    Tasks are blind by default: `judgments aggregate --key KEY` maps the pair ids back.

    Example: cmrkit pool export pools/sample.pool.jsonl --format html -o pools/sample.html
    """
    from cmrkit.assess.key import default_key_path, write_key
    from cmrkit.assess.render import write_html, write_jsonl, write_mturk
    from cmrkit.assess.tasks import build_tasks, read_gold
    from cmrkit.errors import CmrkitError
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.pooling import check_collection, read_pool

    if fmt not in FORMATS:
        raise CmrkitError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
    if context_chars < 100:
        raise CmrkitError(f"--context-chars must be at least 100, not {context_chars}")
    if assignments < 1:
        raise CmrkitError(f"--assignments must be at least 1, not {assignments}")
    pool = read_pool(pool_file)
    where = collection or Path(pool.header["collection"]["path"])
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
def bias(
    pool_file: Path = typer.Argument(..., metavar="POOL", help="Pool file from `pool create`."),
    runs: list[Path] = typer.Argument(..., help="The pooled run files."),
    qrels: Path = typer.Option(..., "--qrels", help="Qrels made from the pool."),
    measure: str = typer.Option("infAP", help="trec_eval measure to score with."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the rows as JSON."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing outputs."),
) -> None:
    """Leave-one-run-out reusability: each run rescored without the pairs only it pooled.

    Example: cmrkit pool bias pools/sample.pool.jsonl runs/sample/bm25.test.trec
    runs/sample/fields-doc.test.trec --qrels qrels/sample.pooled.txt
    """
    from cmrkit.pooling import pool_bias, read_pool
    from cmrkit.tables import Table, render

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
        t.add_row(*(_fmt(r[c]) for c in cols))
    render(t, out)


@judgments_app.command("aggregate")
@user_errors
def aggregate_cmd(
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
        3, help="Or this many, all agreeing (no dissent), for a label."
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
    force: bool = typer.Option(False, "--force", help="Overwrite existing outputs."),
) -> None:
    """Aggregate assessors' labels into qrels: 1, 0, or -1 when too few agree.

    Example: cmrkit judgments aggregate pools/round1.csv --pool pools/sample.pool.jsonl
    --key pools/sample.key.tsv --qrels qrels/sample.test.txt -o qrels/sample.pooled.txt
    """
    from cmrkit.assess.key import merge_keys
    from cmrkit.assess.tasks import read_gold
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.judgments import aggregate, read_judgments
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
    if staged.up_to_date:
        out.print(f"{output} is up to date; --force rewrites it", markup=False)
        return
    console.print(f"wrote {output} and {hard}" + (f" and {needs_more}" if needs_more else ""))


def _print_aggregate_report(rep: dict, min_relevant: int) -> None:
    from cmrkit.tables import Table, render

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
        f"{_fmt(a['unanimous'])}  Fleiss kappa {_fmt(a['kappa'])}  "
        f"(5-point {_fmt(a['kappa_likert'])})"
    )
    lab = rep["labels"]
    out.print(
        f"qrels: relevant {lab['relevant']}  non-relevant {lab['non_relevant']}  "
        f"unknown {lab['unknown']}  pairs needing more assessments {rep['needs_more']}"
    )
    if any(w["gold"] for w in rep["workers"].values()):
        t = Table("workers on gold pairs", ("worker", "judgments", "gold", "accuracy", "dropped"))
        for name, w in rep["workers"].items():
            t.add_row(
                name,
                str(w["judgments"]),
                str(w["gold"]),
                _fmt(w["accuracy"]),
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
        t.add_row(qid, *(_fmt(q[c]) for c in cols))
    render(t, out)


@judgments_app.command("simulate")
@user_errors
def simulate_cmd(
    qrels: Path = typer.Option(..., "--qrels", help="Complete gold qrels the assessors know."),
    pool_file: Path = typer.Option(..., "--pool", help="The pool whose pairs to answer."),
    output: Path = typer.Option(..., "-o", "--output", help="Simple CSV to write."),
    assessors: int = typer.Option(3, help="Number of fake assessors (each answers every pair)."),
    noise: float = typer.Option(0.1, help="Probability that an assessor flips the truth."),
    seed: int = typer.Option(0, help="Seed of the assessors' errors and Likert choices."),
    worker_prefix: str = typer.Option("sim", help="Worker ids are PREFIX01, PREFIX02, ..."),
    force: bool = typer.Option(False, "--force", help="Overwrite existing outputs."),
) -> None:
    """Fake assessors answering the pool from complete qrels, with a given error rate.

    Example: cmrkit judgments simulate --qrels qrels/sample.test.txt
    --pool pools/sample.pool.jsonl --assessors 3 --noise 0.1 -o pools/round1.csv
    """
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.judgments import simulate, write_simple_csv
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


def register(app: typer.Typer) -> None:
    """Add the `pool` and `judgments` groups to the app."""
    app.add_typer(pool_app, name="pool")
    app.add_typer(judgments_app, name="judgments")
