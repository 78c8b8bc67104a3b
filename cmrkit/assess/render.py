"""Writing assessment tasks: MTurk batch (input CSV + HIT layout), JSON lines, offline HTML page.

MTurk batch input CSV, one row per HIT. Columns: ``hit_id``, ``n_pairs``, then for each slot
``i`` = 1..N (N = the largest HIT): ``p{i}_pair_id`` (the blind pair id, see
:mod:`cmrkit.assess.key`) and the HTML fragments ``p{i}_query`` (the window of the query unit,
mention in ``<mark class="q">``), ``p{i}_title``, ``p{i}_first`` (the document's first
sentence), ``p{i}_candidate`` (the window of the candidate unit; unless blind, known mentions in
``<mark class="c">``) and ``p{i}_next`` (the next sentence). Slots past ``n_pairs`` are empty and
hidden by the layout. The layout names each answer ``p{i}_label`` (1..5), so the results CSV holds
``Input.p{i}_pair_id`` and ``Answer.p{i}_label``.

No cell is a spreadsheet formula (see :mod:`cmrkit.escaping`): id cells that would be one get a
leading apostrophe (removed again when the results are read), HTML cells a character reference.
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from cmrkit.assess.display import Shown
from cmrkit.assess.tasks import Task, Tasks
from cmrkit.escaping import csv_cell, fill, html_cell
from cmrkit.judgments.scale import LIKERT


def template(name: str) -> str:
    """The text of a template shipped in ``cmrkit/data/assess/``."""
    return resources.files("cmrkit").joinpath("data", "assess", name).read_text(encoding="utf-8")


def marked(text: str, spans: Sequence[tuple[int, int]], css: str, lo: int = 0, hi: int = -1) -> str:
    """Escaped HTML of ``text[lo:hi]`` with the spans in it wrapped in ``<mark class=css>``."""
    hi = len(text) if hi < 0 else hi
    parts, at = [], lo
    for s, e in spans:
        s, e = max(s, lo), min(e, hi)
        if s < at or e <= s:
            continue
        parts.append(html.escape(text[at:s]))
        parts.append(f'<mark class="{css}">{html.escape(text[s:e])}</mark>')
        at = e
    parts.append(html.escape(text[at:hi]))
    return "".join(parts)


def _parts(s: Shown, css: str) -> dict[str, str]:
    """Escaped HTML of the text before the window, the window, and the text after it."""
    lo, hi = s.window or (0, len(s.text))
    return {
        "before": marked(s.text, s.spans, css, 0, lo),
        "main": marked(s.text, s.spans, css, lo, hi),
        "after": marked(s.text, s.spans, css, hi, len(s.text)),
    }


def shown_parts(s: Shown, css: str) -> dict[str, str]:
    """Escaped HTML of a shown text in three parts, ``before`` the window, the window (``main``)
    and ``after`` it, its spans in ``<mark class=css>``: what the offline page and the assessment
    server insert as HTML (nothing else from the data is ever inserted as HTML)."""
    return _parts(s, css)


def _windowed(s: Shown, css: str) -> str:
    """The window alone, with an ellipsis where text was cut (MTurk fragments)."""
    p = _parts(s, css)
    return ("\u2026 " if p["before"] else "") + p["main"] + (" \u2026" if p["after"] else "")


def _fragments(t: Task) -> dict[str, str]:
    return {
        "query": _windowed(t.query, "q"),
        "title": html.escape(t.title or ""),
        "first": html.escape(t.first or ""),
        "candidate": _windowed(t.candidate, "c"),
        "next": html.escape(t.next or ""),
    }


def _hits(tasks: Sequence[Task]) -> list[list[Task]]:
    hits: dict[str, list[Task]] = {}
    for t in tasks:
        hits.setdefault(t.hit_id, []).append(t)
    return [sorted(h, key=lambda t: t.position) for _, h in sorted(hits.items())]


def write_jsonl(tasks: Tasks, path: Path) -> None:
    """One task per line (blind: pair ids only; else also the real ids and gold answers)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for t in tasks.tasks:
            f.write(json.dumps(t.to_json(tasks.blind), sort_keys=True, ensure_ascii=False) + "\n")


