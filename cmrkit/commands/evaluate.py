"""`cmrkit eval` and `cmrkit compare`: trec_eval's numbers, per query, per group, compared."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

import typer

from cmrkit.commands.choices import TrecVersion
from cmrkit.commands.options import MEASURE
from cmrkit.commands.output import (
    ALLOW_UNJUDGED,
    DEDUPE,
    FORMAT,
    Format,
    check_order,
    coverage,
    emit,
    warn_identical,
    with_warnings,
)
from cmrkit.comparison import COMPARE
from cmrkit.console import console, out, user_errors
from cmrkit.errors import CmrkitError


class Test(StrEnum):
    t = "t"
    wilcoxon = "wilcoxon"
    permutation = "permutation"
    sign = "sign"
    bootstrap = "bootstrap"


class Correction(StrEnum):
    holm = "holm"
    bonferroni = "bonferroni"
    bh = "bh"
    by = "by"
    none = "none"


def _eval_table(result, groups, per_query: bool, title: str) -> None:
    from cmrkit.commands.tables import Table, render

    if per_query:
        table = Table(title, ["qid", *(m.name for m in result.measures)], caption=coverage(result))
        for qid, row in result.per_query.items():
            table.add_row(qid, *(m.format(row[m.name]) for m in result.measures))
        table.add_section()
        for g in groups or []:
            table.add_row(
                f"all:{g.group}", *(m.format(g.aggregate[m.name]) for m in result.measures)
            )
        table.add_row(
            "all", *(m.format(result.aggregate[m.name]) for m in result.measures), style="bold"
        )
        render(table, out)
        return
    headers = ["measure", "trec_eval", "all", *(g.group for g in groups or [])]
    table = Table(title, headers, keys=2, caption=coverage(result))
    for m in result.measures:
        cells = [m.format(result.aggregate[m.name])]
        cells += [m.format(g.aggregate[m.name]) for g in groups or []]
        table.add_row(m.name, m.trec_column, *cells)
    if groups:
        table.add_section()
        table.add_row("queries", "", str(result.queries), *(str(len(g.queries)) for g in groups))
    render(table, out)


def register(app: typer.Typer) -> None:
    """Add `eval` and `compare` to the app."""
    app.command("eval")(eval_command)
    app.command("compare")(compare_command)


class RelFormat(StrEnum):
    qrels = "qrels"
    prefs = "prefs"
    qrels_prefs = "qrels_prefs"
    qrels_jg = "qrels_jg"


class Convention(StrEnum):
    trec = "trec"
    coresearch = "coresearch"


def _single_blas() -> None:
    """One OpenBLAS thread for `eval`, unless the user chose: scoring never calls BLAS, and
    starting OpenBLAS's thread pool when numpy loads costs about 0.04 s of eval's start-up.
    (Only before numpy is loaded, when the setting takes effect: never in a running library.)"""
    import os
    import sys

    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


USAGE = "usage: cmrkit eval RUN QRELS [-m MEASURE ...] (the run first, then the qrels)"


def _check_order(run: Path, qrels: Path) -> None:
    """`eval QRELS RUN` (swapped): say so with the usage, before any other error."""
    check_order([(run, "a run"), (qrels, "qrels")], USAGE)


COMPARE_USAGE = "usage: cmrkit compare QRELS RUN RUN [...] (the qrels first, then the runs)"


# options `eval` and `compare` declare alike (MEASURE: commands/options.py)
DEPTH = typer.Option(
    None, "--depth", "-M", min=1, help="Score only the top N documents per query (trec_eval -M)."
)

# `eval` takes trec_eval's own option letters with trec_eval's meanings (issue 21), even where
# another cmrkit command gives the letter another meaning (-n is --name in build-collection).
TREC_EVAL_LETTERS = frozenset({"-q", "-c", "-l", "-M", "-N", "-n", "-J", "-R", "-Z"})


@user_errors
def eval_command(
    run: Path = typer.Argument(
        ..., help="TREC run: qid Q0 docno rank score tag (more columns are ignored); - for stdin."
    ),
    qrels: Path = typer.Argument(
        ...,
        help="TREC qrels: qid iter docno rel (or sample_eval's qid iter docno stratum rel, "
        "for xinfAP and infNDCG; see -R for prefs and qrels_jg).",
    ),
    measure: list[str] = MEASURE,
    per_query: bool = typer.Option(
        False,
        "--per-query",
        "-q",
        help="Per-query values too (trec_eval -q; the table format: one row per query).",
    ),
    all_queries: bool = typer.Option(
        False,
        "--all-queries",
        "-c",
        help="Average over every qrels query, a query missing from the run scoring 0 "
        "(trec_eval -c). Default: queries in both run and qrels.",
    ),
    depth: int = DEPTH,
    level: int = typer.Option(
        None, "--level", "-l", help="Lowest grade that counts as relevant (trec_eval -l; 1)."
    ),
    num_docs: int = typer.Option(
        None, "--num-docs", "-N", min=0, help="Documents in the collection (trec_eval -N)."
    ),
    no_summary: bool = typer.Option(
        False, "--no-summary", "-n", help="No 'all' lines, per-query only (trec_eval -n)."
    ),
    judged_only: bool = typer.Option(
        False,
        "--judged-only",
        "-J",
        help="Drop retrieved documents that are not judged (trec_eval -J).",
    ),
    rel_format: RelFormat = typer.Option(
        None,
        "--rel-format",
        "-R",
        help="Judgments format (trec_eval -R): qrels, prefs, qrels_prefs or qrels_jg.",
    ),
    zscores: Path = typer.Option(
        None,
        "--zscores",
        "-Z",
        help="qid measure mean stddev file: print z-scores (trec_eval -Z).",
    ),
    trec_version: TrecVersion = typer.Option(
        TrecVersion.v10,
        "--trec-eval",
        help="The trec_eval version to equal: 10 (10.0, the current release) or 9 (9.0.8).",
    ),
    dedupe: bool = DEDUPE,
    allow_unjudged: bool = ALLOW_UNJUDGED,
    topics: Path = typer.Option(
        None, "--topics", help="topics.jsonl, or a 'qid<TAB>type...' file, for --by."
    ),
    by: str = typer.Option(
        None,
        "--by",
        help="Also report each group of queries by this topics field (e.g. type, split).",
    ),
    convention: Convention = typer.Option(
        Convention.trec,
        "--convention",
        help="coresearch: the CoreSearch paper's columns as its code computes them (MRR@10, "
        "mAP@10, mAP@50, micro R@10..R@500, the query's own passage dropped); see "
        "docs/evaluation.md.",
    ),
    fmt: Format = FORMAT,
) -> None:
    """Score a run against qrels with trec_eval's numbers (9.0.8 or 10.0, every measure).

    Ranking is trec_eval's: score descending, ties by docno descending (the rank column is
    ignored). Qrels grades >= 1 are relevant, 0 non-relevant, negative pooled but unjudged.
    Measures by ir_measures names (AP@10, nDCG@10, SetF) or trec_eval's own (map_cut.10,
    P.5,10, ndcg.1=3,2=9, iprec_at_recall..10,.20, all_trec); `-f trec` prints exactly what
    trec_eval prints with the same options.

    Example: cmrkit eval runs/sample/bm25.test.trec qrels/sample.test.txt -m infAP -m AP@10
    -m RR@10
    """
    _single_blas()
    if (topics is None) != (by is None):
        raise CmrkitError("--by and --topics go together: give the topics file and the field")
    _check_inputs(run, qrels)
    if convention is Convention.coresearch:
        if measure or by is not None:
            raise CmrkitError("--convention coresearch prints its own columns; drop -m and --by")
        _eval_coresearch(run, qrels, fmt, dedupe, allow_unjudged)
        return
    version = trec_version.value
    trec_only = {"-l": level is not None, "-N": num_docs is not None, "-n": no_summary,
                 "-J": judged_only, "-R": rel_format is not None, "-Z": zscores is not None,
                 "a run from stdin": str(run) == "-",
                 "qrels from stdin": str(qrels) == "-"}  # fmt: skip
    from cmrkit.evaluation.measures import TREC_EVAL

    plan = _eval_plan(measure, version, fmt, by, [k for k, v in trec_only.items() if v])
    if plan.engine == TREC_EVAL:
        opts = _trec_options(version, per_query, all_queries, depth, level, num_docs,
                             no_summary, judged_only, rel_format)  # fmt: skip
        _eval_trec(run, qrels, plan, opts, fmt, zscores, (dedupe, allow_unjudged))
        return
    _eval_ranking(run, qrels, plan, fmt, per_query, all_queries, depth, (dedupe, allow_unjudged),
                  topics, by)  # fmt: skip


def _check_inputs(run: Path, qrels: Path) -> None:
    """Both from stdin, or swapped: say so before any other error."""
    if str(run) == "-" and str(qrels) == "-":
        raise CmrkitError(f"the run and the qrels cannot both come from stdin (-): give one "
                          f"as a file; {USAGE}")  # fmt: skip
    _check_order(run, qrels)


def _eval_plan(measure, version: str, fmt: Format, by: str | None, trec_only: list[str]):
    """What `eval` computes and with which engine (``measures.resolve``): trec_eval's options
    and a run from stdin need trec_eval's engine, groups (--by) the ranking engine."""
    from cmrkit.evaluation.measures import RANKING, TREC_EVAL, resolve

    if by is not None:
        if trec_only:
            raise CmrkitError(f"--by works with the ranking engine only, not with "
                              f"{', '.join(trec_only)}")  # fmt: skip
        return resolve(measure, version, engine=RANKING)
    engine = TREC_EVAL if trec_only else None
    return resolve(measure, version, engine=engine, trec_output=fmt is Format.trec)


