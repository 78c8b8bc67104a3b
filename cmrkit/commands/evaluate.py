"""`cmrkit eval` and `cmrkit compare`: trec_eval's numbers, per query, per group, compared."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

import typer

from cmrkit.commands.output import Format, coverage, emit, with_warnings
from cmrkit.console import console, out, user_errors
from cmrkit.errors import CmrkitError


class Test(StrEnum):
    t = "t"
    permutation = "permutation"


class Correction(StrEnum):
    holm = "holm"
    bonferroni = "bonferroni"
    none = "none"


MEASURE_HELP = (
    "Measure in ir_measures syntax (infAP, AP, AP@10, RR@10, R@100, P@10, nDCG@10, Bpref, xinfAP, "
    "infNDCG, Judged@10, NumRel, ...); repeat or separate with commas. Default: infAP, AP, AP@10, "
    "AP@50, RR@10, R@10, R@50, R@100, R@500, P@10, nDCG@10, Judged@10."
)


def _eval_table(result, groups, per_query: bool, title: str) -> None:
    from cmrkit.tables import Table, render

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
        table.add_row(m.name, m.trec_name, *cells)
    if groups:
        table.add_section()
        table.add_row("queries", "", str(result.queries), *(str(len(g.queries)) for g in groups))
    render(table, out)


def register(app: typer.Typer) -> None:
    """Add `eval` and `compare` to the app."""
    app.command("eval")(eval_command)
    app.command("compare")(compare_command)


@user_errors
def eval_command(
    run: Path = typer.Argument(..., help="TREC run: qid Q0 docno rank score tag."),
    qrels: Path = typer.Argument(
        ...,
        help="TREC qrels: qid iter docno rel (or sample_eval's qid iter docno stratum rel, "
        "for xinfAP and infNDCG).",
    ),
    measure: list[str] = typer.Option(None, "--measure", "-m", help=MEASURE_HELP),
    per_query: bool = typer.Option(
        False, "--per-query", "-q", help="Table format: one row per query."
    ),
    all_queries: bool = typer.Option(
        False,
        "--all-queries",
        "-c",
        help="Average over every qrels query, a query missing from the run scoring 0 "
        "(trec_eval -c). Default: queries in both run and qrels.",
    ),
    depth: int = typer.Option(
        None,
        "--depth",
        "-M",
        min=1,
        help="Score only the top N documents per query (trec_eval -M).",
    ),
    dedupe: bool = typer.Option(
        False,
        "--dedupe",
        help="Keep the best score of a document retrieved twice "
        "for a query instead of refusing the run.",
    ),
    topics: Path = typer.Option(
        None, "--topics", help="topics.jsonl, or a 'qid<TAB>type...' file, for --by."
    ),
    by: str = typer.Option(
        None,
        "--by",
        help="Also report each group of queries by this topics field (e.g. type, split).",
    ),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
) -> None:
    """Score a run against qrels with trec_eval's numbers.

    Ranking is trec_eval's: score descending, ties by docno descending (the rank column is
    ignored). Qrels grades >= 1 are relevant, 0 non-relevant, negative pooled but unjudged.

    Example: cmrkit eval runs/sample/bm25.test.trec qrels/sample.test.txt -m infAP -m AP@10
    -m RR@10
    """
    from cmrkit import evaluation
    from cmrkit.evaluation.measures import parse_measures
    from cmrkit.trec import read_qrels_with_strata, read_run_columns

    if (topics is None) != (by is None):
        raise CmrkitError("--by and --topics go together: give the topics file and the field")
    measures = parse_measures(measure)
    qrels_data, strata = with_warnings(lambda: read_qrels_with_strata(qrels))
    run_data = read_run_columns(run, dedupe=dedupe)
    groups_map = evaluation.load_groups(topics, by) if topics is not None else None
    result = evaluation.evaluate(
        run_data, qrels_data, measures, all_queries=all_queries, depth=depth, strata=strata
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


def _compare_table(comp, fmt_p: Callable[[float], str]) -> None:
    from cmrkit.tables import Table, render

    mark = "significant" if comp.correction == "none" else f"significant after {comp.correction}"
    test = "paired t-test" if comp.test == "t" else "paired permutation test"
    caption = (
        f"vs baseline {comp.baseline}: delta, {test} p ({comp.correction} correction), "
        f"queries improved/hurt; * {mark} at alpha={comp.alpha}; {comp.describe()}"
    )
    table = Table("comparison", ["system", *(m.name for m in comp.measures)], caption=caption)
    for name in comp.systems:
        cells = []
        for m in comp.measures:
            value = m.format(comp.mean(name, m))
            c = comp.stats.get(name, {}).get(m.name)
            if c is None:
                cells.append(value)
                continue
            star = "*" if c.significant else ""
            cells.append(
                f"{value}{star}\n{c.delta:+.4f}\np={fmt_p(c.p_adjusted)}\n+{c.improved}/-{c.hurt}"
            )
        label = f"{name} (baseline)" if name == comp.baseline else name
        if table.rows:
            table.add_section()
        table.add_row(label, *cells)
    render(table, out)


@user_errors
def compare_command(
    qrels: Path = typer.Argument(..., help="TREC qrels: qid iter docno rel."),
    runs: list[Path] = typer.Argument(..., help="Two or more TREC runs."),
    measure: list[str] = typer.Option(None, "--measure", "-m", help=MEASURE_HELP),
    baseline: str = typer.Option(
        None,
        "--baseline",
        "-b",
        help="The run the others are tested against (its path or name); default: the first run.",
    ),
    test: Test = typer.Option(
        Test.t, "--test", help="Paired t-test or paired randomization (permutation) test."
    ),
    correction: Correction = typer.Option(
        Correction.holm,
        "--correction",
        help="Multiple-comparison correction over the systems, per measure.",
    ),
    alpha: float = typer.Option(0.05, "--alpha", help="Significance level for the * mark."),
    permutations: int = typer.Option(
        10000,
        "--permutations",
        min=1,
        max=10_000_000,
        help="Random sign flips for --test permutation.",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the permutation test."),
    all_queries: bool = typer.Option(
        False,
        "--all-queries",
        "-c",
        help="Every qrels query counts, 0 when missing from a run (trec_eval -c).",
    ),
    depth: int = typer.Option(
        None,
        "--depth",
        "-M",
        min=1,
        help="Score only the top N documents per query (trec_eval -M).",
    ),
    dedupe: bool = typer.Option(
        False, "--dedupe", help="Keep the best score of a document retrieved twice."
    ),
    plot: Path = typer.Option(None, "--plot", help="Write a PNG of per-query differences."),
    plot_measure: str = typer.Option(
        None, "--plot-measure", help="Measure to plot (default: the first)."
    ),
    force: bool = typer.Option(
        False, "--force", help="Replace a --plot file that differs from this comparison's."
    ),
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
) -> None:
    """Compare runs against a baseline with significance tests.

    Every system is averaged, and paired with the baseline, on the same queries: those in the
    qrels and in every run (-c: every qrels query, 0 where a run lacks it); the output says
    which and how many. p-values are corrected over the systems, per measure.

    Example: cmrkit compare qrels/sample.test.txt runs/sample/bm25.test.trec
    runs/sample/fields-doc.test.trec -m AP -m RR@10 --test permutation --plot diff.png
    """
    from cmrkit import evaluation
    from cmrkit.evaluation.measures import parse_measure, parse_measures
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.trec import read_qrels_with_strata, read_run_columns

    measures = parse_measures(measure)
    plot_m = parse_measure(plot_measure) if plot_measure else measures[0]
    if plot_measure and plot_m not in measures:
        measures.append(plot_m)
    if plot is not None and plot.suffix.lower() != ".png":
        raise CmrkitError("the plot is written as PNG; name it FILE.png", path=plot)
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
    qrels_data, strata = with_warnings(lambda: read_qrels_with_strata(qrels))
    loaded = {
        name: read_run_columns(path, dedupe=dedupe) for name, path in zip(names, runs, strict=True)
    }
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
    )
    up_to_date = False
    if plot is not None:  # the same comparison draws the same bytes: a rerun is up to date
        with RepeatableOutputs([plot], force=force) as staged:
            evaluation.plot_differences(comp, plot_m, staged.path(plot))
        up_to_date = staged.up_to_date
    if fmt is Format.table:
        _compare_table(comp, evaluation.format_p)
    elif fmt is Format.json:
        paths = {name: str(path) for name, path in zip(names, runs, strict=True)}
        emit(evaluation.comparison_to_json(comp, paths))
    elif fmt is Format.csv:
        emit(evaluation.comparison_to_csv(comp))
    else:
        emit(evaluation.comparison_to_trec(comp))
    if fmt is not Format.table:
        console.print(comp.describe(), markup=False, soft_wrap=True)
    for name, result in comp.results.items():
        console.print(coverage(result, f"{name} alone: "), markup=False, soft_wrap=True)
    if plot is not None:
        done = f"{plot} is up to date; --force rewrites it" if up_to_date else f"wrote {plot}"
        console.print(done, markup=False, soft_wrap=True)
