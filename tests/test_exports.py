"""A built collection read by BEIR's own loader and through ir_datasets' registry."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import wec_record, write_json

from cmrkit.errors import CmrkitError
from cmrkit.trec import read_qrels

STORM = "The storm hit the coast on Monday .".split()
TRACK = "Weather experts tracked the hurricane for days .".split()
HOMES = "The hurricane left thousands homeless , said the mayor .".split()
VOTE = "Voters went to the polls in the election .".split()
COUNT = "The election count took a week .".split()


@pytest.fixture
def built(cli, tmp_path):
    """collections/w (dev and test splits, one distractor) and its qrels, in tmp_path."""
    dev = write_json(
        tmp_path / "Dev_x.json",
        [wec_record("e1", 9, "d4", VOTE, [7]), wec_record("e2", 9, "d5", COUNT, [1])],
    )
    test = write_json(
        tmp_path / "Test_x.json",
        [
            wec_record("h1", 3, "d1", STORM, [1]),
            wec_record("h2", 3, "d2", TRACK, [4]),
            wec_record("h3", 3, "d3", HOMES, [1]),
            wec_record("h4", 3, "d3", HOMES, [8]),  # a second mention in the same passage
        ],
    )
    text = tmp_path / "d.txt"
    text.write_text("A quiet day at the beach .\n")
    r = cli("build-collection", "-i", dev, "-i", test, "-d", text, "-n", "w")
    assert r.exit_code == 0, r.output
    return tmp_path


def _corpus(root: Path) -> list[dict]:
    with gzip.open(root / "collections" / "w" / "corpus.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def _topics(root: Path) -> list[dict]:
    path = root / "collections" / "w" / "topics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_beir_generic_data_loader_reads_the_export(cli, built):
    loader = pytest.importorskip("beir.datasets.data_loader")
    r = cli("export", "beir", "collections/w", "-o", "beir/w")
    assert r.exit_code == 0, r.output
    assert f"corpus.jsonl {len(_corpus(built))} units" in r.stdout
    out = built / "beir" / "w"
    units = _corpus(built)
    topics = _topics(built)
    for split in ("dev", "test"):
        corpus, queries, qrels = loader.GenericDataLoader(str(out)).load(split=split)
        assert corpus == {
            u["id"]: {"text": u["contents"], "title": u["title"] or ""} for u in units
        }
        assert queries == {t["qid"]: t["mention"] for t in topics if t["split"] == split}
        assert qrels == read_qrels(built / "qrels" / f"w.{split}.txt")
    assert (out / "qrels" / "test.tsv").read_text().splitlines()[0] == (
        "query-id\tcorpus-id\tscore"
    )


def test_mention_spans_survive_in_metadata(cli, built):
    assert cli("export", "beir", "collections/w", "-o", "b").exit_code == 0
    docs = [json.loads(x) for x in (built / "b" / "corpus.jsonl").read_text().splitlines()]
    homes = next(d for d in docs if d["text"] == " ".join(HOMES))
    text, mentions = homes["text"], homes["metadata"]["mentions"]
    spans = {m["mention_id"]: text[m["start"] : m["end"]] for m in mentions}
    assert spans == {"h3": "hurricane", "h4": "mayor"}
    assert homes["metadata"]["kind"] == "annotated" and homes["metadata"]["doc_id"] == "d3"
    queries = [json.loads(x) for x in (built / "b" / "queries.jsonl").read_text().splitlines()]
    for q in queries:
        s, e = q["metadata"]["span"]
        assert q["metadata"]["context"][s:e] == q["text"]
        assert q["metadata"]["unit"].startswith("P:")


def test_grades_kept_splits_chosen_and_outputs_guarded(cli, built):
    pooled = built / "pooled"
    pooled.mkdir()
    (pooled / "w.test.txt").write_text("h1 0 P:h2 1\nh1 0 D:d:1 -1\nh2 0 P:h1 0\n")
    r = cli("export", "beir", "collections/w", "-o", "b", "--split", "test",
            "--qrels-dir", pooled)  # fmt: skip
    assert r.exit_code == 0, r.output
    lines = (built / "b" / "qrels" / "test.tsv").read_text().splitlines()
    assert lines[1:] == ["h1\tP:h2\t1", "h1\tD:d:1\t-1", "h2\tP:h1\t0"]
    assert not (built / "b" / "qrels" / "dev.tsv").exists()
    again = cli("export", "beir", "collections/w", "-o", "b")
    assert again.exit_code == 2 and "--force" in again.stderr
    bad = cli("export", "beir", "collections/w", "-o", "c", "--split", "train")
    assert bad.exit_code == 2 and "no split 'train'" in bad.stderr
    assert bad.stderr.count("\n") == 1 and not (built / "c").exists()
    assert cli("export", "beir", "collections/w", "-o", "b", "--force").exit_code == 0
    assert (built / "b" / "qrels" / "dev.tsv").exists()
    same = cli("export", "beir", "collections/w", "-o", "b")  # the same export: done, success
    assert same.exit_code == 0 and "b/ is up to date" in same.stdout


def test_ir_datasets_registry(built, monkeypatch):
    ir_datasets = pytest.importorskip("ir_datasets")
    from cmrkit.exports.ir_datasets import register

    monkeypatch.chdir(built)
    ids = register("collections/w", name="w-test-export")
    assert ids == ["cmrkit/w-test-export", "cmrkit/w-test-export/dev", "cmrkit/w-test-export/test"]
    assert register("collections/w", name="w-test-export") == ids  # again: a no-op
    ds = ir_datasets.load("cmrkit/w-test-export/test")
    assert ds.has_docs() and ds.has_queries() and ds.has_qrels()
    units = _corpus(built)
    docs = list(ds.docs_iter())
    assert [d.doc_id for d in docs] == [u["id"] for u in units]
    assert ds.docs_count() == len(units)
    homes = ds.docs_store().get(next(u["id"] for u in units if u["contents"] == " ".join(HOMES)))
    assert {(m[0], homes.text[m[2] : m[3]]) for m in homes.mentions} == {
        ("h3", "hurricane"),
        ("h4", "mayor"),
    }
    queries = list(ds.queries_iter())
    expected = [t for t in _topics(built) if t["split"] == "test"]
    assert [q.query_id for q in queries] == [t["qid"] for t in expected]
    for q in queries:
        assert q.context[q.span[0] : q.span[1]] == q.text == q.default_text()
    qrels = {}
    for qrel in ds.qrels_iter():
        qrels.setdefault(qrel.query_id, {})[qrel.doc_id] = qrel.relevance
    assert qrels == read_qrels(built / "qrels" / "w.test.txt")
    whole = ir_datasets.load("cmrkit/w-test-export")
    assert len(list(whole.queries_iter())) == len(_topics(built)) and not whole.has_qrels()
    other = built / "collections" / "v"
    other.mkdir()
    for name in ("corpus.jsonl.gz", "topics.jsonl"):
        (other / name).write_bytes((built / "collections" / "w" / name).read_bytes())
    with pytest.raises(CmrkitError, match="already registered"):
        register(other, name="w-test-export")
