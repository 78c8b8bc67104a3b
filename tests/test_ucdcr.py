"""`build-collection --source ucdcr` on uCDCR's ECB+ dev split (../shared/data/ucdcr-ecbplus/),
and uCDCR's per-subtopic protocol step by step against the reference scorer."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from coref_fixtures import need_perl, run_perl

from cmrkit.collection.clusters import read_clustering, write_conll
from cmrkit.sources.ucdcr import read_ucdcr, resolve

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "ucdcr-ecbplus"
EVENTS = DATA / "val" / "event_mentions.json.gz"


@pytest.fixture(scope="module")
def records():
    if not EVENTS.is_file():
        pytest.skip(f"uCDCR's ECB+ dev split is not at {DATA}")
    return json.loads(gzip.decompress(EVENTS.read_bytes()))


def test_a_dataset_a_split_folder_and_a_file_read_the_same(records):
    whole = read_ucdcr(resolve(DATA))
    split = read_ucdcr(resolve(DATA / "val"))
    one = read_ucdcr(resolve(EVENTS))
    assert (
        [m.mention_id for m in whole]
        == [m.mention_id for m in split]
        == [m.mention_id for m in one]
    )
    assert len(whole) == len(records) == 984 and {m.split for m in whole} == {"dev"}
    m, r = whole[0], records[0]
    assert (m.cdcr.topic, m.cdcr.subtopic, m.cdcr.head_lemma) == (
        r["topic_id"], r["subtopic_id"], r["mention_head_lemma"]
    )  # fmt: skip
    assert m.text == r["tokens_str"] and m.cluster == r["coref_chain"]
    assert sum(m.cdcr.singleton for m in whole) == sum(r["is_singleton"] for r in records)
    both = read_ucdcr(resolve(DATA, "all"))
    assert len(both) > len(whole)


def test_the_parquet_of_all_mentions_reads_as_the_json_files(records, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    entities = json.loads(gzip.decompress((DATA / "val" / "entity_mentions.json.gz").read_bytes()))
    rows = records + entities
    keep = ["coref_chain", "mention_id", "mention_context", "mention_sentence_start_end",
            "tokens_number", "doc", "sent_id", "topic_id", "subtopic_id", "mention_head_lemma",
            "is_singleton", "split"]  # fmt: skip
    pq.write_table(pa.Table.from_pylist([{k: r[k] for k in keep} for r in rows]),
                   tmp_path / "all_mentions.parquet")  # fmt: skip
    from_parquet = read_ucdcr(resolve(tmp_path, "all"))
    from_json = read_ucdcr(resolve(DATA, "all"))
    assert [(m.mention_id, m.cluster, m.text, m.split) for m in from_parquet] == [
        (m.mention_id, m.cluster, m.text, m.split) for m in from_json
    ]


def test_a_field_the_method_needs_is_named_with_the_method(cli, tmp_path, records):
    bare = tmp_path / "in" / "test"
    bare.mkdir(parents=True)
    lean = [{k: v for k, v in r.items() if k != "subtopic_id"} for r in records[:200]]
    (bare / "event_mentions.json").write_text(json.dumps(lean))
    r = cli("build-collection", "--source", "ucdcr", "-i", bare, "-n", "u")
    assert r.exit_code == 0, r.output
    r = cli("cluster", "u", "--method", "head-lemma", "--within", "subtopic")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--within subtopic needs the source's 'subtopic_id' field" in r.stderr
    assert "test/event_mentions.json record 0" in r.stderr
    assert not (tmp_path / "runs").exists()
    r = cli("cluster", "u", "--method", "head-lemma", "--within", "topic")
    assert r.exit_code == 0, r.output


def test_the_ucdcr_protocol_equals_the_reference_scorer_subtopic_by_subtopic(cli, tmp_path):
    """Gold singletons dropped before clustering, each subtopic one CoNLL document scored by
    scorer.pl all, F1 rounded to 2 decimals, CoNLL their mean, the mean over subtopics."""
    need_perl()
    if not EVENTS.is_file():
        pytest.skip("no uCDCR data")
    assert cli("build-collection", "--source", "ucdcr", "-i", DATA).exit_code == 0
    r = cli("cluster", "ucdcr-ecbplus", "--split", "dev", "--method", "head-lemma",
            "--within", "subtopic", "--gold-singletons", "drop")  # fmt: skip
    assert r.exit_code == 0, r.output
    key = tmp_path / "qrels/ucdcr-ecbplus.dev.clusters.jsonl"
    response = tmp_path / "runs/ucdcr-ecbplus/head-lemma.subtopic.dev.clusters.jsonl"
    r = cli("coref-table", key, response, "--protocol", "ucdcr", "-f", "json")
    assert r.exit_code == 0, r.output
    table = json.loads(r.stdout)
    gold = [json.loads(x) for x in key.open()]
    sizes = Counter(g["cluster"] for g in gold)
    system = {x["mention_id"]: str(x["cluster"]) for x in map(json.loads, response.open())}
    assert len(system) == sum(1 for g in gold if sizes[g["cluster"]] > 1)  # singletons dropped
    rows = {row["subtopic"]: row for row in table["subtopics"]}
    assert len(rows) == 16
    for subtopic, row in rows.items():
        mine = [g for g in gold if g["subtopic"] == subtopic and sizes[g["cluster"]] > 1]
        spans = [(i, i, g["cluster"], system[g["mention_id"]]) for i, g in enumerate(mine)]
        for side, col in (("key", 2), ("response", 3)):
            labels: dict[str, str] = {}
            chains = [(s, e, labels.setdefault(x[col - 2], str(len(labels)))) for s, e, *x in spans]
            with open(tmp_path / f"{side}.conll", "w") as f:
                write_conll(f, [(subtopic, len(mine), chains)])
        perl = run_perl(tmp_path / "key.conll", tmp_path / "response.conll", "all")
        expected = {m: perl[m][6] for m in ("muc", "bcub", "ceafe")}  # the printed F1
        assert {m: row[m] for m in expected} == expected, subtopic
        assert row["conll"] == pytest.approx(round(sum(row[m] for m in expected) / 3, 3))
        assert read_clustering(tmp_path / "key.conll").mentions == row["mentions"]
    mean = table["mean"]
    assert mean["conll"] == pytest.approx(sum(r["conll"] for r in rows.values()) / 16, abs=5e-4)
