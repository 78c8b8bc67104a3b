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


def format_p(p: float) -> str:
    if math.isnan(p):
        return "n/a"
    return f"{p:.4f}" if p >= 0.0001 else f"{p:.1e}"


def comparison_to_json(comp: Comparison, paths: Mapping[str, str] | None = None) -> str:
    """Means over the compared queries (``queries``, named in ``query_set``), and each run's
    own count of scored queries with those left out of the comparison."""
    obj: dict = {
        "baseline": comp.baseline,
        "test": comp.test,
        "correction": comp.correction,
        "alpha": comp.alpha,
        "measures": [m.name for m in comp.measures],
        "queries": len(comp.queries),
        "query_set": comp.describe(),
        "systems": {},
    }
    left_out = comp.left_out
    for name, result in comp.results.items():
        entry: dict = {}
        if paths:
            entry["run"] = paths[name]
        entry["queries"] = len(comp.queries)
        entry["scored_queries"] = result.queries
        entry["left_out"] = left_out[name]
        entry["measures"] = {m.name: comp.mean(name, m) for m in comp.measures}
        if name in comp.stats:
            entry["against_baseline"] = {
                m: {
                    "delta": c.delta,
                    "paired_queries": c.queries,
                    "improved": c.improved,
                    "hurt": c.hurt,
                    "p": None if math.isnan(c.p) else c.p,
                    "p_adjusted": None if math.isnan(c.p_adjusted) else c.p_adjusted,
                    "significant": c.significant,
                }
                for m, c in comp.stats[name].items()
            }
        obj["systems"][name] = entry
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
)


def comparison_rows(comp: Comparison) -> list[tuple]:
    """One row per system and measure in COMPARISON_COLUMNS order; ``value`` is the mean over
    the compared queries; a system without statistics (the baseline) has None from delta on,
    its number of compared queries excepted."""
    rows = []
    for name in comp.systems:
        for m in comp.measures:
            c = comp.stats.get(name, {}).get(m.name)
            if c is None:
                rows.append(
                    (name, m.name, comp.mean(name, m), None, len(comp.queries)) + (None,) * 5
                )
                continue
            rows.append(
                (name, m.name, c.mean, c.delta, c.queries, c.improved, c.hurt)
                + (c.p, c.p_adjusted, c.significant)
            )
    return rows


def comparison_to_csv(comp: Comparison) -> str:
    """One row per system and measure (:func:`comparison_rows`)."""
    import io

    from cmrkit.escaping import csv_writer

    def number(x: float | None) -> str:
        return "" if x is None or math.isnan(x) else repr(x)

    buf = io.StringIO()
    w = csv_writer(buf)
    w.writerow(COMPARISON_COLUMNS)
    for (
        name,
        measure,
        value,
        delta,
        queries,
        improved,
        hurt,
        p,
        p_adj,
        significant,
    ) in comparison_rows(comp):
        if delta is None:  # the baseline
            w.writerow([name, measure, repr(value), "", queries] + [""] * 5)
            continue
        w.writerow(
            [name, measure, repr(value), repr(delta), queries, improved, hurt]
            + [number(p), number(p_adj), str(significant).lower()]
        )
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
