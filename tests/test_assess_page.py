"""The offline assessment page in a real headless Chromium: answer, resume, export, aggregate."""

from __future__ import annotations

import csv
import json

from browser import needs_chromium, wait_for
from pool_fixtures import read_qrels_lines, sentence_units, write_collection, write_run

pytestmark = needs_chromium


def test_answer_resume_export_and_aggregate(tmp_path, cli, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    units = sentence_units("doc7-p0", "doc7", mention=(5, 11))
    coll = write_collection(tmp_path / "collections", ["q1", "q2"], ["d1", "d2"], extra_units=units)
    run = write_run(
        tmp_path / "r.trec",
        {
            "q1": [(units[1]["id"], 3.0), ("d1", 2.0), ("d2", 1.0)],
            "q2": [("d1", 2.0), (units[2]["id"], 1.0)],
        },
    )
    assert cli("pool", "create", run, "-c", coll, "-o", tmp_path / "p.jsonl").exit_code == 0
    r = cli(
        "pool",
        "export",
        tmp_path / "p.jsonl",
        "-f",
        "html",
        "--seed",
        "1",
        "-o",
        tmp_path / "assess.html",
    )
    assert r.exit_code == 0, r.output

    browser.get((tmp_path / "assess.html").as_uri())
    by_id = browser.find_element
    text = lambda id_: by_id(By.ID, id_).text  # noqa: E731
    assert text("counter") == "Pair 1 of 5"
    order = [tuple(t.split(" / ")) for t in [text("ids")]]
    marks = by_id(By.ID, "query").find_elements(By.CSS_SELECTOR, "mark.q")
    assert [m.text for m in marks] == [order[0][0]]  # the query mention is highlighted

    worker = by_id(By.ID, "worker")
    worker.send_keys("ann5")  # a digit typed in the id field is not an answer
    assert text("progress-text") == "0 of 5 answered"
    body = by_id(By.TAG_NAME, "body")
    body.send_keys("5")  # pair 1 -> 5, moves on
    order.append(tuple(text("ids").split(" / ")))
    by_id(By.CSS_SELECTOR, '#scale button[data-label="2"]').click()  # pair 2 -> 2
    order.append(tuple(text("ids").split(" / ")))
    body.send_keys("4")  # pair 3 -> 4
    assert text("progress-text") == "3 of 5 answered" and text("counter") == "Pair 4 of 5"
    assert by_id(By.ID, "progress").get_attribute("value") == "3"

    browser.refresh()  # answers, assessor id and position survive a reload
    by_id = browser.find_element
    assert text("progress-text") == "3 of 5 answered" and text("counter") == "Pair 4 of 5"
    assert by_id(By.ID, "worker").get_attribute("value") == "ann5"
    body = by_id(By.TAG_NAME, "body")
    body.send_keys(Keys.ARROW_LEFT)  # back to pair 3 and change its answer
    assert text("counter") == "Pair 3 of 5"
    chosen = by_id(By.CSS_SELECTOR, "#scale button.chosen")
    assert chosen.get_attribute("data-label") == "4"
    body.send_keys("1")
    # the candidate of a sentence unit shows its neighbours and its marked mention
    body.send_keys(*[Keys.ARROW_LEFT] * 5)
    for _ in range(5):
        if text("ids").endswith(units[1]["id"]):
            break
        body.send_keys(Keys.ARROW_RIGHT)
    assert text("first") == "Alice met Bob in Paris."
    assert text("next") == "Then Alice left <early>."
    assert [m.text for m in by_id(By.ID, "candidate").find_elements(By.CSS_SELECTOR, "mark.c")] == [
        "talked"
    ]

    by_id(By.ID, "export").click()
    exported = wait_for(lambda: [p for p in browser.downloads.glob("*.csv")])
    assert [p.name for p in exported] == ["judgments-ann5.csv"]
    content = wait_for(lambda: exported[0].read_text(encoding="utf-8"))
    assert by_id(By.ID, "csv").get_attribute("value") == content
    rows = list(csv.DictReader(content.splitlines()))
    assert [(r["query_id"], r["doc_id"], r["worker_id"], r["label"]) for r in rows] == [
        (*order[0], "ann5", "5"),
        (*order[1], "ann5", "2"),
        (*order[2], "ann5", "1"),
    ]

    r = cli(
        "judgments",
        "aggregate",
        exported[0],
        "--pool",
        tmp_path / "p.jsonl",
        "--min-agree",
        "1",
        "--min-unanimous",
        "1",
        "--min-relevant",
        "0",
        "--hard-threshold",
        "1",
        "--report",
        tmp_path / "rep.json",
        "-o",
        tmp_path / "q.txt",
    )
    assert r.exit_code == 0, r.output
    qrels = read_qrels_lines(tmp_path / "q.txt")
    assert qrels[order[0]] == 1 and qrels[order[1]] == 0 and qrels[order[2]] == 0
    assert sorted(qrels.values()) == [-1, -1, 0, 0, 1]
    assert json.loads((tmp_path / "rep.json").read_text())["ignored_not_in_pool"] == 0
