"""`cmrkit pool create|export|bias`: pooling arithmetic, sampling, tasks and HITs, reusability."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
from pool_fixtures import (
    sentence_units,
    write_collection,
    write_qrels,
    write_run,
)

from cmrkit.errors import CmrkitError
from cmrkit.pooling import parse_sample_spec, pool_report, read_pool


def pairs_of(pool_path: Path) -> dict[tuple[str, str], dict]:
    lines = Path(pool_path).read_text().splitlines()
    return {(r["qid"], r["docno"]): r for r in map(json.loads, lines[1:])}


def key_of(path: Path) -> dict[str, dict]:
    """The answer key `pool export` wrote, by pair id."""
    rows = list(csv.DictReader(path.read_text().splitlines(), delimiter="\t"))
    return {r["pair_id"]: r for r in rows}


def unblinded(tasks_path: Path, key_path: Path) -> dict[str, dict]:
    """JSONL tasks by doc id, read through the key."""
    key = key_of(key_path)
    tasks = map(json.loads, tasks_path.read_text().splitlines())
    return {key[t["pair_id"]]["doc_id"]: t for t in tasks}


@pytest.fixture
def hand(tmp_path):
    """Two hand-made runs over a tiny collection; the pools below are worked out by hand."""
    docs = [f"d{i}" for i in range(1, 9)]
    coll = write_collection(tmp_path / "collections", ["q1", "q2"], docs)
    a = write_run(
        tmp_path / "A.trec",
        {
            "q1": [("d1", 3.0), ("d2", 2.0), ("d3", 1.0), ("d4", 0.5)],
            # a three-way tie: trec_eval order is docno descending -> d8, d7, d6
            "q2": [("d6", 1.0), ("d7", 1.0), ("d8", 1.0), ("U:q2", 0.9)],
        },
    )
    b = write_run(
        tmp_path / "B.trec",
        {
            # the query's own unit is never a candidate
            "q1": [("U:q1", 9.0), ("d3", 5.0), ("d5", 4.0), ("d1", 3.0), ("d6", 1.0)],
            "q2": [("d6", 2.0), ("d1", 1.5), ("d2", 0.1)],
        },
    )
    return tmp_path, coll, a, b


def test_pool_union_ranks_ties_and_own_unit(hand, cli):
    tmp, coll, a, b = hand
    r = cli("pool", "create", a, b, "--collection", coll, "--depth", "3", "-o", tmp / "p.jsonl")
    assert r.exit_code == 0, r.output
    got = {k: v["ranks"] for k, v in pairs_of(tmp / "p.jsonl").items()}
    assert got == {
        ("q1", "d1"): {"A": 1, "B": 3},
        ("q1", "d2"): {"A": 2},
        ("q1", "d3"): {"A": 3, "B": 1},
        ("q1", "d5"): {"B": 2},
        ("q2", "d8"): {"A": 1},
        ("q2", "d7"): {"A": 2},
        ("q2", "d6"): {"A": 3, "B": 1},
        ("q2", "d1"): {"B": 2},
        ("q2", "d2"): {"B": 3},
    }
    pool = read_pool(tmp / "p.jsonl")
    assert pool.header["collection"]["name"] == "tiny"
    rep = pool_report(pool)
    assert rep["per_query"] == {"mean": 4.5, "min": 4, "max": 5}
    assert rep["runs"] == {
        "A": {"contributed": 6, "unique": 3},
        "B": {"contributed": 6, "unique": 3},
    }
    assert rep["overlap"]["A|B"] == {"shared": 3, "jaccard": 3 / 9}
    assert "candidates per query" in r.stdout


def test_pool_excludes_judged_pairs_and_restricts_topics(hand, cli):
    tmp, coll, a, b = hand
    known = write_qrels(tmp / "known.txt", {"q1": {"d2": 1, "d5": 0}})
    topics = tmp / "only-q1.tsv"
    topics.write_text("q1\tmention\n")
    r = cli(
        "pool",
        "create",
        a,
        b,
        "--collection",
        coll,
        "--depth",
        "3",
        "--qrels",
        known,
        "--topics",
        topics,
        "-o",
        tmp / "p.jsonl",
    )
    assert r.exit_code == 0, r.output
    assert set(pairs_of(tmp / "p.jsonl")) == {("q1", "d1"), ("q1", "d3")}
    assert read_pool(tmp / "p.jsonl").header["excluded_pairs"] == 2


def test_sample_is_stratified_seeded_and_keeps_the_rest_pooled(tmp_path, cli):
    docs = [f"d{i:02d}" for i in range(40)]
    coll = write_collection(tmp_path / "collections", ["q1", "q2"], docs)
    run = write_run(
        tmp_path / "r.trec", {q: [(d, 100.0 - i) for i, d in enumerate(docs)] for q in ("q1", "q2")}
    )
    spec = "1-10:1.0,11-30:0.5"
    for seed in ("1", "2"):
        r = cli(
            "pool",
            "create",
            run,
            "--collection",
            coll,
            "--sample",
            spec,
            "--seed",
            seed,
            "-o",
            tmp_path / f"s{seed}.jsonl",
        )
        assert r.exit_code == 0, r.output
    p1, p2 = pairs_of(tmp_path / "s1.jsonl"), pairs_of(tmp_path / "s2.jsonl")
    assert len(p1) == 60  # everything down to depth 30 stays in the pool
    for q in ("q1", "q2"):
        top = [v for (qid, _), v in p1.items() if qid == q and v["best_rank"] <= 10]
        rest = [v for (qid, _), v in p1.items() if qid == q and v["best_rank"] > 10]
        assert all(v["sampled"] for v in top) and len(top) == 10
        assert sum(v["sampled"] for v in rest) == 10 and len(rest) == 20
    assert {k for k, v in p1.items() if v["sampled"]} != {k for k, v in p2.items() if v["sampled"]}
    cli(
        "pool",
        "create",
        run,
        "--collection",
        coll,
        "--sample",
        spec,
        "--seed",
        "1",
        "-o",
        tmp_path / "again.jsonl",
    )
    assert (tmp_path / "again.jsonl").read_bytes() == (tmp_path / "s1.jsonl").read_bytes()


@pytest.mark.parametrize("spec", ["1-10", "10-1:1", "1-10:1.5", "1-10:1,5-20:0.5"])
def test_bad_sample_spec(spec):
    with pytest.raises(CmrkitError, match="--sample"):
        parse_sample_spec(spec)


def test_run_from_another_collection_and_existing_output(hand, cli):
    tmp, coll, a, _ = hand
    stranger = write_run(tmp / "S.trec", {"zz": [("d1", 1.0)]})
    r = cli("pool", "create", stranger, "--collection", coll, "-o", tmp / "p.jsonl")
    assert r.exit_code == 2
    assert "query zz is not a topic of collection 'tiny'" in r.stderr
    assert "S.trec" in r.stderr and not (tmp / "p.jsonl").exists()
    assert cli("pool", "create", a, "--collection", coll, "-o", tmp / "p.jsonl").exit_code == 0
    before = (tmp / "p.jsonl").read_bytes()
    r = cli("pool", "create", a, "--collection", coll, "-o", tmp / "p.jsonl")
    assert r.exit_code == 0 and "p.jsonl is up to date" in r.stdout
    r = cli("pool", "create", a, "--collection", coll, "--depth", "2", "-o", tmp / "p.jsonl")
    assert r.exit_code == 2 and "other content" in r.stderr and "--force" in r.stderr
    assert (tmp / "p.jsonl").read_bytes() == before
    assert not list(tmp.glob(".cmrkit-tmp-*"))
    r = cli(
        "pool", "create", a, "--collection", coll, "--depth", "2", "--force", "-o", tmp / "p.jsonl"
    )
    assert r.exit_code == 0 and (tmp / "p.jsonl").read_bytes() != before


def test_collection_is_inferred_from_runs_folder(hand, cli):
    tmp, coll, a, _ = hand
    (tmp / "runs" / "tiny").mkdir(parents=True)
    moved = tmp / "runs" / "tiny" / "A.trec"
    moved.write_text(a.read_text())
    assert cli("pool", "create", moved, "-o", tmp / "p.jsonl").exit_code == 0
    assert read_pool(tmp / "p.jsonl").header["collection"]["path"] == str(coll)


# --- export ----------------------------------------------------------------------------------


@pytest.fixture
def big(tmp_path, cli):
    """A pool of 23 pairs (q1: 13, q2: 10) and gold answers outside it."""
    docs = [f"d{i:02d}" for i in range(20)]
    coll = write_collection(tmp_path / "collections", ["q1", "q2"], docs)
    run = write_run(
        tmp_path / "r.trec",
        {
            "q1": [(d, 50.0 - i) for i, d in enumerate(docs[:13])],
            "q2": [(d, 50.0 - i) for i, d in enumerate(docs[5:15])],
        },
    )
    assert (
        cli("pool", "create", run, "--collection", coll, "-o", tmp_path / "p.jsonl").exit_code == 0
    )
    gold = write_qrels(tmp_path / "gold.txt", {"q1": {"d19": 1, "d18": 0}, "q2": {"d17": 1}})
    return tmp_path, coll, gold


def test_hits_group_pairs_and_insert_gold(big, cli):
    tmp, _, gold = big
    r = cli(
        "pool",
        "export",
        tmp / "p.jsonl",
        "--format",
        "jsonl",
        "--per-hit",
        "10",
        "--gold",
        gold,
        "--gold-per-hit",
        "1",
        "--seed",
        "7",
        "-o",
        tmp / "t.jsonl",
    )
    assert r.exit_code == 0, r.output
    assert "23 pool pairs + 3 gold pairs in 3 HITs" in r.stdout
    tasks = [json.loads(x) for x in (tmp / "t.jsonl").read_text().splitlines()]
    key = key_of(tmp / "t.key.tsv")  # written beside the tasks
    assert [r["pair_id"] for r in key.values()] == list(key)
    hits: dict[str, list] = {}
    for t in tasks:
        assert set(t) == {"hit_id", "position", "pair_id", "query", "candidate"}
        k = key[t["pair_id"]]
        assert (k["hit_id"], int(k["position"])) in {
            (u["hit_id"], u["position"]) for u in tasks if u["pair_id"] == t["pair_id"]
        }
        t.update(query_id=k["query_id"], doc_id=k["doc_id"], gold=k["gold"] or None)
        hits.setdefault(t["hit_id"], []).append(t)
    assert sorted(len(h) for h in hits.values()) == [4, 11, 11]
    gold_answers = {("q1", "d19"): "1", ("q1", "d18"): "0", ("q2", "d17"): "1"}
    for h in hits.values():
        assert sorted(t["position"] for t in h) == list(range(1, len(h) + 1))
        golds = [t for t in h if t["gold"] is not None]
        assert len(golds) == 1
        g = golds[0]
        assert gold_answers[(g["query_id"], g["doc_id"])] == g["gold"]
    pooled = [(t["query_id"], t["doc_id"]) for t in tasks if t["gold"] is None]
    assert len(pooled) == len(set(pooled)) == 23
    assert set(pooled) == set(pairs_of(tmp / "p.jsonl"))
    # pair ids are opaque: nothing of the query or the candidate in them
    for pid, k in key.items():
        assert re.fullmatch(r"x[0-9a-f]{10}", pid) and k["doc_id"] not in pid

    again = cli(
        "pool",
        "export",
        tmp / "p.jsonl",
        "-f",
        "jsonl",
        "--gold",
        gold,
        "--gold-per-hit",
        "1",
        "--seed",
        "7",
        "-o",
        tmp / "t2.jsonl",
    )
    assert again.exit_code == 0
    assert (tmp / "t2.jsonl").read_bytes() == (tmp / "t.jsonl").read_bytes()
    cli(
        "pool",
        "export",
        tmp / "p.jsonl",
        "-f",
        "jsonl",
        "--gold",
        gold,
        "--gold-per-hit",
        "1",
        "--seed",
        "8",
        "-o",
        tmp / "t3.jsonl",
    )
    assert (tmp / "t3.jsonl").read_bytes() != (tmp / "t.jsonl").read_bytes()


def test_gold_per_hit_needs_gold(big, cli):
    tmp, _, _ = big
    r = cli(
        "pool",
        "export",
        tmp / "p.jsonl",
        "-f",
        "jsonl",
        "--gold-per-hit",
        "1",
        "-o",
        tmp / "t.jsonl",
    )
    assert r.exit_code == 2 and "--gold" in r.stderr and not (tmp / "t.jsonl").exists()


def test_mturk_batch_and_layout(big, cli):
    tmp, _, gold = big
    r = cli(
        "pool",
        "export",
        tmp / "p.jsonl",
        "-f",
        "mturk",
        "--per-hit",
        "10",
        "--gold",
        gold,
        "--gold-per-hit",
        "1",
        "-o",
        tmp / "mturk",
    )
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(open(tmp / "mturk" / "batch-input.csv", encoding="utf-8")))
    assert len(rows) == 3 and sorted(int(x["n_pairs"]) for x in rows) == [4, 11, 11]
    short = next(x for x in rows if x["n_pairs"] == "4")
    assert short["p4_pair_id"] and short["p5_pair_id"] == "" and short["p11_candidate"] == ""
    # HTML fragments are escaped text with the query mention marked
    q = rows[0]["p1_query"]
    assert '<mark class="q">' in q and "&lt;b&gt;sits&lt;/b&gt;" in q
    # known answers and real ids never reach the workers; the key beside the folder maps back
    assert "gold" not in ",".join(rows[0]) and "query_id" not in ",".join(rows[0])
    key = key_of(tmp / "mturk.key.tsv")
    shown = {row[f"p{i}_pair_id"] for row in rows for i in range(1, 12) if row[f"p{i}_pair_id"]}
    assert shown == set(key)
    ids = {k["doc_id"] for k in key.values()} | {k["query_id"] for k in key.values()}
    assert not any(v in ids for row in rows for v in row.values())
    layout = (tmp / "mturk" / "hit-layout.html").read_text()
    for i in range(1, 12):
        assert f'name="p{i}_label"' in layout and f"${{p{i}_candidate}}" in layout
    assert "p12_label" not in layout
    columns = set(rows[0])
    for var in set(re.findall(r"\$\{(\w+)\}", layout)):
        assert var in columns, var


def test_sentence_context_and_highlights(tmp_path, cli):
    # the middle sentence "They talked for hours." has a known mention: "talked" (5-11)
    units = sentence_units("doc7-p0", "doc7", mention=(5, 11))
    coll = write_collection(tmp_path / "collections", ["q1"], ["d1"], extra_units=units)
    middle, last = units[1]["id"], units[2]["id"]
    run = write_run(tmp_path / "r.trec", {"q1": [(middle, 2.0), (last, 1.0), ("d1", 0.5)]})
    assert (
        cli("pool", "create", run, "--collection", coll, "-o", tmp_path / "p.jsonl").exit_code == 0
    )
    r = cli(
        "pool",
        "export",
        tmp_path / "p.jsonl",
        "-f",
        "jsonl",
        "--no-blind",
        "-o",
        tmp_path / "t.jsonl",
    )
    assert r.exit_code == 0, r.output
    tasks = unblinded(tmp_path / "t.jsonl", tmp_path / "t.key.tsv")
    assert tasks[middle]["doc_id"] == middle  # not blind: the real ids are in the tasks
    mid = tasks[middle]["candidate"]
    assert mid["first_sentence"] == "Alice met Bob in Paris."
    assert mid["next_sentence"] == "Then Alice left <early>."
    assert mid["unit"]["spans"] == [[5, 11]] and mid["title"] == "Doc7"
    end = tasks[last]["candidate"]
    assert end["first_sentence"] == "Alice met Bob in Paris." and end["next_sentence"] is None
    assert tasks["d1"]["candidate"]["first_sentence"] is None
    q = tasks["d1"]["query"]
    assert q["text"][q["spans"][0][0] : q["spans"][0][1]] == "q1"


def test_export_refuses_pool_of_another_collection(big, cli):
    tmp, _, _ = big
    other = write_collection(tmp / "elsewhere", ["q1", "q2"], ["x1"], name="tiny")
    r = cli(
        "pool", "export", tmp / "p.jsonl", "-f", "html", "--collection", other, "-o", tmp / "a.html"
    )
    assert r.exit_code == 2
    assert "p.jsonl" in r.stderr and "different corpus" in r.stderr
    assert not (tmp / "a.html").exists()
    bad = tmp / "bad.jsonl"
    bad.write_text('{"qid": "q1"}\n')
    r = cli("pool", "export", bad, "-f", "html", "-o", tmp / "a.html")
    assert r.exit_code == 2 and "not a cmrkit pool file" in r.stderr


def test_html_page_is_self_contained(big, cli):
    tmp, _, gold = big
    r = cli(
        "pool",
        "export",
        tmp / "p.jsonl",
        "-f",
        "html",
        "--gold",
        gold,
        "--gold-per-hit",
        "1",
        "-o",
        tmp / "a.html",
    )
    assert r.exit_code == 0, r.output
    page = (tmp / "a.html").read_text()
    assert "<script src" not in page and "<link" not in page
    start = page.index('id="tasks">') + len('id="tasks">')
    data = json.loads(page[start : page.index("</script>", start)])
    assert len(data["tasks"]) == 26
    assert all("gold" not in t for t in data["tasks"])
    assert "<b>" not in page[start : page.index("</script>", start)]


# --- bias ------------------------------------------------------------------------------------


def test_leave_one_run_out(hand, cli):
    tmp, coll, a, b = hand
    assert (
        cli(
            "pool", "create", a, b, "--collection", coll, "--depth", "3", "-o", tmp / "p.jsonl"
        ).exit_code
        == 0
    )
    # q1: d1 found by both, d5 only by B; q2: d6 by both
    qrels = write_qrels(
        tmp / "q.txt",
        {
            "q1": {"d1": 1, "d2": 0, "d3": 0, "d5": 1},
            "q2": {"d6": 1, "d7": 0, "d8": 0, "d1": 0, "d2": 0},
        },
    )
    r = cli(
        "pool",
        "bias",
        tmp / "p.jsonl",
        a,
        b,
        "--qrels",
        qrels,
        "--measure",
        "map",
        "--json",
        tmp / "bias.json",
    )
    assert r.exit_code == 0, r.output
    rows = {x["run"]: x for x in json.loads((tmp / "bias.json").read_text())}
    # AP by hand. B on q1 ranks U:q1 d3 d5 d1 (U:q1 unjudged): AP = (1/3 + 2/4) / 2;
    # without d5 (only B pooled it): R = 1, d1 at rank 4 -> 1/4. q2: d6 first -> 1.
    assert rows["B"]["unique_relevant"] == 1
    assert rows["B"]["score"] == pytest.approx(((1 / 3 + 2 / 4) / 2 + 1) / 2)
    assert rows["B"]["score_without"] == pytest.approx((1 / 4 + 1) / 2)
    # A ranks d1 first on q1 (AP 1/2 with R = 2) and d6 third on q2; A pooled no relevant alone
    assert rows["A"]["unique_relevant"] == 0
    assert rows["A"]["delta"] == 0
    assert rows["A"]["score"] == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert rows["B"]["rank"] == 1


def test_bias_refuses_a_run_that_was_not_pooled(hand, cli):
    tmp, coll, a, b = hand
    cli("pool", "create", a, "--collection", coll, "-o", tmp / "p.jsonl")
    qrels = write_qrels(tmp / "q.txt", {"q1": {"d1": 1}})
    r = cli("pool", "bias", tmp / "p.jsonl", b, "--qrels", qrels)
    assert r.exit_code == 2 and "B.trec" in r.stderr and "not one of the pooled runs" in r.stderr


def test_blind_by_default_hides_annotations_titles_and_ids(tmp_path, cli):
    units = sentence_units("doc7-p0", "doc7", mention=(5, 11))
    for u in units:
        u["title"] = "37_14ecbplus.xml"  # ECB+ titles are file names that name the topic
    coll = write_collection(tmp_path / "collections", ["q1"], ["d1"], extra_units=units)
    middle = units[1]["id"]
    run = write_run(tmp_path / "r.trec", {"q1": [(middle, 2.0), ("d1", 0.5)]})
    assert (
        cli("pool", "create", run, "--collection", coll, "-o", tmp_path / "p.jsonl").exit_code == 0
    )
    for fmt, out in (("jsonl", "t.jsonl"), ("html", "t.html"), ("mturk", "mt")):
        r = cli("pool", "export", tmp_path / "p.jsonl", "-f", fmt, "-o", tmp_path / out)
        assert r.exit_code == 0, r.output
        assert "titles hidden from assessors: 1 of 2 candidates have no title" in r.stdout
        given = [tmp_path / out] if fmt != "mturk" else sorted((tmp_path / out).iterdir())
        handed_out = "".join(p.read_text() for p in given)  # the key stays with us
        assert (tmp_path / (out.split(".")[0] + ".key.tsv")).is_file()
        for secret in (middle, "P:", "D:", "ecbplus", "doc7", "marked"):
            assert secret not in handed_out, (fmt, secret)
    tasks = unblinded(tmp_path / "t.jsonl", tmp_path / "t.key.tsv")
    assert tasks[middle]["candidate"]["unit"]["spans"] == []
    assert tasks[middle]["candidate"]["title"] is None
    q = tasks[middle]["query"]  # the query mention stays marked
    assert q["text"][q["spans"][0][0] : q["spans"][0][1]] == "q1"
    page = (tmp_path / "t.html").read_text()
    assert 'class="c"' not in page.split('id="tasks">')[1]
    # not blind: annotated mentions marked, titles and real ids shown
    r = cli(
        "pool",
        "export",
        tmp_path / "p.jsonl",
        "-f",
        "html",
        "--no-blind",
        "-o",
        tmp_path / "n.html",
    )
    assert r.exit_code == 0
    page = (tmp_path / "n.html").read_text()
    assert '<mark class=\\"c\\">talked' in page.replace("\\u003c", "<") and middle in page
    assert "37_14ecbplus.xml" in page and "Candidate mentions, where known" in page
