"""The collection folder's one owner (cmrkit.collection.layout): bare names, the paths of its
files, the topics readers and where a split's qrels are found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pool_fixtures import write_collection, write_qrels

from cmrkit.collection.layout import (
    CORPUS,
    bare_name,
    collection_dir,
    corpus_path,
    index_path,
    iter_corpus,
    manifest_path,
    qrels_file,
    qrels_path,
    read_manifest,
    read_topics,
    resolve_split,
    topic_records,
    topics_by_qid,
    topics_path,
    topics_tsv_path,
)
from cmrkit.errors import CmrkitError


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_collection(tmp_path / "collections", ["q1", "q2"], ["d1", "d2"])
    return tmp_path


def test_a_bare_name_is_a_folder_under_collections(work):
    assert bare_name("tiny") == Path("collections/tiny")
    assert collection_dir("tiny") == Path("collections/tiny")
    assert collection_dir(work / "collections" / "tiny") == work / "collections" / "tiny"
    assert collection_dir("tiny", work / "collections") == work / "collections" / "tiny"
    (work / "tiny").mkdir()  # a folder of that name here wins, and is not a collection
    with pytest.raises(CmrkitError, match=f"no {CORPUS} in this folder"):
        collection_dir("tiny")
    with pytest.raises(CmrkitError, match="collections/nowhere: no such collection folder"):
        collection_dir("nowhere")


def test_the_layout_names_every_file_of_the_folder(work):
    coll = collection_dir("tiny")
    assert corpus_path(coll).is_file() and topics_path(coll).is_file()
    assert corpus_path("x") == Path("x/corpus.jsonl.gz") and topics_path("x").name == "topics.jsonl"
    assert topics_tsv_path("x", "dev") == Path("x/topics.dev.tsv")
    assert manifest_path("x") == Path("x/manifest.json") and index_path("x") == Path("x/index")
    assert [t.qid for t in read_topics(coll, "test")] == ["q1", "q2"]
    assert resolve_split(coll, None) == "test"
    assert [n for n, _ in iter_corpus(coll)] == [1, 2, 3, 4]
    assert read_manifest(coll) == {}  # the fixture writes none
    assert qrels_path(coll, "test") == Path("qrels/tiny.test.txt")
    assert qrels_file(coll, "test") is None


def test_a_topic_carries_its_cluster(work):
    """train reader took each query's cluster from topics.jsonl itself; Topic carries it (as
    text, whatever type the record gives)."""
    coll = collection_dir("tiny")
    records = topic_records(coll)
    records[0]["cluster"] = 7
    records[1].pop("cluster", None)
    topics_path(coll).write_text("".join(json.dumps(r) + "\n" for r in records))
    assert [t.cluster for t in read_topics(coll)] == ["7", None]


def test_topics_read_alike_everywhere(work):
    coll = Path("collections/tiny")
    records = topic_records(coll)
    assert [r["qid"] for r in records] == [t.qid for t in read_topics(coll)]
    assert topics_by_qid(coll)["q2"]["unit"] == "U:q2"
    with pytest.raises(CmrkitError, match="no topics in split 'dev'"):
        read_topics(coll, "dev")
    with (coll / "topics.jsonl").open("a", encoding="utf-8") as f:
        f.write("\n" + json.dumps({"qid": 3, "split": "test"}) + "\n")
    for read in (topic_records, topics_by_qid, read_topics):
        with pytest.raises(CmrkitError, match="line 4: field 'qid' missing or not a string"):
            read(coll)


def test_qrels_are_found_where_the_manifest_says_else_in_qrels(work):
    coll = Path("collections/tiny")
    assert resolve_split(coll, "dev") == "dev"
    (work / "qrels").mkdir()
    write_qrels(qrels_path(coll, "test"), {"q1": {"d1": 1}})
    assert qrels_file(coll, "test") == Path("qrels/tiny.test.txt")
    elsewhere = write_qrels(work / "mine.txt", {"q1": {"d2": 1}})
    (coll / "manifest.json").write_text(json.dumps({"files": {"qrels": {"test": str(elsewhere)}}}))
    assert qrels_file(coll, "test") == elsewhere
    assert qrels_file(coll, "test", work / "nowhere") is None
