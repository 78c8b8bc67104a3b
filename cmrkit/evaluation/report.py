"""Results, comparisons and coreference scores as JSON, CSV and trec_eval ``-q`` text."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cmrkit.evaluation.groups import GroupResult
from cmrkit.evaluation.measures.trec import VERSION_NAMES
from cmrkit.evaluation.ranking import Result
from cmrkit.evaluation.significance import Comparison

if TYPE_CHECKING:  # numpy-backed; `cmrkit eval` does not need it
    from cmrkit.evaluation.coref import CorefResult


def result_to_json(
    result: Result, groups: Sequence[GroupResult] | None = None, extra: Mapping | None = None
) -> str:
    """``{"measures": {...}, "per_query": {...}, "queries": n, ...}`` as indented JSON."""
    obj: dict = dict(extra or {})
    if result.version is not None:
        obj["trec_eval"] = VERSION_NAMES[result.version]
    obj["measures"] = result.aggregate
    obj["trec_names"] = {m.name: m.trec_name for m in result.measures}
    obj["queries"] = result.queries
    obj["all_queries"] = result.all_queries
    obj["depth"] = result.depth
    obj["missing_from_run"] = result.missing_from_run
    obj["missing_from_qrels"] = result.missing_from_qrels
    if groups is not None:
        obj["groups"] = {
            g.group: {"queries": len(g.queries), "measures": g.aggregate} for g in groups
        }
    obj["per_query"] = result.per_query
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def result_to_csv(result: Result, groups: Sequence[GroupResult] | None = None) -> str:
    """One row per query and measure, then the aggregate rows (qid ``all``); a last column
    ``trec_eval`` names the version whose numbers these are."""
    import io

    from cmrkit.escaping import csv_writer

    buf = io.StringIO()
    w = csv_writer(buf)
    with_groups = groups is not None
    tail = [] if result.version is None else [VERSION_NAMES[result.version]]
    head = [] if result.version is None else ["trec_eval"]
    w.writerow((["group"] if with_groups else []) + ["qid", "measure", "value"] + head)
    member = {q: g.group for g in groups or [] for q in g.queries}
    for qid, row in result.per_query.items():
        for m in result.measures:
            lead = [member[qid]] if with_groups else []
            w.writerow(lead + [qid, m.name, repr(row[m.name])] + tail)
    for g in groups or []:
        for m in result.measures:
            w.writerow([g.group, "all", m.name, repr(g.aggregate[m.name])] + tail)
    for m in result.measures:
        lead = ["all"] if with_groups else []
        w.writerow(lead + ["all", m.name, repr(result.aggregate[m.name])] + tail)
    return buf.getvalue()


def result_to_trec(result: Result, groups: Sequence[GroupResult] | None = None) -> str:
    """trec_eval ``-q`` lines ``measure<TAB>qid<TAB>value``, the ``all`` lines last.

    Laid out as trec_eval prints them (name padded to 22 characters, 4 decimals), so the
    lines of measures trec_eval has diff cleanly against its output. As with ``trec_eval -q
    -c``, queries missing from the run are averaged but not listed. Group aggregates use the
    qid ``all:<group>``.
    """
    lines = []
    # trec_eval prints num_q on the "all" line only
    per_query = [m for m in result.measures if m.kind != "NumQ"]
    for qid in result.scored:
        row = result.per_query[qid]
        for m in per_query:
            lines.append(f"{m.trec_name:<22}\t{qid}\t{m.format(row[m.name])}")
    for g in groups or []:
        for m in result.measures:
            lines.append(f"{m.trec_name:<22}\tall:{g.group}\t{m.format(g.aggregate[m.name])}")
    for m in result.measures:
        lines.append(f"{m.trec_name:<22}\tall\t{m.format(result.aggregate[m.name])}")
    return "\n".join(lines) + "\n"


P_FLOOR = 1e-4  # smaller p-values print as "p < 1e-4" (JSON and CSV keep the double)


def format_p(p: float) -> str:
    """A p-value as a table cell: four decimals, ``< 1e-4`` below (Tukey's p of 0.0 is the
    integration's floor, not a p of zero), ``n/a`` when undefined."""
    if math.isnan(p):
        return "n/a"
    return f"{p:.4f}" if p >= P_FLOOR else "< 1e-4"


def p_text(p: float) -> str:
    """``p=0.0123``, ``p < 1e-4`` or ``p undefined``: a p-value in a sentence or a title."""
    if math.isnan(p):
        return "p undefined"
    return f"p={p:.4f}" if p >= P_FLOOR else "p < 1e-4"


def fixed(value: float, digits: int = 4, *, signed: bool = False) -> str:
    """``value`` with ``digits`` decimals (``signed``: with its sign, ``+0.0500``), never a
    negative zero: a value that rounds to 0 prints as 0 (``+0.0000`` signed)."""
    text = f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"
    if text[1:].strip("0.") == "" and text[0] in "+-":
        return ("+" if signed else "") + text[1:]
    return text


def _nan_none(x: float | None) -> float | None:
    return None if x is None or math.isnan(x) else x


def comparison_to_json(comp: Comparison, paths: Mapping[str, str] | None = None) -> str:
    """Everything a comparison holds: the settings, the means over the compared queries
    (``queries``, named in ``query_set``) with their bootstrap intervals, each run's own count
    of scored queries, each system against the baseline (delta, its interval, Cohen's d_z, the
    queries improved and hurt, p, corrected p, and why a test is undefined), Tukey's HSD over
    every pair with ``all_pairs``, and the notes."""
    obj: dict = {
        "baseline": comp.baseline,
        "test": comp.test,
        "correction": comp.correction,
        "alpha": comp.alpha,
        "ci": comp.ci,
        "bootstrap": comp.bootstrap,
        "seed": comp.seed,
        "measures": [m.name for m in comp.measures],
        "queries": len(comp.queries),
        "query_set": comp.describe(),
        "systems": {},
    }
    for name, result in comp.results.items():
        entry: dict = {}
        if paths:
            entry["run"] = paths[name]
        entry["queries"] = len(comp.queries)
        entry["scored_queries"] = result.queries
        entry["measures"] = {m.name: comp.mean(name, m) for m in comp.measures}
        if comp.intervals:
            entry["intervals"] = {
                m: list(ci) if ci else None for m, ci in comp.intervals[name].items()
            }
        if name in comp.stats:
            entry["against_baseline"] = {
                m: {
                    "delta": c.delta,
                    "delta_ci": list(c.delta_ci) if c.delta_ci else None,
                    "d_z": c.d_z,
                    "paired_queries": c.queries,
                    "improved": c.improved,
                    "hurt": c.hurt,
                    "p": _nan_none(c.p),
                    "p_adjusted": _nan_none(c.p_adjusted),
                    "significant": c.significant,
                    "note": c.note,
                }
                for m, c in comp.stats[name].items()
            }
        obj["systems"][name] = entry
    if comp.all_pairs:
        obj["tukey_hsd"] = {
            m: [
                {
                    "first": pair.first,
                    "second": pair.second,
                    "delta": pair.delta,
                    "ci": list(pair.ci) if pair.ci else None,
                    "p": _nan_none(pair.p),
                    "significant": pair.significant,
                    "note": pair.note,
                }
                for pair in pairs
            ]
            for m, pairs in comp.pairs.items()
        }
    obj["notes"] = comp.notes
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


COMPARISON_COLUMNS = (
    "system",
    "measure",
    "value",
    "delta",
    "paired_queries",
    "improved",
    "hurt",
    "p",
    "p_adjusted",
    "significant",
    "value_low",
    "value_high",
    "delta_low",
    "delta_high",
    "d_z",
    "versus",
    "test",
    "note",
)


def comparison_rows(comp: Comparison) -> list[tuple]:
    """Rows in COMPARISON_COLUMNS order: one per system and measure (``value`` its mean over
    the compared queries, ``value_low``/``value_high`` its bootstrap interval; the baseline has
    None from ``delta`` on, its number of compared queries excepted; the others are tested
    ``versus`` the baseline), then with ``all_pairs`` one per pair of systems and measure
    (``test`` ``tukey``: ``delta`` is system's mean minus versus's, ``delta_low``/``delta_high``
    its simultaneous interval, ``p`` and ``p_adjusted`` Tukey's adjusted p)."""
    rows = []
    n = len(comp.queries)
    for name in comp.systems:
        for m in comp.measures:
            interval = comp.intervals.get(name, {}).get(m.name) or (None, None)
            c = comp.stats.get(name, {}).get(m.name)
            if c is None:
                rows.append(
                    (name, m.name, comp.mean(name, m), None, n, None, None, None, None, None)
                    + (*interval, None, None, None, None, None, None)
                )
                continue
            rows.append(
                (name, m.name, c.mean, c.delta, c.queries, c.improved, c.hurt)
                + (c.p, c.p_adjusted, c.significant, *interval)
                + (*(c.delta_ci or (None, None)), c.d_z, comp.baseline, comp.test, c.note)
            )
    for measure, pairs in comp.pairs.items():
        m = next(x for x in comp.measures if x.name == measure)
        for pair in pairs:
            rows.append(
                (pair.first, measure, comp.mean(pair.first, m), pair.delta, n, None, None)
                + (pair.p, pair.p, pair.significant, None, None, *(pair.ci or (None, None)))
                + (None, pair.second, "tukey", pair.note)
            )
    return rows


def comparison_to_csv(comp: Comparison) -> str:
    """:func:`comparison_rows` as CSV: numbers as Python writes them, empty where none."""
    import io

    from cmrkit.escaping import csv_writer

    def cell(x) -> str:
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return ""
        if isinstance(x, bool):
            return str(x).lower()
        return repr(x) if isinstance(x, float) else str(x)

    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(COMPARISON_COLUMNS)
    for row in comparison_rows(comp):
        w.writerow([cell(x) for x in row])
    return buf.getvalue()


def comparison_to_trec(comp: Comparison) -> str:
    """trec_eval-style lines ``measure<TAB>system<TAB>value`` (means over the compared
    queries); ``<measure>_p`` holds the corrected p-value of each system against the baseline."""
    lines = []
    for name in comp.systems:
        for m in comp.measures:
            lines.append(f"{m.trec_name:<22}\t{name}\t{m.format(comp.mean(name, m))}")
            c = comp.stats.get(name, {}).get(m.name)
            if c is not None:
                p = "nan" if math.isnan(c.p_adjusted) else f"{c.p_adjusted:.4f}"
                lines.append(f"{m.trec_name + '_p':<22}\t{name}\t{p}")
    return "\n".join(lines) + "\n"


def _coref_entry(value, counts: bool) -> dict:
    from cmrkit.evaluation.coref import Blanc, Counts

    if isinstance(value, Blanc):
        entry = {"recall": value.recall, "precision": value.precision, "f1": value.f1}
        if counts:
            entry["coref"] = _coref_entry(value.coref, True)
            entry["noncoref"] = _coref_entry(value.noncoref, True)
        return entry
    if isinstance(value, Counts):
        entry = {"recall": value.recall, "precision": value.precision, "f1": value.f1}
        if counts:
            entry.update(
                recall_num=value.recall_num,
                recall_den=value.recall_den,
                precision_num=value.precision_num,
                precision_den=value.precision_den,
            )
        return entry
    return {"value": value}


def coref_to_json(
    result: CorefResult, per_document: bool = False, extra: Mapping | None = None
) -> str:
    """``{"measures": {"muc": {"recall", "precision", "f1", counts...}, ...}, ...}``; the
    CoNLL F1 as ``{"value"}``, like ARI and NMI."""
    obj: dict = dict(extra or {})
    obj["scope"] = result.scope
    obj["singletons"] = result.singletons
    obj["documents"] = result.documents
    obj["notes"] = result.notes
    obj["measures"] = {m: _coref_entry(result.total[m], True) for m in result.measures}
    if per_document:
        obj["per_document"] = {
            doc: {m: _coref_entry(row[m], True) for m in result.measures}
            for doc, row in result.per_document.items()
        }
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def coref_to_csv(result: CorefResult, per_document: bool = False) -> str:
    """``document,measure,field,value`` rows (fields recall, precision, f1, or value), the
    whole-corpus rows (document ``all``) last."""
    import io

    from cmrkit.escaping import csv_writer

    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(["document", "measure", "field", "value"])
    rows = list(result.per_document.items()) if per_document else []
    rows.append(("all", result.total))
    for doc, row in rows:
        for m in result.measures:
            for name, value in _coref_entry(row[m], False).items():
                w.writerow([doc, m, name, repr(value)])
    return buf.getvalue()


_LATEX = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
}  # fmt: skip


