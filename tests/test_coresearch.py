"""--source coresearch: CoreSearch's own passages, queries and positives, and its folder layout."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import wec_record, write_json

from cmrkit.trec import read_qrels

DEV_CLUSTERS = [
    {"clusterId": 5, "clusterTitle": "2004 Summer Olympics", "mentionIds": ["p1", "p2", "p3"]},
    {"clusterId": 7, "clusterTitle": "Haiti earthquake", "mentionIds": ["h1", "h2", "h3"]},
    {"clusterId": 6, "clusterTitle": "Lone", "mentionIds": ["p4"]},
]
SHARED = "The Athens Games opened in 2004 and the Games closed two weeks later .".split()


def _passage(pid, chain, ctx, s, e):
    return {
        "id": pid,
        "goldChain": chain,
        "mention": ctx[s : e + 1],
        "startIndex": s,
        "endIndex": e,
        "context": ctx,
    }


def _distractor(pid, text):
    ctx = text.split()
    return {"id": pid, "goldChain": -1, "mention": [], "startIndex": -1, "endIndex": -1,
            "context": ctx}  # fmt: skip


DEV_PASSAGES = [
    # p1 and p2: two mentions of one cluster in one paragraph, two passage ids
    _passage("p1", 5, SHARED, 1, 2),
    _passage("p2", 5, SHARED, 8, 9),
    _passage("p3", 5, "She competed at the Olympics .".split(), 4, 4),
    _passage("h1", 7, "The quake struck Haiti in January .".split(), 1, 1),
    _passage("h2", 7, "Aid arrived after the earthquake .".split(), 4, 4),
    _passage("h3", 7, "The earthquake killed thousands .".split(), 1, 1),
    _passage("p4", 6, "A lone event .".split(), 2, 2),
    _distractor("x1", "An unrelated paragraph about rivers ."),
    _distractor("x2", "An unrelated paragraph about rivers ."),  # duplicate text
    _distractor("x3", "Mountains rise above the valley ."),
]


def _queries(ids):
    by_id = {p["id"]: p for p in DEV_PASSAGES}
    return [dict(by_id[i], positive_examples=[], negative_examples=[], bm25_query="") for i in ids]


def write_dataset(root: Path, queries=("p1", "p2", "p3", "h1", "h2", "h3")) -> Path:
    """The published folder layout: clean/ and train/, Dev split only (plus a dpr/ file)."""
    for sub in ("clean", "train", "dpr"):
        (root / sub).mkdir(parents=True)
    write_json(root / "clean" / "Dev_gold_clusters.json", DEV_CLUSTERS)
    write_json(root / "clean" / "Dev_all_passages.json", DEV_PASSAGES)
    if queries is not None:
        write_json(root / "train" / "Dev_queries.json", _queries(queries))
    write_json(root / "dpr" / "Dev.json", [])
    return root


def corpus(root: Path, name: str) -> list[dict]:
    with gzip.open(root / "collections" / name / "corpus.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def topics(root: Path, name: str) -> list[dict]:
    path = root / "collections" / name / "topics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def coresearch_positives() -> dict[str, set[str]]:
    """CoreSearch's own rule: a query's positives are the other passages of its cluster."""
    return {
        mid: {f"P:{o}" for o in c["mentionIds"] if o != mid}
        for c in DEV_CLUSTERS
        for mid in c["mentionIds"]
        if len(c["mentionIds"]) > 1
    }


def test_exact_queries_positives_and_passages(cli, tmp_path):
    ds = write_dataset(tmp_path / "CoreSearch")
    r = cli("build-collection", "--source", "coresearch", "-i", ds)
    assert r.exit_code == 0, r.output
    name = "coresearch-dev"
    # queries: exactly the queries file's ids, in its order
    ts = topics(tmp_path, name)
    assert [t["qid"] for t in ts] == ["p1", "p2", "p3", "h1", "h2", "h3"]
    assert {t["unit"] for t in ts} == {f"P:{t['qid']}" for t in ts}
    # positives: CoreSearch's, including the pair sharing a paragraph (p1 <-> p2)
    qrels = read_qrels(tmp_path / "qrels" / f"{name}.dev.txt")
    assert {q: set(d) for q, d in qrels.items()} == coresearch_positives()
    assert sum(len(d) for d in qrels.values()) == 12
    # passages: one per CoreSearch passage id; the one duplicated distractor text is dropped
    units = {u["id"]: u for u in corpus(tmp_path, name)}
    annotated = {u for u, d in units.items() if d["kind"] == "annotated"}
    assert annotated == {f"P:{p['id']}" for p in DEV_PASSAGES if p["goldChain"] != -1}
    assert {u for u, d in units.items() if d["kind"] == "distractor"} == {"D:x1", "D:x3"}
    for p in DEV_PASSAGES:
        if p["goldChain"] == -1:
            continue
        u = units[f"P:{p['id']}"]
        assert u["contents"] == " ".join(p["context"])
        (m,) = u["mentions"]  # each unit marks its own mention only
        assert u["contents"][m["start"] : m["end"]] == " ".join(p["mention"])
    assert units["P:p1"]["contents"] == units["P:p2"]["contents"]
    manifest = json.loads((tmp_path / "collections" / name / "manifest.json").read_text())
    assert manifest["parameters"]["unit"] == "mention"
    assert manifest["dropped"]["distractor_duplicates"] == 1
    roles = sorted((Path(i["path"]).name, i["role"]) for i in manifest["inputs"])
    assert roles == [
        ("Dev_all_passages.json", "annotated"),
        ("Dev_gold_clusters.json", "annotated"),
        ("Dev_queries.json", "queries"),
    ]
    assert "distractor duplicates: 1" in r.stdout


def test_passage_units_still_merge_identical_paragraphs(cli, tmp_path):
    """--unit passage keeps the older rule: one unit per distinct paragraph text."""
    ds = write_dataset(tmp_path / "cs")
    r = cli("build-collection", "--source", "coresearch", "-i", ds, "--unit", "passage", "-n", "m")
    assert r.exit_code == 0, r.output
    qrels = read_qrels(tmp_path / "qrels" / "m.dev.txt")
    # p1 and p2 share the unit P:p1: neither is the other's positive, and p3 sees one unit
    assert sum(len(d) for d in qrels.values()) == 12 - 3
    assert set(qrels["p1"]) == set(qrels["p2"]) == {"P:p3"}
    assert set(qrels["p3"]) == {"P:p1"}


@pytest.mark.parametrize(
    "pick",
    [
        lambda ds: ds / "clean",
        lambda ds: ds / "train",
        lambda ds: ds / "clean" / "Dev_gold_clusters.json",
        lambda ds: ds / "clean" / "Dev_all_passages.json",
        lambda ds: ds / "train" / "Dev_queries.json",
        lambda ds: f"dev={ds}",
    ],
    ids=["clean", "train", "clusters", "passages", "queries", "split-folder"],
)
def test_any_file_or_folder_of_the_dataset(cli, tmp_path, pick):
    ds = write_dataset(tmp_path / "CoreSearch")
    r = cli("build-collection", "--source", "coresearch", "-i", pick(ds), "-n", "c")
    assert r.exit_code == 0, r.output
    assert len(topics(tmp_path, "c")) == 6
    assert sum(len(d) for d in read_qrels(tmp_path / "qrels" / "c.dev.txt").values()) == 12


def test_without_a_queries_file_every_annotated_passage_is_a_query(cli, tmp_path):
    ds = write_dataset(tmp_path / "cs", queries=None)
    r = cli("build-collection", "--source", "coresearch", "-i", ds / "clean", "-n", "c")
    assert r.exit_code == 0, r.output
    assert sorted(t["qid"] for t in topics(tmp_path, "c")) == ["h1", "h2", "h3", "p1", "p2", "p3"]


def test_a_queries_file_limits_the_queries(cli, tmp_path):
    ds = write_dataset(tmp_path / "cs", queries=("h2", "p3"))
    r = cli("build-collection", "--source", "coresearch", "-i", ds, "-n", "c")
    assert r.exit_code == 0, r.output
    assert [t["qid"] for t in topics(tmp_path, "c")] == ["p3", "h2"]
    qrels = read_qrels(tmp_path / "qrels" / "c.dev.txt")
    assert set(qrels["p3"]) == {"P:p1", "P:p2"}


@pytest.mark.parametrize(
    ("setup", "words"),
    [
        (
            lambda ds: (ds / "clean" / "Dev_all_passages.json").unlink() or ds / "clean",
            "has no all_passages file (",
        ),
        (
            lambda ds: (
                (ds / "clean" / "Dev_all_passages.json").unlink()
                or ds / "clean" / "Dev_gold_clusters.json"
            ),
            "give CoreSearch's clean/Dev_all_passages.json with --input",
        ),
        (lambda ds: ds / "dpr" / "Dev.json", "DPR/SQuAD format"),
        (lambda ds: ds / "empty", "no CoreSearch files here"),
    ],
    ids=["folder-missing-passages", "file-missing-passages", "dpr", "empty-folder"],
)
def test_says_which_file_to_give(cli, tmp_path, setup, words):
    ds = write_dataset(tmp_path / "cs")
    (ds / "empty").mkdir()
    r = cli("build-collection", "--source", "coresearch", "-i", setup(ds), "-n", "c")
    assert r.exit_code == 2
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1
    assert words in r.stderr
    assert not (tmp_path / "collections").exists()


def test_exact_message_names_the_missing_file(cli, tmp_path):
    ds = write_dataset(tmp_path / "cs")
    (ds / "clean" / "Dev_all_passages.json").unlink()
    r = cli("build-collection", "--source", "coresearch", "-i", ds / "train" / "Dev_queries.json")
    assert r.exit_code == 2
    assert f"({ds / 'clean' / 'Dev_all_passages.json'} not found)" in r.stderr


def test_query_differing_from_its_passage_is_refused(cli, tmp_path):
    ds = write_dataset(tmp_path / "cs")
    queries = _queries(["p1", "p2"])
    queries[1]["startIndex"] = 0
    queries[1]["mention"] = SHARED[0:10]
    queries[1]["endIndex"] = 9
    write_json(ds / "train" / "Dev_queries.json", queries)
    r = cli("build-collection", "--source", "coresearch", "-i", ds, "-n", "c")
    assert r.exit_code == 2
    assert "Dev_queries.json: record 1 (id p2): query p2 differs from its passage" in r.stderr


def test_mention_units_for_wec_eng_input(cli, tmp_path):
    """--unit mention: WEC-Eng mentions sharing a paragraph get one passage each."""
    tokens = "The storm hit Haiti and the storm killed many .".split()
    other = "Weather experts tracked the storm for days .".split()
    path = write_json(
        tmp_path / "Dev_x.json",
        [
            wec_record("m1", 3, "d1", tokens, [1]),
            wec_record("m2", 3, "d1", tokens, [6]),
            wec_record("m3", 3, "d2", other, [4]),
        ],
    )
    r = cli("build-collection", "-i", path, "--unit", "mention", "-n", "w")
    assert r.exit_code == 0, r.output
    qrels = read_qrels(tmp_path / "qrels" / "w.dev.txt")
    assert {q: set(d) for q, d in qrels.items()} == {
        "m1": {"P:m2", "P:m3"},
        "m2": {"P:m1", "P:m3"},
        "m3": {"P:m1", "P:m2"},
    }
    units = {u["id"]: u for u in corpus(tmp_path, "w")}
    assert sorted(units) == ["P:m1", "P:m2", "P:m3"]
    assert [m["mention_id"] for m in units["P:m2"]["mentions"]] == ["m2"]


def test_two_splits_one_with_a_queries_file(cli, tmp_path):
    ds = write_dataset(tmp_path / "cs", queries=("h2", "p3"))
    test_clusters = [{"clusterId": 8, "clusterTitle": "Flood", "mentionIds": ["f1", "f2"]}]
    test_passages = [
        _passage("f1", 8, "The flood came .".split(), 1, 1),
        _passage("f2", 8, "After the flood , rain .".split(), 2, 2),
        _distractor("y1", "Nothing happened here ."),
    ]
    write_json(ds / "clean" / "Test_gold_clusters.json", test_clusters)
    write_json(ds / "clean" / "Test_all_passages.json", test_passages)
    r = cli("build-collection", "--source", "coresearch", "-i", ds)
    assert r.exit_code == 0, r.output
    ts = topics(tmp_path, "coresearch")
    assert [(t["qid"], t["split"]) for t in ts] == [
        ("p3", "dev"), ("h2", "dev"), ("f1", "test"), ("f2", "test")
    ]  # fmt: skip
    assert "2 CoreSearch splits (dev, test) share one corpus" in " ".join(r.stderr.split())
