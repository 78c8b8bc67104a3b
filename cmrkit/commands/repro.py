"""`cmrkit repro`: how far a reproduced run agrees with the original (repro_eval's measures)."""

from __future__ import annotations

from pathlib import Path

import typer

from cmrkit.commands.choices import TrecVersion
from cmrkit.commands.options import MEASURE
from cmrkit.commands.output import ALLOW_UNJUDGED, DEDUPE, FORMAT, Format, emit, with_warnings
from cmrkit.console import console, out, user_errors
from cmrkit.errors import CmrkitError

PAIR_COLUMNS = ("original", "reproduced", "RMSE", "p")


def register(app: typer.Typer) -> None:
    """Add `repro` to the app."""
    app.command("repro")(repro_command)


def _number(value: float | None, fmt: str = ".4f") -> str:
    return "-" if value is None else format(value, fmt)


def _p(value: float | None) -> str:
    from cmrkit.evaluation.report import format_p

    return "undefined" if value is None else format_p(value)


def _caption(result) -> str:
    from cmrkit.evaluation.measures.trec import VERSION_NAMES

    if result.paired:
        scored = f"scored on the {result.queries} qrels queries (0 where a run lacks one)"
        how = "paired t-test"
    else:
        scored = (
            f"replication: the original runs scored on {result.queries} queries, the "
            f"reproduced on {result.queries_reproduced} of their own qrels"
        )
        how = "unpaired t-test"
    return (
        f"runs cut at {result.depth} documents; {scored}; trec_eval "
        f"{VERSION_NAMES[result.version]}'s measures; p: two-sided {how}"
    )


def _table(result) -> None:
    from cmrkit.commands.tables import Table, render

    pairs = [("run", result.run)] + ([("baseline", result.baseline)] if result.baseline else [])
    if result.paired:
        order = Table(
            "document order",
            ["", *(name for name, _ in pairs)],
            caption=f"means over the queries both runs rank; RBO's p {result.rbo_p}, depth "
            f"{result.depth}",
        )
        order.add_row("KTU", *(_number(p.ktu) for _, p in pairs))
        order.add_row("RBO", *(_number(p.rbo) for _, p in pairs))
        order.add_row("queries", *(str(len(p.rbo_per_query)) for _, p in pairs))
        render(order, out)
    headers = ["measure"]
    for name, _ in pairs:
        shown = PAIR_COLUMNS if result.paired else ("original", "reproduced", "p")
        headers += [f"{name} {c}" if name == "baseline" else c for c in shown]
    if result.er is not None:
        headers += ["ER", "DeltaRI"]
    table = Table("effectiveness", headers, caption=_caption(result))
    for m in result.measures:
        k = m.name
        cells = []
        for _, p in pairs:
            cells += [m.format(p.original[k]), m.format(p.reproduced[k])]
            if result.paired:
                cells.append(_number(p.rmse[k]))
            cells.append(_p(p.p[k]))
        if result.er is not None:
            cells += [_number(result.er[k]), _number(result.dri[k], "+.4f")]
        table.add_row(k, *cells)
    render(table, out)


def _csv(result) -> str:
    import io

    from cmrkit.escaping import csv_writer

    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(["pair", "measure", "statistic", "value"])

    def cell(value) -> str:
        return "" if value is None else repr(value)

    for name, p in (("run", result.run), ("baseline", result.baseline)):
        if p is None:
            continue
        if result.paired:
            w.writerow([name, "", "ktu", cell(p.ktu)])
            w.writerow([name, "", "rbo", cell(p.rbo)])
        for m in result.measures:
            k = m.name
            w.writerow([name, k, "original", cell(p.original[k])])
            w.writerow([name, k, "reproduced", cell(p.reproduced[k])])
            if result.paired:
                w.writerow([name, k, "rmse", cell(p.rmse[k])])
            w.writerow([name, k, "p", cell(p.p[k])])
    if result.er is not None:
        for m in result.measures:
            w.writerow(["", m.name, "er", cell(result.er[m.name])])
            w.writerow(["", m.name, "delta_ri", cell(result.dri[m.name])])
    return buf.getvalue()