def _eval_ranking(run, qrels, plan, fmt, per_query, all_queries, depth, reading, topics, by):
    """`eval` through the ranking engine (evaluation/ranking.py): a value per query and
    measure, groups with --by. ``reading``: (--dedupe, --allow-unjudged)."""
    from cmrkit import evaluation
    from cmrkit.retrieval.runfile import check_qrels_of
    from cmrkit.trec import read_qrels_with_strata, read_run_columns

    dedupe, allow_unjudged = reading
    qrels_data, strata = with_warnings(lambda: read_qrels_with_strata(qrels, columns=True))
    run_data = read_run_columns(run, dedupe=dedupe)
    check_qrels_of(run, qrels, run_data, qrels_data, allow_unjudged=allow_unjudged)
    groups_map = evaluation.load_groups(topics, by) if topics is not None else None
    result = evaluation.evaluate(
        run_data,
        qrels_data,
        list(plan.measures),
        all_queries=all_queries,
        depth=depth,
        strata=strata,
        version=plan.version,
    )
    groups = evaluation.by_group(result, groups_map) if groups_map is not None else None
    if fmt is Format.table:
        _eval_table(result, groups, per_query, title=f"{run} vs {qrels}")
        return
    if fmt is Format.json:
        emit(
            evaluation.result_to_json(
                result, groups, {"run": str(run), "qrels": str(qrels), "by": by}
            )
        )
    elif fmt is Format.csv:
        emit(evaluation.result_to_csv(result, groups))
    else:
        emit(evaluation.result_to_trec(result, groups))
    console.print(coverage(result), markup=False, soft_wrap=True)


