"""The collection folder's one owner (cmrkit.collection.layout): bare names, the Collection
record, the topics readers and where a split's qrels are found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pool_fixtures import write_collection, write_qrels

from cmrkit.collection.layout import (
    CORPUS,
    Collection,
    bare_name,
    collection_dir,
    qrels_file,
    qrels_path,
    read_topics,
    resolve_split,
    topic_records,
    topics_by_qid,
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


def test_the_collection_record_knows_its_files(work):
    col = Collection.open("tiny")
    assert col.name == "tiny" and col.corpus.is_file() and col.topics_file.is_file()
    assert [t.qid for t in col.topics("test")] == ["q1", "q2"]
    assert col.splits() == ["test"] and col.resolve_split(None) == "test"
    assert [n for n, _ in col.iter_corpus()] == [1, 2, 3, 4]
    assert col.manifest() == {}  # the fixture writes none
    assert col.qrels_path("test") == Path("qrels/tiny.test.txt")
    assert col.qrels_file("test") is None


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
