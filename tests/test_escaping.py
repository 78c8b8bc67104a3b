"""Hostile text in every exported format, parsed back: MTurk batches and keys, JSON lines, the
HTML page (in a browser too), judgments and evaluation tables, file names (cmrkit.escaping).

The real components run: the CLI as its own process, real signals and file systems (see
fault_tools)."""

from __future__ import annotations

import csv
import html
import html.parser
import io
import json
import re
from pathlib import Path

import pytest
from browser import needs_chromium, wait_for
from fault_tools import (
    HOSTILE,
    pool_workspace,
)
from pool_fixtures import read_qrels_lines, write_qrels

from cmrkit.assess.key import read_key
from cmrkit.errors import CmrkitError
from cmrkit.escaping import csv_cell, csv_value, fill, html_cell
from cmrkit.fileio import safe_name

# === 5. hostile text into formats ===========================================================

HOSTILE_TEXT = (
    '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> {{TITLE}} '
    '{{TASKS}} {{SCRIPT}} ${p1_query} </script><!-- "quoted", comma'
)
HOSTILE_QIDS = ["=1+1", "@SUM(A1)", "+x", "-y", "'=q", "plain"]
HOSTILE_DOCS = ["=d1", "-d2", "@d3", "d4"]
PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
HOSTILE_TITLE = '{{SCRIPT}} <img src=x onerror="window.pwned = 3"> & {{TASKS}}'


def _inert(cell: str) -> bool:
    """No spreadsheet evaluates this cell."""
    return csv_cell(cell) == cell or cell[:1] == "'"


def _formula_free(rows) -> None:
    for row in rows:
        for cell in row:
            assert not cell or cell[0] not in "=+-@\t\r" or PLAIN_NUMBER.fullmatch(cell), cell


@pytest.fixture
def hostile(tmp_path, cli):
    ws = pool_workspace(
        tmp_path, HOSTILE_QIDS, HOSTILE_DOCS, {d: HOSTILE_TEXT for d in HOSTILE_DOCS}
    )
    r = cli("pool", "create", "runs/tiny/r.trec", "-o", "p.jsonl")
    assert r.exit_code == 0, r.output
    return ws


def _key_pairs(path: Path) -> dict[str, tuple[str, str]]:
    """pair id -> (qid, docno) of a key file, after checking that its cells are inert."""
    with open(path, newline="", encoding="utf-8") as f:
        _formula_free(csv.reader(f, delimiter="\t"))
    return {pid: (e.qid, e.docno) for pid, e in read_key(path).items()}


ALL_PAIRS = {(q, d) for q in HOSTILE_QIDS for d in HOSTILE_DOCS}