def _trec_options(version, per_query, all_queries, depth, level, num_docs, no_summary,
                  judged_only, rel_format):  # fmt: skip
    """trec_eval's options from `eval`'s."""
    from cmrkit.evaluation import trec_eval as te

    return te.Options(
        version=version,
        query=per_query,
        complete=all_queries,
        level=1 if level is None else level,
        max_docs=depth if depth is not None else te.Options.max_docs,
        num_docs_in_coll=num_docs or 0,
        summary=not no_summary,
        judged_only=judged_only,
        rel_format=rel_format.value if rel_format is not None else "qrels",
    )


def _eval_trec(run, qrels, plan, opts, fmt, zscores, reading) -> None:
    """`eval` through the trec_eval port (evaluation/trec_eval.py). ``reading``: (--dedupe,
    --allow-unjudged)."""
    from cmrkit.evaluation import trec_eval as te
    from cmrkit.retrieval.runfile import check_qrels_of

    dedupe, allow_unjudged = reading
    rel_info = te.read_rel_info(qrels, opts.rel_format, opts.version)
    results = te.read_results(run, opts.version)
    if dedupe:
        results.queries = te.dedupe(results.queries)
    check_qrels_of(run, qrels, results.documents(), rel_info.judged(),
                   allow_unjudged=allow_unjudged)  # fmt: skip
    table = te.read_zscores(zscores) if zscores is not None else None
    result = te.evaluate(results, rel_info, plan.columns, opts, table, run_path=run)
    if fmt is Format.trec:
        emit(result.to_trec())
    elif fmt is Format.json:
        emit(te.result_to_json(result, {"run": str(run), "qrels": str(qrels)}))
    elif fmt is Format.csv:
        emit(te.result_to_csv(result))
    else:
        _trec_table(result, f"{run} vs {qrels}")
    for odd, path in ((rel_info.odd, qrels), (results.odd, run)):
        if odd.duplicates:
            console.print(
                f"warning: {path}: {odd.duplicates:,} identical duplicate judgments kept once",
                markup=False,
                soft_wrap=True,
            )
            odd.duplicates = 0
        note = odd.describe(str(path))
        if note:
            console.print(note, markup=False, soft_wrap=True)
    for note in result.notes:
        console.print(note, markup=False, soft_wrap=True)
    console.print(te.coverage(result), markup=False, soft_wrap=True)


