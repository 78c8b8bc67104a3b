"""Writing assessment tasks: MTurk batch (input CSV + HIT layout), JSON lines, offline HTML page.

MTurk batch input CSV, one row per HIT. Columns: ``hit_id``, ``n_pairs``, then for each slot
``i`` = 1..N (N = the largest HIT): ``p{i}_query_id``, ``p{i}_doc_id`` and the HTML fragments
``p{i}_query`` (query unit, mention in ``<mark class="q">``), ``p{i}_title``, ``p{i}_first``
(the document's first sentence), ``p{i}_candidate`` (the candidate unit, known mentions in
``<mark class="c">``) and ``p{i}_next`` (the next sentence). Slots past ``n_pairs`` are empty and
hidden by the layout. The layout names each answer ``p{i}_label`` (1..5), so the results CSV holds
``Input.p{i}_query_id``, ``Input.p{i}_doc_id`` and ``Answer.p{i}_label``.

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

from cmrkit.assess.tasks import Task, Text
from cmrkit.escaping import csv_cell, fill, html_cell

SCALE = [
    (1, "very unlikely"),
    (2, "unlikely"),
    (3, "not sure"),
    (4, "likely"),
    (5, "very likely"),
]


def template(name: str) -> str:
    """The text of a template shipped in ``cmrkit/data/assess/``."""
    return resources.files("cmrkit").joinpath("data", "assess", name).read_text(encoding="utf-8")


def marked(text: Text, css: str) -> str:
    """Escaped HTML of a text with its spans wrapped in ``<mark class=css>``."""
    parts, at = [], 0
    for s, e in text.spans:
        if s < at:
            continue
        parts.append(html.escape(text.text[at:s]))
        parts.append(f'<mark class="{css}">{html.escape(text.text[s:e])}</mark>')
        at = e
    parts.append(html.escape(text.text[at:]))
    return "".join(parts)


def _fragments(t: Task) -> dict[str, str]:
    return {
        "query": marked(t.query, "q"),
        "title": html.escape(t.title or ""),
        "first": html.escape(t.first or ""),
        "candidate": marked(t.candidate, "c"),
        "next": html.escape(t.next or ""),
    }


def _hits(tasks: Sequence[Task]) -> list[list[Task]]:
    hits: dict[str, list[Task]] = {}
    for t in tasks:
        hits.setdefault(t.hit_id, []).append(t)
    return [sorted(h, key=lambda t: t.position) for _, h in sorted(hits.items())]


def write_jsonl(tasks: Sequence[Task], path: Path) -> None:
    """One task per line (gold pairs carry their known answer in ``gold``)."""
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for t in tasks:
            f.write(json.dumps(t.to_json(), sort_keys=True, ensure_ascii=False) + "\n")


def write_mturk(tasks: Sequence[Task], csv_path: Path, layout_path: Path) -> None:
    """The batch input CSV (one row per HIT) and the HIT layout that reads it."""
    hits = _hits(tasks)
    slots = max(len(h) for h in hits)
    fields = ["hit_id", "n_pairs"]
    for i in range(1, slots + 1):
        fields += [
            f"p{i}_{k}"
            for k in ("query_id", "doc_id", "query", "title", "first", "candidate", "next")
        ]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    for h in hits:
        row = {k: "" for k in fields}
        row["hit_id"], row["n_pairs"] = csv_cell(h[0].hit_id), str(len(h))
        for i, t in enumerate(h, 1):
            row[f"p{i}_query_id"], row[f"p{i}_doc_id"] = csv_cell(t.query_id), csv_cell(t.doc_id)
            for k, v in _fragments(t).items():
                row[f"p{i}_{k}"] = html_cell(v)
        w.writerow(row)
    csv_path.write_text(buf.getvalue(), encoding="utf-8", newline="\n")

    block = template("mturk-pair.html")
    scale = template("mturk-scale.html")
    pairs = []
    for i in range(1, slots + 1):
        options = "".join(
            fill(scale, {"I": str(i), "V": str(v), "NAME": html.escape(name)}) for v, name in SCALE
        )
        pairs.append(fill(block, {"SCALE": options, "I": str(i)}))
    layout = fill(template("mturk-layout.html"), {"PAIRS": "".join(pairs)})
    layout_path.write_text(layout, encoding="utf-8", newline="\n")


def page_html(tasks: Sequence[Task], title: str) -> str:
    """A self-contained offline assessment page for the tasks (gold answers are not embedded).

    Each query's and each candidate's HTML is stored once; tasks refer to them by id."""
    items, queries, units = [], {}, {}
    for t in tasks:
        items.append({"query_id": t.query_id, "doc_id": t.doc_id, "hit_id": t.hit_id})
        if t.query_id not in queries:
            queries[t.query_id] = marked(t.query, "q")
        if t.doc_id not in units:
            f = _fragments(t)
            units[t.doc_id] = {k: f[k] for k in ("title", "first", "candidate", "next")}
    content = {"queries": queries, "tasks": items, "units": units}
    body = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    page_id = hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]
    data = json.dumps(
        {"page_id": page_id, "scale": SCALE, **content},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    # inside <script>, "</script" or "<!--" in the data would end or confuse the element
    data = data.replace("<", "\\u003c")
    return fill(
        template("page.html"),
        {
            "STYLE": template("page.css"),
            "TITLE": html.escape(title),
            "SCRIPT": template("page.js"),
            "TASKS": data,
        },
    )


def write_html(tasks: Sequence[Task], path: Path, title: str) -> None:
    path.write_text(page_html(tasks, title), encoding="utf-8", newline="\n")