def _note(tasks: Tasks, html_text: str) -> str:
    return "" if tasks.blind else html_text


def write_mturk(tasks: Tasks, csv_path: Path, layout_path: Path) -> None:
    """The batch input CSV (one row per HIT) and the HIT layout that reads it."""
    hits = _hits(tasks.tasks)
    slots = max(len(h) for h in hits)
    fields = ["hit_id", "n_pairs"]
    for i in range(1, slots + 1):
        fields += [f"p{i}_{k}" for k in ("pair_id", "query", "title", "first", "candidate", "next")]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    for h in hits:
        row = {k: "" for k in fields}
        row["hit_id"], row["n_pairs"] = csv_cell(h[0].hit_id), str(len(h))
        for i, t in enumerate(h, 1):
            row[f"p{i}_pair_id"] = csv_cell(t.pair_id)
            for k, v in _fragments(t).items():
                row[f"p{i}_{k}"] = html_cell(v)
        w.writerow(row)
    csv_path.write_text(buf.getvalue(), encoding="utf-8", newline="\n")

    block = template("mturk-pair.html")
    scale = template("mturk-scale.html")
    pairs = []
    for i in range(1, slots + 1):
        options = "".join(
            fill(scale, {"I": str(i), "V": str(v), "NAME": html.escape(name)}) for v, name in LIKERT
        )
        pairs.append(fill(block, {"SCALE": options, "I": str(i)}))
    note = _note(tasks, ' (its mention, where known, in <mark class="c">blue</mark>)')
    layout = fill(template("mturk-layout.html"), {"PAIRS": "".join(pairs), "NOTE": note})
    layout_path.write_text(layout, encoding="utf-8", newline="\n")


def page_html(tasks: Tasks, title: str) -> str:
    """A self-contained offline assessment page for the tasks (gold answers are not embedded).

    Each query's and each candidate's HTML is stored once; tasks refer to them by position.
    Blind pages name pairs by their pair ids only."""
    items: list[dict[str, object]] = []
    queries: dict[str, int] = {}
    units: dict[str, int] = {}
    query_html: list[dict[str, str]] = []
    unit_html: list[dict[str, str]] = []
    for t in tasks.tasks:
        q = _parts(t.query, "q")
        qk = json.dumps(q, sort_keys=True)
        if qk not in queries:
            queries[qk] = len(query_html)
            query_html.append(q)
        u = {
            "title": html.escape(t.title or ""),
            "first": html.escape(t.first or ""),
            "next": html.escape(t.next or ""),
            **_parts(t.candidate, "c"),
        }
        uk = json.dumps(u, sort_keys=True)
        if uk not in units:
            units[uk] = len(unit_html)
            unit_html.append(u)
        ids = t.pair_id if tasks.blind else f"{t.query_id} / {t.doc_id}"
        items.append(
            {"pair": t.pair_id, "ids": ids, "q": queries[qk], "u": units[uk], "hit": t.hit_id}
        )
    content = {"queries": query_html, "tasks": items, "units": unit_html}
    body = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    page_id = hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]
    data = json.dumps(
        {"page_id": page_id, "scale": [list(x) for x in LIKERT], **content},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    # inside <script>, "</script" or "<!--" in the data would end or confuse the element
    data = data.replace("<", "\\u003c")
    note = _note(tasks, ' Candidate mentions, where known, are <mark class="c">marked</mark>.')
    return fill(
        template("page.html"),
        {
            "STYLE": template("page.css"),
            "TITLE": html.escape(title),
            "NOTE": note,
            "SCRIPT": template("page.js"),
            "TASKS": data,
        },
    )


def write_html(tasks: Tasks, path: Path, title: str) -> None:
    path.write_text(page_html(tasks, title), encoding="utf-8", newline="\n")