def _eval_coresearch(run, qrels, fmt, dedupe: bool, allow_unjudged: bool) -> None:
    import json

    from cmrkit.evaluation import coresearch
    from cmrkit.retrieval.runfile import check_qrels_of
    from cmrkit.trec import read_qrels_with_strata, read_run_columns

    qrels_data, _ = with_warnings(lambda: read_qrels_with_strata(qrels))
    columns = read_run_columns(run, dedupe=dedupe)
    check_qrels_of(run, qrels, columns, qrels_data, allow_unjudged=allow_unjudged)
    run_data = columns.to_run()
    result = coresearch.evaluate(run_data, qrels_data)
    values = result["measures"]
    if fmt is Format.json:
        emit(json.dumps({"run": str(run), "qrels": str(qrels), **result}, indent=2) + "\n")
    elif fmt is Format.csv:
        emit("measure,value\n" + "".join(f"{k},{v!r}\n" for k, v in values.items()))
    elif fmt is Format.trec:
        emit("".join(f"{k:<22}\tall\t{v:6.4f}\n" for k, v in values.items()))
    else:
        from cmrkit.commands.tables import Table, render

        table = Table(f"{run} vs {qrels}", list(values), caption="CoreSearch's conventions")
        table.add_row(*(f"{v:.4f}" for v in values.values()))
        render(table, out)
    note = f"CoreSearch conventions: {result['queries']} queries, {result['relevant']} relevant"
    if result["skipped_queries"]:
        note += f"; {len(result['skipped_queries'])} run queries without relevant judgments skipped"
    console.print(note, markup=False, soft_wrap=True)