def _latex_text(text: str) -> str:
    return "".join(_LATEX.get(ch, ch) for ch in text)


def comparison_to_latex(comp: Comparison) -> str:
    """The comparison as a LaTeX table for a paper (booktabs): a row per system, a column per
    measure, each mean with its bootstrap interval on the row beneath, a dagger where the
    system differs significantly from the baseline; the caption says the test, correction,
    alpha, interval and queries."""
    from cmrkit.evaluation.significance import CORRECTION_NAMES, TEST_NAMES

    lines = [
        r"% cmrkit compare; needs \usepackage{booktabs}",
        r"\begin{table}[t]",
        r"\centering",
        r"\begin{tabular}{l" + "r" * len(comp.measures) + "}",
        r"\toprule",
        "System & " + " & ".join(_latex_text(m.name) for m in comp.measures) + r" \\",
        r"\midrule",
    ]
    for name in comp.systems:
        cells, below = [], []
        for m in comp.measures:
            cell = comp.stats.get(name, {}).get(m.name)
            mark = r"$^\dagger$" if cell is not None and cell.significant else ""
            cells.append(f"{m.format(comp.mean(name, m))}{mark}")
            ci = comp.intervals.get(name, {}).get(m.name)
            below.append(rf"{{\scriptsize [{m.format(ci[0])}, {m.format(ci[1])}]}}" if ci else "")
        label = _latex_text(name) + (" (baseline)" if name == comp.baseline else "")
        lines.append(label + " & " + " & ".join(cells) + r" \\")
        if comp.intervals:
            lines.append(" & " + " & ".join(below) + r" \\")
    intervals = ""
    if comp.intervals:
        level = f"{comp.ci:.0%}".replace("%", r"\%")
        intervals = (
            f"; beneath each mean its {level} bootstrap interval ({comp.bootstrap:,} resamples "
            "of the queries)"
        )
    caption = (
        f"Means over {len(comp.queries)} queries{intervals}. $^\\dagger$: different from "
        f"{_latex_text(comp.baseline)} ({TEST_NAMES[comp.test]}, "
        f"{CORRECTION_NAMES[comp.correction]} correction, $p < {comp.alpha}$)."
    )
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{caption}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"