@user_errors
def repro_command(
    original: Path = typer.Argument(..., help="The original run (TREC)."),
    reproduced: Path = typer.Argument(..., help="Its reproduction (TREC)."),
    qrels: Path = typer.Option(..., "--qrels", help="The qrels both runs are scored on."),
    baseline_original: Path = typer.Option(
        None, "--baseline-original", help="The original experiment's baseline run (for ER)."
    ),
    baseline_repro: Path = typer.Option(
        None, "--baseline-repro", help="The reproduced baseline run (for ER and DeltaRI)."
    ),
    qrels_repro: Path = typer.Option(
        None,
        "--qrels-repro",
        help="A replication: the reproduced runs' own qrels (other queries); the t-test is "
        "then unpaired, and RMSE, KTU and RBO are not computed.",
    ),
    measure: list[str] = MEASURE,
    depth: int = typer.Option(
        1000, "--depth", "-M", min=1, help="Cut every ranking here (repro_eval: 1000)."
    ),
    rbo_p: float = typer.Option(0.95, "--rbo-p", help="RBO's persistence p (repro_eval: 0.95)."),
    dedupe: bool = DEDUPE,
    allow_unjudged: bool = ALLOW_UNJUDGED,
    trec_version: TrecVersion = typer.Option(
        TrecVersion.v9,
        "--trec-eval",
        help="The trec_eval whose measures to use: 9 (9.0.8, as repro_eval's pytrec_eval) or 10.",
    ),
    fmt: Format = FORMAT,
) -> None:
    """How far a reproduced run agrees with the original, as repro_eval measures it.

    Document order: Kendall's tau Union (KTU) and RBO of each query's two rankings. Per
    measure: each run's mean, the per-query RMSE and the paired t-test's p. With both
    baselines: the same for the baselines' pair, and the effect ratio (ER) and delta relative
    improvement (DeltaRI). Every number equals repro_eval's. Default measures: AP, nDCG, P@10,
    nDCG@10, RR.

    Example: cmrkit repro runs/sample/qe-rm3.test.trec runs/repro/qe-rm3.test.trec --qrels
    qrels/sample.test.txt --baseline-original runs/sample/bm25.test.trec --baseline-repro
    runs/repro/bm25.test.trec
    """
    from cmrkit.evaluation.repro import DEFAULT_MEASURES, reproduce
    from cmrkit.retrieval.runfile import check_qrels_of
    from cmrkit.trec import read_qrels, read_run

    if (baseline_original is None) != (baseline_repro is None):
        given = "--baseline-original" if baseline_repro is None else "--baseline-repro"
        raise CmrkitError(
            f"{given} alone: ER and DeltaRI need both baselines; add "
            f"{'--baseline-repro' if baseline_repro is None else '--baseline-original'} RUN"
        )
    if fmt is Format.trec:
        raise CmrkitError("repro prints a table, JSON or CSV: -f table|json|csv")
    rep_qrels_path = qrels_repro or qrels
    originals = [original, *([baseline_original] if baseline_original else [])]
    reproductions = [reproduced, *([baseline_repro] if baseline_repro else [])]
    judged = with_warnings(lambda: read_qrels(qrels))
    rep_judged = with_warnings(lambda: read_qrels(qrels_repro)) if qrels_repro else judged
    runs = {}
    for path, against, qrels_path in [
        *((p, judged, qrels) for p in originals),
        *((p, rep_judged, rep_qrels_path) for p in reproductions),
    ]:
        runs[path] = read_run(path, dedupe=dedupe)
        if not runs[path].keys() & against.keys():
            raise CmrkitError(
                f"{qrels_path} judges none of {path}'s queries: is the run of its collection "
                "(and split)?"
            )
        check_qrels_of(path, qrels_path, runs[path], against, allow_unjudged=allow_unjudged)
    result = reproduce(
        runs[original],
        runs[reproduced],
        judged,
        measure or list(DEFAULT_MEASURES),
        baseline_original=runs.get(baseline_original),
        baseline_reproduced=runs.get(baseline_repro),
        qrels_reproduced=rep_judged if qrels_repro else None,
        depth=depth,
        rbo_p=rbo_p,
        version=trec_version.value,
    )
    if fmt is Format.json:
        import json

        paths = {"original": original, "reproduced": reproduced, "qrels": qrels}
        paths |= {"baseline_original": baseline_original, "baseline_repro": baseline_repro}
        paths |= {"qrels_repro": qrels_repro}
        obj = {k: None if v is None else str(v) for k, v in paths.items()} | result.to_json()
        emit(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
    elif fmt is Format.csv:
        emit(_csv(result))
    else:
        _table(result)
    for note in result.all_notes:
        console.print(f"note: {note}", markup=False, soft_wrap=True)