def _trec_table(result, title: str) -> None:
    from cmrkit.commands.tables import Table, render
    from cmrkit.evaluation.measures.trec import VERSION_NAMES

    version = VERSION_NAMES[result.version]
    if result.options.query:
        table = Table(title, ["measure", "qid", "value"], keys=2, caption=f"trec_eval {version}")
        for qid in result.printed_queries:
            for name, v in zip(result.names, result.per_query[qid], strict=True):
                table.add_row(name, qid, v if isinstance(v, str) else f"{v:.4f}")
        render(table, out)
        return
    table = Table(title, ["measure", "all"], keys=1, caption=f"trec_eval {version}")
    if any(c.family.name == "runid" for c in result.columns):
        table.add_row("runid", result.runid)
    for name, v, col in zip(result.names, result.summary, result.value_columns, strict=True):
        if col.family.name == "relstring":
            continue
        table.add_row(name, str(int(v)) if col.family.integer else f"{v:.4f}")
    render(table, out)


def _interval(ci, fmt: Callable[[float], str]) -> str:
    return "" if ci is None else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def _signed(x: float) -> str:
    from cmrkit.evaluation.report import fixed

    return fixed(x, signed=True)


def _compare_table(comp, p_text: Callable[[float], str]) -> None:
    from cmrkit.commands.tables import Table, render
    from cmrkit.evaluation.significance import CORRECTION_NAMES, TEST_NAMES

    mark = "significant" if comp.correction == "none" else f"significant after {comp.correction}"
    level = f"{comp.ci:.0%} bootstrap interval" if comp.intervals else "no interval"
    caption = (
        f"vs baseline {comp.baseline}: mean [{level}], delta [{level}], Cohen's d_z, "
        f"{TEST_NAMES[comp.test]} p ({CORRECTION_NAMES[comp.correction]} correction), queries "
        f"improved/hurt; * {mark} at alpha={comp.alpha}; {comp.describe()}"
    )
    table = Table("comparison", ["system", *(m.name for m in comp.measures)], caption=caption)
    for name in comp.systems:
        cells = []
        for m in comp.measures:
            value = m.format(comp.mean(name, m))
            ci = _interval(comp.intervals.get(name, {}).get(m.name), m.format)
            c = comp.stats.get(name, {}).get(m.name)
            if c is None:
                cells.append(f"{value}\n{ci}".strip())
                continue
            star = "*" if c.significant else ""
            delta = f"{_signed(c.delta)} {_interval(c.delta_ci, _signed)}".strip()
            d_z = "d_z -" if c.d_z is None else f"d_z {c.d_z:+.2f}"
            p = "p undefined" if c.note else p_text(c.p_adjusted)
            cells.append(
                "\n".join(x for x in (f"{value}{star}", ci, delta, d_z, p) if x)
                + f"\n+{c.improved}/-{c.hurt}"
            )
        label = f"{name} (baseline)" if name == comp.baseline else name
        if table.rows:
            table.add_section()
        table.add_row(label, *cells)
    render(table, out)


def _tukey_table(comp, p_text: Callable[[float], str]) -> None:
    from cmrkit.commands.tables import Table, render

    caption = (
        f"Tukey's HSD over every pair (scipy.stats.tukey_hsd, as ranx): first - second "
        f"[{comp.ci:.0%} simultaneous interval], p adjusted for all pairs; * p < {comp.alpha}"
    )
    table = Table("every pair", ["pair", *(m.name for m in comp.measures)], caption=caption)
    by_measure = {m: {(p.first, p.second): p for p in pairs} for m, pairs in comp.pairs.items()}
    for key in by_measure[comp.measures[0].name]:
        cells = []
        for m in comp.measures:
            pair = by_measure[m.name][key]
            ci = _interval(pair.ci, _signed)
            p = "p undefined" if pair.note else p_text(pair.p)
            cells.append(f"{_signed(pair.delta)}{'*' if pair.significant else ''}\n{ci}\n{p}")
        table.add_row(f"{key[0]} - {key[1]}", *cells)
    render(table, out)


