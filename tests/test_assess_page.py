"""The offline assessment page in a real headless Chromium: answer, resume, export, aggregate."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

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
    assert (
        cli("pool", "create", run, "--collection", coll, "-o", tmp_path / "p.jsonl").exit_code == 0
    )
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

    key = {
        r["pair_id"]: (r["query_id"], r["doc_id"])
        for r in csv.DictReader(
            (tmp_path / "assess.key.tsv").read_text().splitlines(), delimiter="\t"
        )
    }
    browser.get((tmp_path / "assess.html").as_uri())
    by_id = browser.find_element
    text = lambda id_: by_id(By.ID, id_).text  # noqa: E731
    assert text("counter") == "Pair 1 of 5"
    order = [text("ids")]  # blind: the page names pairs by their pair ids only
    assert order[0] in key
    marks = by_id(By.ID, "query").find_elements(By.CSS_SELECTOR, "mark.q")
    assert [m.text for m in marks] == [key[order[0]][0]]  # the query mention is highlighted

    worker = by_id(By.ID, "worker")
    worker.send_keys("ann5")  # a digit typed in the id field is not an answer
    assert text("progress-text") == "0 of 5 answered"
    body = by_id(By.TAG_NAME, "body")
    body.send_keys("5")  # pair 1 -> 5, moves on
    order.append(text("ids"))
    by_id(By.CSS_SELECTOR, '#scale button[data-label="2"]').click()  # pair 2 -> 2
    order.append(text("ids"))
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
    # the candidate of a sentence unit shows its neighbours; blind, its mention is not marked
    body.send_keys(*[Keys.ARROW_LEFT] * 5)
    for _ in range(5):
        if key[text("ids")][1] == units[1]["id"]:
            break
        body.send_keys(Keys.ARROW_RIGHT)
    assert text("first") == "Alice met Bob in Paris."
    assert text("next") == "Then Alice left <early>."
    assert text("candidate") == "They talked for hours."
    assert not by_id(By.ID, "candidate").find_elements(By.CSS_SELECTOR, "mark.c")

    by_id(By.ID, "export").click()
    exported = wait_for(lambda: [p for p in browser.downloads.glob("*.csv")])
    assert [p.name for p in exported] == ["judgments-ann5.csv"]
    content = wait_for(lambda: exported[0].read_text(encoding="utf-8"))
    assert by_id(By.ID, "csv").get_attribute("value") == content
    rows = list(csv.DictReader(content.splitlines()))
    assert [(r["pair_id"], r["worker_id"], r["label"]) for r in rows] == [
        (order[0], "ann5", "5"),
        (order[1], "ann5", "2"),
        (order[2], "ann5", "1"),
    ]

    r = cli(
        "judgments",
        "aggregate",
        exported[0],
        "--pool",
        tmp_path / "p.jsonl",
        "--key",
        tmp_path / "assess.key.tsv",
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
    assert qrels[key[order[0]]] == 1 and qrels[key[order[1]]] == 0 and qrels[key[order[2]]] == 0
    assert sorted(qrels.values()) == [-1, -1, 0, 0, 1]
    assert json.loads((tmp_path / "rep.json").read_text())["ignored_not_in_pool"] == 0


def test_real_passages_are_readable_and_the_answer_stays_in_view(tmp_path, cli, browser):
    """The ECB+ sample's passages are whole documents of space-separated tokens: on a 1280x800
    screen the page shows written text around the mention and the answer buttons in view."""
    import gzip

    from selenium.webdriver.common.by import By

    assert cli("build-collection").exit_code == 0
    topics = [json.loads(x) for x in (tmp_path / "collections/sample/topics.jsonl").open()]
    with gzip.open(tmp_path / "collections/sample/corpus.jsonl.gz", "rt") as f:
        corpus = [json.loads(x) for x in f]
    distractors = [u["id"] for u in corpus if u["kind"] == "distractor"][:4]
    qrels = {}
    for line in (tmp_path / "qrels/sample.test.txt").read_text().splitlines():
        qid, _, docno, _ = line.split()
        qrels.setdefault(qid, []).append(docno)
    longest = sorted((t for t in topics if t["split"] == "test"), key=lambda t: -len(t["context"]))[
        :2
    ]
    run = write_run(
        tmp_path / "r.trec",
        {
            t["qid"]: [(d, 10.0 - i) for i, d in enumerate(qrels[t["qid"]][:4] + distractors)]
            for t in longest
        },
    )
    assert cli("pool", "create", run, "--collection", "collections/sample", "-o", "p.jsonl")
    r = cli("pool", "export", "p.jsonl", "-f", "html", "-o", "page.html")
    assert r.exit_code == 0, r.output
    assert "titles hidden from assessors" in r.stdout  # ECB+ titles are file names

    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False},
    )
    try:
        browser.get((tmp_path / "page.html").as_uri())
        height = browser.execute_script("return window.innerHeight")
        assert height == 800
        rect = lambda el: browser.execute_script(  # noqa: E731
            "return arguments[0].getBoundingClientRect()", el
        )
        for n in range(8):  # every pair of the page
            shown = browser.find_element(By.CSS_SELECTOR, "#candidate .main")
            query = browser.find_element(By.CSS_SELECTOR, "#query .main")
            for el in (shown, query):
                # written text, not tokens: no space before punctuation, no PTB quotes
                assert el.text and not re.search(r" [,.;:!?)]|``|''", el.text), el.text
            assert rect(shown)["top"] < height and rect(query)["top"] < height
            assert browser.find_elements(By.CSS_SELECTOR, "#query mark.q")
            for b in browser.find_elements(By.CSS_SELECTOR, "#scale button"):
                r_ = rect(b)
                assert 0 <= r_["top"] and r_["bottom"] <= height, (n, r_)
            if n == 0:
                unfold = browser.find_element(By.CSS_SELECTOR, '.unfold[data-for="candidate"]')
                assert "more words" in unfold.text  # the rest of the document is folded
                shot = os.environ.get("CMRKIT_SCREENSHOT_DIR")
                if shot:
                    browser.save_screenshot(str(Path(shot) / "assess-1280x800.png"))
                unfold.click()
                assert "open" in browser.find_element(By.ID, "candidate").get_attribute("class")
                for b in browser.find_elements(By.CSS_SELECTOR, "#scale button"):
                    assert rect(b)["bottom"] <= height  # unfolded, the answer is still in view
                if shot:
                    browser.save_screenshot(str(Path(shot) / "assess-unfolded.png"))
            browser.find_element(By.ID, "next-pair").click()
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