def test_mturk_batch_and_key_are_formula_free_and_results_read_back_exactly(hostile, cli):
    for blind in ("--blind", "--no-blind"):
        r = cli("pool", "export", "p.jsonl", "-f", "mturk", blind, "-o", "mt", "--force")
        assert r.exit_code == 0, r.output
        with open(hostile / "mt" / "batch-input.csv", newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        _formula_free(rows)
        layout = (hostile / "mt" / "hit-layout.html").read_text()
        assert "{{" not in layout and "pwned" not in layout
    key = _key_pairs(hostile / "mt.key.tsv")
    assert set(key.values()) == ALL_PAIRS
    header, body = rows[0], rows[1:]
    slots = [c[: -len("_pair_id")] for c in header if c.endswith("_pair_id")]
    results = io.StringIO()
    w = csv.writer(results)
    w.writerow(
        ["HITId", "WorkerId", "AssignmentStatus"]
        + [f"Input.{c}" for c in header]
        + [f"Answer.{s}_label" for s in slots]
    )
    seen = set()
    for row in body:
        cells = dict(zip(header, row, strict=True))
        n = int(cells["n_pairs"])
        for s in slots[:n]:
            seen.add(key[csv_value(cells[f"{s}_pair_id"])])
            assert "<script>" not in cells[f"{s}_candidate"]  # escaped HTML only
        # MTurk copies the batch cells into Input.* verbatim; the worker id is hostile too
        answers = ["5" if i < n else "" for i in range(len(slots))]
        w.writerow([cells["hit_id"], "=cmd|' /C calc'!A0", "Approved", *row, *answers])
    assert seen == ALL_PAIRS
    (hostile / "results.csv").write_text(results.getvalue(), encoding="utf-8")
    r = cli(
        "judgments",
        "aggregate",
        "results.csv",
        "--pool",
        "p.jsonl",
        "--key",
        "mt.key.tsv",
        "--min-agree",
        "1",
        "--min-relevant",
        "0",
        "--report",
        "rep.json",
        "-o",
        "q.txt",
    )
    assert r.exit_code == 0, r.output
    assert set(read_qrels_lines(hostile / "q.txt")) == ALL_PAIRS
    report = json.loads((hostile / "rep.json").read_text())
    assert list(report["workers"]) == ["=cmd|' /C calc'!A0"] and report["ignored_not_in_pool"] == 0


def test_jsonl_tasks_keep_the_text_as_data(hostile, cli):
    r = cli("pool", "export", "p.jsonl", "-f", "jsonl", "--no-blind", "-o", "t.jsonl")
    assert r.exit_code == 0, r.output
    tasks = [json.loads(x) for x in (hostile / "t.jsonl").read_text().splitlines()]
    assert {(t["query_id"], t["doc_id"]) for t in tasks} == ALL_PAIRS
    assert {t["candidate"]["unit"]["text"] for t in tasks} == {HOSTILE_TEXT}


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.title = ""
        self._in: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in.append(tag)

    def handle_endtag(self, tag):
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data):
        if self._in and self._in[-1] == "title":
            self.title += data