@user_errors
def compare_command(
    qrels: Path = typer.Argument(..., help="TREC qrels: qid iter docno rel."),
    runs: list[Path] = typer.Argument(..., help="Two or more TREC runs."),
    measure: list[str] = MEASURE,
    baseline: str = typer.Option(
        None,
        "--baseline",
        "-b",
        help="The run the others are tested against (its path or name); default: the first run.",
    ),
    test: Test = typer.Option(
        Test.t,
        "--test",
        help="Paired test against the baseline: Student's t, Wilcoxon signed-rank, "
        "randomization (permutation), sign, or bootstrap (shift method).",
    ),
    correction: Correction = typer.Option(
        Correction.holm,
        "--correction",
        help="Correction over the systems, per measure: Holm, Bonferroni, Benjamini-Hochberg "
        "(bh), Benjamini-Yekutieli (by) or none.",
    ),
    alpha: float = typer.Option(
        COMPARE.alpha, "--alpha", help="Significance level for the * mark."
    ),
    permutations: int = typer.Option(
        COMPARE.permutations,
        "--permutations",
        min=1,
        max=10_000_000,
        help="Random sign flips for --test permutation.",
    ),
    ci: float = typer.Option(
        COMPARE.ci, "--ci", help="Confidence level of the bootstrap intervals (0.95: 95%)."
    ),
    bootstrap: int = typer.Option(
        COMPARE.bootstrap,
        "--bootstrap",
        min=0,
        max=10_000_000,
        help="Bootstrap resamples of the queries for the intervals and --test bootstrap "
        "(0: no intervals).",
    ),
    seed: int = typer.Option(
        COMPARE.seed, "--seed", help="Seed of the permutation test and the bootstrap."
    ),
    all_pairs: bool = typer.Option(
        False, "--all-pairs", help="Also Tukey's HSD over every pair of systems (as ranx)."
    ),
    all_queries: bool = typer.Option(
        False,
        "--all-queries",
        "-c",
        help="Every qrels query counts, 0 when missing from a run (trec_eval -c).",
    ),
    depth: int = DEPTH,
    dedupe: bool = DEDUPE,
    allow_unjudged: bool = ALLOW_UNJUDGED,
    plot: Path = typer.Option(
        None,
        "--plot",
        help="Write the per-query differences as FILE.png (300 dpi), FILE.pdf or FILE.svg.",
    ),
    plot_scatter: Path = typer.Option(
        None,
        "--plot-scatter",
        help="Write each run's per-query values against the baseline's (a point per query, "
        "a panel per run) as FILE.png (300 dpi), FILE.pdf or FILE.svg.",
    ),
    plot_measure: str = typer.Option(
        None, "--plot-measure", help="Measure to plot (default: the first)."
    ),
    plot_means: Path = typer.Option(
        None,
        "--plot-means",
        help="Write each system's mean with its bootstrap interval, a panel per measure, as "
        "FILE.png (300 dpi), FILE.pdf or FILE.svg.",
    ),
    latex: Path = typer.Option(
        None,
        "--latex",
        help="Write the table for a paper as FILE (LaTeX, booktabs): means, intervals, "
        "significance marks.",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Replace a --plot, --plot-scatter, --plot-means or --latex file that differs.",
    ),
    trec_version: TrecVersion = typer.Option(
        TrecVersion.v10,
        "--trec-eval",
        help="The trec_eval version to equal: 10 (10.0) or 9 (9.0.8; scores as C floats).",
    ),
    fmt: Format = FORMAT,
) -> None:
    """Compare runs against a baseline: significance tests, effect sizes and intervals.

    Every system is averaged, and paired with the baseline, on the same queries: those in the
    qrels and in the runs, which must score the same ones (-c: every qrels query, 0 where a run
    lacks it). p-values are corrected over the systems, per measure. Each mean and each
    difference has a seeded bootstrap interval; Cohen's d_z sizes each difference.

    Example: cmrkit compare qrels/sample.test.txt runs/sample/bm25.test.trec
    runs/sample/qe-rm3.test.trec -c -m AP -m RR@10 --test wilcoxon --correction bh
    --plot-means means.pdf
    """
    check_order([(qrels, "qrels"), *((r, "a run") for r in runs)], COMPARE_USAGE)
    from cmrkit import evaluation
    from cmrkit.evaluation.measures import parse_measure, parse_measures
    from cmrkit.figures import figure_format
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.trec import read_qrels_with_strata, read_run_columns

    measures = parse_measures(measure, trec_version.value)
    plot_m = parse_measure(plot_measure, trec_version.value) if plot_measure else measures[0]
    if plot_measure and plot_m not in measures:
        measures.append(plot_m)
    for path, option in ((plot, "--plot"), (plot_scatter, "--plot-scatter")):
        if path is not None:  # a name that is no PNG, PDF or SVG fails before any work
            figure_format(path, option)
    if plot_means is not None:
        figure_format(plot_means, "--plot-means")
    if plot_means is not None and not bootstrap:
        raise CmrkitError("--plot-means draws bootstrap intervals: drop --bootstrap 0")
    names = evaluation.run_names(runs)
    base_name = None
    if baseline is not None:
        for name, path in zip(names, runs, strict=True):
            if baseline in (name, str(path)) or Path(baseline) == path:
                base_name = name
        if base_name is None:
            raise CmrkitError(
                f"--baseline {baseline!r} is none of the runs "
                f"({', '.join(names)}); give its path or name"
            )
    from cmrkit.retrieval.runfile import check_qrels_of

    qrels_data, strata = with_warnings(lambda: read_qrels_with_strata(qrels, columns=True))
    loaded = {}
    for name, path in zip(names, runs, strict=True):
        loaded[name] = read_run_columns(path, dedupe=dedupe)
        check_qrels_of(path, qrels, loaded[name], qrels_data, allow_unjudged=allow_unjudged)
    warn_identical(loaded)
    comp = evaluation.compare(
        loaded,
        qrels_data,
        measures,
        baseline=base_name,
        test=test.value,
        correction=correction.value,
        alpha=alpha,
        all_queries=all_queries,
        depth=depth,
        strata=strata,
        permutations=permutations,
        seed=seed,
        version=trec_version.value,
        ci=ci,
        bootstrap=bootstrap,
        all_pairs=all_pairs,
    )
    files = [p for p in (plot, plot_scatter, plot_means, latex) if p is not None]
    up_to_date = False
    if files:  # the same comparison draws the same bytes: a rerun is up to date
        with RepeatableOutputs(files, force=force) as staged:
            if plot is not None:
                evaluation.plot_differences(comp, plot_m, staged.path(plot))
            if plot_scatter is not None:
                evaluation.plot_scatter(comp, plot_m, staged.path(plot_scatter))
            if plot_means is not None:
                evaluation.plot_means(comp, staged.path(plot_means))
            if latex is not None:
                staged.path(latex).write_text(evaluation.comparison_to_latex(comp))
        up_to_date = staged.up_to_date
    if fmt is Format.table:
        _compare_table(comp, evaluation.p_text)
        if comp.pairs:
            _tukey_table(comp, evaluation.p_text)
    elif fmt is Format.json:
        paths = {name: str(path) for name, path in zip(names, runs, strict=True)}
        emit(evaluation.comparison_to_json(comp, paths))
    elif fmt is Format.csv:
        emit(evaluation.comparison_to_csv(comp))
    else:
        emit(evaluation.comparison_to_trec(comp))
    if fmt is not Format.table:
        console.print(comp.describe(), markup=False, soft_wrap=True)
    for note in comp.notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
    for name, result in comp.results.items():
        console.print(coverage(result, f"{name} alone: "), markup=False, soft_wrap=True)
    for path in files:
        done = f"{path} is up to date; --force rewrites it" if up_to_date else f"wrote {path}"
        console.print(done, markup=False, soft_wrap=True)
