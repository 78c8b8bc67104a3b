"""`cmrkit judgments check`: how far an automatic judge's labels can be trusted."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cmrkit.commands.choices import TrecVersion
from cmrkit.commands.judgments import judgments_app
from cmrkit.commands.options import (
    BOOTSTRAP,
    CI,
    DEPTH,
    FORCE_OUTPUTS,
    MEASURE,
    RBO_P,
    SEED,
    TREC_VERSION,
    agreement_options,
)
from cmrkit.commands.output import FORMAT, Format, check_order, emit, with_warnings
from cmrkit.console import console, out, user_errors
from cmrkit.errors import CmrkitError

STATISTICS = {
    "tau": "Kendall's tau",
    "tau_b": "Kendall's tau-b",
    "tau_ap": "tau_AP",
    "rbo": "RBO",
    "swap": "largest swap",
}
MAX_QUERY_ROWS = 30
USAGE = "usage: cmrkit judgments check LABELS --against QRELS [RUN RUN RUN ...] (the labels first)"


def register(app: typer.Typer) -> None:
    """Nothing at the top level: `judgments check` is in the `judgments` group
    (commands/judgments.py)."""


def _n(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def read_reference(path: Path, keys: list[Path] | None = None):
    """Qrels, or people's labels (a judgments CSV: its first line holds a comma; blind pair
    ids mapped back with the ``keys`` of their export)."""
    from cmrkit.fileio import iter_lines
    from cmrkit.judgments.auto.check import reference_from_judgments, reference_from_qrels
    from cmrkit.judgments.human import read_judgments
    from cmrkit.trec import read_qrels

    first = next((line for _, line in iter_lines(path) if line.strip()), "")
    if "," in first:
        from cmrkit.assess.key import merge_keys

        key = merge_keys(keys) if keys else None
        return reference_from_judgments(read_judgments(path, key=key), path)
    return reference_from_qrels(with_warnings(lambda: read_qrels(path)), path)


@judgments_app.command("check")
@user_errors
def check_command(
    labels: Path = typer.Argument(
        ..., metavar="LABELS", help="Labels of `judgments auto` (query_id,doc_id,...,label,...)."
    ),
    runs: list[Path] = typer.Argument(
        None, metavar="[RUN]...", help="Three or more runs: the system ranking and circularity."
    ),
    against: Path = typer.Option(
        ...,
        "--against",
        help="The reference: qrels (gold, or people's aggregated), or people's labels (a "
        "judgments CSV as `judgments aggregate` reads).",
    ),
    keys: list[Path] = typer.Option(
        [],
        "--key",
        help="--against people's labels of blind pair ids (the offline page, `assess export`): "
        "the answer key(s) written beside them (repeatable).",
    ),
    measure: list[str] = MEASURE,
    bootstrap: int = BOOTSTRAP,
    ci: float = CI,
    seed: int = SEED,
    rbo_p: float = RBO_P,
    flag_gain: float = typer.Option(
        0.01,
        "--flag-gain",
        help="Flag a run that moves up when its score gains more than this over the runs' "
        "median change (a run made with the judge's own model: any gain).",
    ),
    depth: int = DEPTH,
    trec_version: TrecVersion = TREC_VERSION,
    whole_reference: bool = typer.Option(
        False,
        "--whole-reference",
        help="Rank the runs on every query of the reference, also those the labels do not touch "
        "(they score the same under both qrels and pull the agreement towards 1) [default: the "
        "queries the labels cover].",
    ),
    plot: Path | None = typer.Option(
        None,
        "--plot",
        help="Write the reliability diagram of the judge's probabilities against the reference "
        "as FILE.png (300 dpi), FILE.pdf or FILE.svg.",
    ),
    force: bool = FORCE_OUTPUTS,
    fmt: Format = FORMAT,
) -> None:
    """How far a judge's labels can be trusted: kappa, confusion, and the system ranking.

    Cohen's kappa of the binary labels (4-5 relevant) and, against people's labels, the
    quadratic-weighted kappa of the 5-point labels; the confusion matrix; per-query agreement.
    With runs: each run scored under the reference qrels and under the judge's qrels (the
    reference with every labelled pair replaced by the judge's label); Kendall's tau, tau_AP,
    RBO and the largest swap with bootstrap intervals over queries; and per run the change of
    score and rank, flagged when a run made with the judge's own model (its sidecar holds the
    judge's model sha256) gains. The runs are ranked on the queries the labels cover
    (--whole-reference: every query of the reference). Default measure: AP. --plot: the
    reliability diagram of the judge's probabilities.

    Example: cmrkit judgments check labels.csv --against qrels/sample.test.txt
    runs/sample/bm25.test.trec runs/sample/fields-doc.test.trec runs/sample/qe-rm3.test.trec
    """
    check_order([(labels, "a CSV"), (against, ("qrels", "a CSV")),
                 *((r, "a run") for r in runs or [])], USAGE)  # fmt: skip
    options = agreement_options(bootstrap, ci, seed, rbo_p, depth, trec_version)
    if not flag_gain >= 0:
        raise CmrkitError(f"--flag-gain {flag_gain} must be 0 or more")
    if fmt is Format.trec:
        raise CmrkitError("judgments check prints a table, JSON or CSV: -f table|json|csv")
    if plot is not None:
        from cmrkit.figures import figure_format

        figure_format(plot)  # a name that is no PNG, PDF or SVG fails before any work
    runs = list(runs or [])
    if 0 < len(runs) < 3:
        raise CmrkitError(
            f"{len(runs)} run(s) given: a rank correlation needs at least 3 runs; give more, "
            "or none for the labels alone"
        )
    from cmrkit.evaluation.significance import run_names
    from cmrkit.judgments.auto.check import check_labels, judge_models
    from cmrkit.judgments.auto.labels import read_labels, read_labels_sidecar
    from cmrkit.retrieval.runfile import read_sidecar
    from cmrkit.trec import read_run_columns

    judged = read_labels(labels)
    if plot is not None and all(lb.probability is None for lb in judged):
        raise CmrkitError(
            "--plot draws the judge's probabilities, and the labels hold none", path=labels
        )
    sidecar = read_labels_sidecar(labels) or {}
    identity = sidecar.get("judge", {}).get("identity")
    reference = read_reference(against, keys)
    names = run_names(runs) if runs else []
    loaded = {n: read_run_columns(p) for n, p in zip(names, runs, strict=True)}
    result = check_labels(
        judged,
        reference,
        labels_path=labels,
        identity=identity if isinstance(identity, str) else None,
        models=judge_models(sidecar),
        runs=loaded,
        sidecars={n: read_sidecar(p) for n, p in zip(names, runs, strict=True)},
        measures=measure or ["AP"],
        min_gain=flag_gain,
        whole_reference=whole_reference,
        **options,
    )
    if plot is not None:
        _write_plot(result, plot, force)
    if fmt is Format.json:
        obj = result.to_json()
        if names:
            obj["paths"] = {n: str(p) for n, p in zip(names, runs, strict=True)}
        emit(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
    elif fmt is Format.csv:
        emit(_csv(result))
    else:
        _table(result)


def _write_plot(result, plot: Path, force: bool) -> None:
    """The reliability diagram, written whole or not at all (up to date when the same)."""
    from cmrkit.fileio import RepeatableOutputs
    from cmrkit.judgments.auto.reliability import plot_reliability

    rel = result.reliability
    if rel is None:
        raise CmrkitError(
            "--plot: no labelled pair with a probability has a reference label",
            path=result.reference.path,
        )
    title = (
        f"{Path(result.labels).name} ({result.judge}) against {Path(result.reference.path).name}"
        f" ({result.reference.kind}): {rel.pairs:,} pairs"
    )
    with RepeatableOutputs([plot], force=force) as staged:
        plot_reliability(rel, staged.path(plot), title)
    if staged.up_to_date:
        console.print(f"{plot} is up to date; --force rewrites it", markup=False, soft_wrap=True)
    else:
        console.print(f"wrote {plot}", markup=False, soft_wrap=True)


def _table(result) -> None:
    from cmrkit.commands.tables import Table, render

    a, ref = result.agreement, result.reference
    people = f", {ref.workers} people" if ref.kind == "labels" else ""
    out.print(
        f"{result.labels} ({result.judge}) against {ref.path} ({ref.kind}{people}): "
        f"{a.pairs} pairs compared, agreement {_n(a.agreement, 3)}, Cohen's kappa "
        f"{_n(a.kappa)}; 5-point (quadratic weights) "
        + (
            f"{_n(a.kappa_likert)} over {a.likert_pairs} pairs"
            if ref.likert
            else "- (qrels are binary)"
        )
        + (f"; Brier {_n(a.brier)} over {a.with_probability}" if a.brier is not None else ""),
        markup=False,
        soft_wrap=True,
    )
    notes = []
    if a.unlisted:
        notes.append(f"{a.unlisted} labelled pairs the qrels do not list counted not relevant")
    if a.left_out:
        notes.append(f"{a.left_out} labelled pairs without a reference left out")
    if a.reference_only:
        notes.append(f"{a.reference_only} reference pairs the judge did not label")
    if notes:
        out.print("; ".join(notes), markup=False, soft_wrap=True)
    if result.reliability is not None:
        rel = result.reliability
        out.print(
            f"calibration of the judge's probabilities: expected calibration error {rel.ece:.4f} "
            f"over {rel.pairs} pairs ({len(rel.bins)} bins; --plot FILE draws the reliability "
            "diagram)",
            markup=False,
            soft_wrap=True,
        )
    columns = [str(c) for c in next(iter(a.confusion.values()))]
    side = "relevance" if ref.kind == "qrels" else "label"
    t = Table("confusion", ["judge's label", *(f"reference {side} {c}" for c in columns)], keys=1)
    for label, row in a.confusion.items():
        t.add_row(str(label), *(str(n) for n in row.values()))
    render(t, out)
    if len(a.per_query) <= MAX_QUERY_ROWS:
        cols = ("pairs", "agreement", "kappa", "judge_relevant", "reference_relevant")
        t = Table("per query", ["query", *cols], keys=1)
        for qid, q in a.per_query.items():
            t.add_row(
                qid,
                *(
                    _n(q[c], 3) if isinstance(q[c], float) or q[c] is None else str(q[c])
                    for c in cols
                ),
            )
        render(t, out)
    else:
        out.print(f"per-query agreement of {len(a.per_query)} queries: see -f json", markup=False)
    if result.ranking is not None:
        _ranking_tables(result)


def _ranking_tables(result) -> None:
    from cmrkit.commands.tables import Table, agreement_table, render

    r, scope = result.ranking, result.scope
    if scope.get("queries") == "whole reference":
        which = (
            f"all {len(r.queries)} queries of the reference (--whole-reference; the labels "
            f"cover {scope['labelled_queries']}, the others score the same under both qrels)"
        )
    else:
        which = (
            f"the {len(r.queries)} queries the labels cover (of {scope['reference_queries']} "
            "the reference judges; --whole-reference ranks on all)"
        )
    caption = (
        f"{len(r.runs)} runs on {which}; the judge's qrels: the reference's with every labelled "
        f"pair replaced by the judge's label [{r.ci:.0%} bootstrap interval, {r.samples:,} "
        f"resamples, seed {r.seed}]"
    )
    render(agreement_table("system ranking", caption, r, STATISTICS), out)
    for m in r.measures:
        cols = ("run", "reference", "judge", "change", "rank", "moves", "flag")
        t = Table(
            f"circularity ({m.name})",
            cols,
            caption="change: judge - reference; rank: reference -> judge; flag: the judge's own "
            f"model gaining, or moving up with a gain over the median change above "
            f"{result.min_gain}",
        )
        for row in result.circularity[m.name]:
            t.add_row(
                row["run"] + (" (judge's model)" if row["judge_model"] else ""),
                m.format(row["reference"]),
                m.format(row["judge"]),
                f"{row['change']:+.4f}",
                f"{row['reference_rank']} -> {row['judge_rank']}",
                f"{row['rank_change']:+d}",
                "FLAG: " + row["why"] if row["flagged"] else "",
            )
        render(t, out)


def _csv(result) -> str:
    import io

    from cmrkit.escaping import csv_writer

    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(["section", "item", "statistic", "value", "low", "high"])

    def cell(x):
        return "" if x is None else (repr(x) if isinstance(x, float) else x)

    a = result.agreement
    for name in ("pairs", "agreement", "kappa", "kappa_likert", "likert_pairs", "brier"):
        w.writerow(["labels", "", name, cell(getattr(a, name)), "", ""])
    if result.reliability is not None:
        w.writerow(["labels", "", "ece", cell(result.reliability.ece), "", ""])
        for b in result.reliability.bins:
            for name in ("pairs", "mean_probability", "relevant_share"):
                low, high = (b["low"], b["high"]) if name == "relevant_share" else (None, None)
                item = f"{b['lo']:g}-{b['hi']:g}"
                w.writerow(["reliability", item, name, *(cell(x) for x in (b[name], low, high))])
    for label, row in a.confusion.items():
        for col, n in row.items():
            w.writerow(["confusion", label, col, n, "", ""])
    for qid, q in a.per_query.items():
        for name, value in q.items():
            w.writerow(["query", qid, name, cell(value), "", ""])
    r = result.ranking
    if r is not None:
        for name, value in result.scope.items():
            w.writerow(["ranking", "", name, value, "", ""])
        for m in r.measures:
            for name in ("tau", "tau_b", "tau_ap", "tau_ap_b", "rbo", "swap"):
                low, high = r.intervals[m.name][name] or (None, None)
                value = getattr(r.agreement[m.name], name)
                w.writerow(["ranking", m.name, name, *(cell(x) for x in (value, low, high))])
            for row in result.circularity[m.name]:
                for name in ("reference", "judge", "change", "excess_gain", "reference_rank",
                             "judge_rank", "judge_model", "flagged"):  # fmt: skip
                    w.writerow([f"run {m.name}", row["run"], name, cell(row[name]), "", ""])
    return buf.getvalue()
