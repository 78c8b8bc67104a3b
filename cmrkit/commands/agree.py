"""`cmrkit agree`: do two sets of qrels rank the runs the same way?"""

from __future__ import annotations

from pathlib import Path

import typer

from cmrkit.commands.choices import TrecVersion
from cmrkit.commands.options import (
    BOOTSTRAP,
    CI,
    DEPTH,
    MEASURE,
    RBO_P,
    SEED,
    TREC_VERSION,
    agreement_options,
)
from cmrkit.commands.output import (
    ALLOW_UNJUDGED,
    DEDUPE,
    FORMAT,
    Format,
    check_order,
    emit,
    warn_identical,
    with_warnings,
)
from cmrkit.console import console, out, user_errors
from cmrkit.errors import CmrkitError

LABELS = {
    "tau": "Kendall's tau",
    "tau_b": "Kendall's tau-b",
    "tau_ap": "tau_AP",
    "tau_ap_b": "tau_AP,b",
    "rbo": "RBO",
    "pearson": "Pearson r",
    "spearman": "Spearman rho",
    "swap": "largest swap",
}


USAGE = "usage: cmrkit agree QRELS_A QRELS_B RUN RUN RUN [...] (the two qrels first, then the runs)"


def register(app: typer.Typer) -> None:
    """Add `agree` to the app."""
    app.command("agree")(agree_command)


def _table(result, qrels_a: Path, qrels_b: Path) -> None:
    from cmrkit.commands.tables import Table, agreement_table, render

    caption = (
        f"{qrels_b} against {qrels_a} (the reference), {len(result.runs)} runs scored on the "
        f"{len(result.queries)} queries both judge; [{result.ci:.0%} bootstrap interval over the "
        f"queries, {result.samples:,} resamples]; RBO's p "
        f"{result.agreement[result.measures[0].name].rbo_p}"
    )
    render(agreement_table("agreement", caption, result, LABELS), out)
    runs = Table(
        "runs", ["run", *(f"{m.name} {side}" for m in result.measures for side in ("A", "B"))]
    )
    for name in result.runs:
        runs.add_row(
            name,
            *(
                m.format(getattr(result, side)[m.name][name])
                for m in result.measures
                for side in ("reference", "other")
            ),
        )
    render(runs, out)


def _csv(result) -> str:
    import io

    from cmrkit.escaping import csv_writer

    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(["measure", "statistic", "value", "low", "high"])
    for m in result.measures:
        for name in LABELS:
            value = getattr(result.agreement[m.name], name)
            ci = result.intervals[m.name][name] or (None, None)
            w.writerow([m.name, name, *("" if x is None else repr(x) for x in (value, *ci))])
    return buf.getvalue()


@user_errors
def agree_command(
    qrels_a: Path = typer.Argument(..., help="The reference qrels (complete, or people's)."),
    qrels_b: Path = typer.Argument(..., help="The qrels to check (a shallower pool, a judge)."),
    runs: list[Path] = typer.Argument(..., help="Three or more TREC runs."),
    measure: list[str] = MEASURE,
    bootstrap: int = BOOTSTRAP,
    ci: float = CI,
    seed: int = SEED,
    rbo_p: float = RBO_P,
    depth: int = DEPTH,
    dedupe: bool = DEDUPE,
    allow_unjudged: bool = ALLOW_UNJUDGED,
    trec_version: TrecVersion = TREC_VERSION,
    fmt: Format = FORMAT,
) -> None:
    """Do two sets of qrels rank the runs the same way? Each run is scored under both.

    Reports Kendall's tau and tau-b, tau_AP (top-weighted), RBO, Pearson and Spearman of the
    scores, and the largest swap (the two runs the second qrels order the other way that the
    reference sets furthest apart), each with a bootstrap interval over the queries both qrels
    judge (a query a run lacks scores 0). Default measure: AP.

    Example: cmrkit agree qrels/sample.test.txt shallow.qrels runs/sample/bm25.test.trec
    runs/sample/qe-rm3.test.trec runs/sample/hybrid.test.trec -m AP -m RR@10
    """
    check_order([(qrels_a, "qrels"), (qrels_b, "qrels"), *((r, "a run") for r in runs)], USAGE)
    options = agreement_options(bootstrap, ci, seed, rbo_p, depth, trec_version)
    from cmrkit.evaluation.agreement import qrels_agreement
    from cmrkit.evaluation.significance import run_names
    from cmrkit.retrieval.runfile import check_qrels_of
    from cmrkit.trec import read_qrels, read_run_columns

    if len(runs) < 3:
        raise CmrkitError(
            f"{len(runs)} run(s) given: a rank correlation needs at least 3 runs; give more"
        )
    reference = with_warnings(lambda: read_qrels(qrels_a))
    other = with_warnings(lambda: read_qrels(qrels_b))
    names = run_names(runs)
    loaded = {n: read_run_columns(p, dedupe=dedupe) for n, p in zip(names, runs, strict=True)}
    if not any(q in reference for run in loaded.values() for q in run.qids):
        raise CmrkitError(
            f"{qrels_a} judges none of the runs' queries: are the runs of its collection?"
        )
    for name, path in zip(names, runs, strict=True):  # the reference: a shallow B may miss one
        check_qrels_of(path, qrels_a, loaded[name], reference, allow_unjudged=allow_unjudged)
    warn_identical(loaded)
    result = qrels_agreement(
        loaded,
        reference,
        other,
        measure or ["AP"],
        **options,
    )
    if fmt is Format.json:
        import json

        obj = {"reference": str(qrels_a), "other": str(qrels_b), **result.to_json()}
        obj["paths"] = {n: str(p) for n, p in zip(names, runs, strict=True)}
        emit(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
    elif fmt is Format.csv:
        emit(_csv(result))
    elif fmt is Format.trec:
        raise CmrkitError("agree prints a table, JSON or CSV: -f table|json|csv")
    else:
        _table(result, qrels_a, qrels_b)
    if result.only_reference or result.only_other:
        console.print(
            f"left out: {result.only_reference} queries judged only in {qrels_a}, "
            f"{result.only_other} only in {qrels_b}",
            markup=False,
            soft_wrap=True,
        )