def test_html_page_escapes_text_and_never_expands_placeholders_from_data(hostile, cli):
    r = cli("pool", "export", "p.jsonl", "-f", "html", "--title", HOSTILE_TITLE, "-o", "a.html")
    assert r.exit_code == 0, r.output
    page = (hostile / "a.html").read_text()
    parser = _Page()
    parser.feed(page)
    assert [t for t, _ in parser.tags if t in ("script", "img", "iframe")] == ["script", "script"]
    assert parser.title == HOSTILE_TITLE  # shown literally, not expanded
    assert page.count('"use strict"') == 1  # the page script once: {{SCRIPT}} was not expanded
    data = page.split('<script type="application/json" id="tasks">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data  # nothing in the data can end the script element
    pairs = _key_pairs(hostile / "a.key.tsv")
    assert {pairs[t["pair"]] for t in json.loads(data)["tasks"]} == ALL_PAIRS


@needs_chromium
def test_html_page_in_the_browser_runs_no_data_and_exports_inert_csv(hostile, cli, browser):
    from selenium.webdriver.common.by import By

    r = cli("pool", "export", "p.jsonl", "-f", "html", "--title", HOSTILE_TITLE, "-o", "a.html")
    assert r.exit_code == 0, r.output
    browser.get((hostile / "a.html").as_uri())
    assert browser.title == HOSTILE_TITLE
    n = len(ALL_PAIRS)
    assert browser.find_element(By.ID, "counter").text.startswith(f"Pair 1 of {n}")
    assert "<script>" in browser.find_element(By.ID, "candidate").text  # shown as text
    worker = '=HYPERLINK("http://evil","x")'
    browser.find_element(By.ID, "worker").send_keys(worker)
    body = browser.find_element(By.TAG_NAME, "body")
    for _ in range(n):
        body.send_keys("4")
    assert browser.execute_script("return typeof window.pwned") == "undefined"
    browser.find_element(By.ID, "show-csv").click()
    text = wait_for(lambda: browser.find_element(By.ID, "csv").get_attribute("value"))
    rows = list(csv.reader(io.StringIO(text)))
    _formula_free(rows)
    column = rows[0].index("worker_id")
    assert {csv_value(r[column]) for r in rows[1:]} == {worker}
    (hostile / "page.csv").write_text(text, encoding="utf-8")
    r = cli(
        "judgments",
        "aggregate",
        "page.csv",
        "--pool",
        "p.jsonl",
        "--key",
        "a.key.tsv",
        "--min-agree",
        "1",
        "--min-relevant",
        "0",
        "--hard-threshold",
        "1",
        "--report",
        "rep.json",
        "-o",
        "q.txt",
    )
    assert r.exit_code == 0, r.output
    assert set(read_qrels_lines(hostile / "q.txt")) == ALL_PAIRS
    assert list(json.loads((hostile / "rep.json").read_text())["workers"]) == [worker]
    assert browser.execute_script("return typeof window.pwned") == "undefined"


def test_simulated_judgments_and_evaluation_tables_are_formula_free(hostile, cli):
    write_qrels(hostile / "gold.txt", {q: {d: 1 for d in HOSTILE_DOCS[:2]} for q in HOSTILE_QIDS})
    r = cli(
        "judgments",
        "simulate",
        "--qrels",
        "gold.txt",
        "--pool",
        "p.jsonl",
        "--worker-prefix",
        "=w",
        "-o",
        "sim.csv",
    )
    assert r.exit_code == 0, r.output
    with open(hostile / "sim.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    _formula_free(rows)
    assert {csv_value(r[0]) for r in rows[1:]} == set(HOSTILE_QIDS)
    r = cli(
        "judgments",
        "aggregate",
        "sim.csv",
        "--pool",
        "p.jsonl",
        "--min-agree",
        "3",
        "--min-relevant",
        "0",
        "--hard-threshold",
        "1",
        "--report",
        "rep.json",
        "-o",
        "q.txt",
    )
    assert r.exit_code == 0, r.output
    assert sorted(json.loads((hostile / "rep.json").read_text())["workers"]) == [
        "=w01",
        "=w02",
        "=w03",
    ]
    run = hostile / "runs" / "tiny" / "r.trec"
    r = cli("eval", run, "gold.txt", "-m", "AP", "-q", "-f", "csv")
    assert r.exit_code == 0, r.output
    rows = list(csv.reader(io.StringIO(r.stdout)))
    _formula_free(rows)
    assert {csv_value(r[0]) for r in rows[1:]} == {*HOSTILE_QIDS, "all"}
    other = hostile / "=a$x^{$.trec"
    other.write_bytes(run.read_bytes())
    r = cli("compare", "gold.txt", run, other, "-m", "AP", "-f", "csv", "--plot", "d.png")
    assert r.exit_code == 0, r.output
    rows = list(csv.reader(io.StringIO(r.stdout)))
    _formula_free(rows)
    assert (hostile / "d.png").read_bytes()[:4] == b"\x89PNG"


def test_escaping_round_trips_and_templates_fill_in_one_pass():
    texts = [*HOSTILE, "", "'", "'a", "-0.5", "+3", "1e-5", "-inf", "'-1", "=", "a=b", "\r\n"]
    for text in texts:
        cell = csv_cell(text)
        assert csv_value(cell) == text and _inert(cell)
    assert html_cell("=x") == "&#61;x" and html.unescape(html_cell("=x")) == "=x"
    assert fill("{{A}}-{{B}}", {"A": "{{B}}", "B": "b"}) == "{{B}}-b"
    with pytest.raises(KeyError):
        fill("{{A}}", {})


def test_file_names_from_data_are_a_safe_alphabet(tmp_path, cli):
    for bad in ("../evil", "a/b", ".hidden", "-opt", "x" * 200, "a b", "..", "é"):
        with pytest.raises(CmrkitError):
            safe_name(bad, "split name")
    record = {
        "mention_id": "m1",
        "cluster": "c1",
        "doc_id": "d1",
        "context": "Alice met Bob.",
        "start": 0,
        "end": 5,
        "split": "../../escaped",
    }
    lines = [dict(record), {**record, "mention_id": "m2", "doc_id": "d2", "context": "Alice ran."}]
    src = tmp_path / "m.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    r = cli("build-collection", "--source", "jsonl", "-i", src, "--name", "x")
    assert r.exit_code == 2 and "cannot be part of a file name" in r.output, r.output
    assert not list(tmp_path.rglob("*escaped*"))
    r = cli("build-collection", "--name", "../up")
    assert r.exit_code == 2 and not (tmp_path / "up").exists()
