"""Building a CMR-style sentence collection from the synthetic TAC dataset (tests/tac_data.py)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from tac_data import DOCS, GOLD, write_dataset

from cmrkit.errors import CmrkitError
from cmrkit.sources import tac
from cmrkit.tac import cmr
from cmrkit.tac.collection import TacInputs, TacOptions, build_tac_collection
from cmrkit.trec import read_qrels


def corpus(root: Path, name: str) -> list[dict]:
    with gzip.open(root / "collections" / name / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def topics(root: Path, name: str) -> list[dict]:
    path = root / "collections" / name / "topics.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def build(root: Path, ds, name: str, **kw) -> None:
    inputs = kw.pop("inputs", None) or TacInputs(ds.docs, ds.mentions)
    build_tac_collection(
        inputs,
        TacOptions(name, **kw),
        collections_dir=root / "collections",
        qrels_dir=root / "qrels",
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("tacbuild")
    ds = write_dataset(root)
    build(root, ds, "tac", date_range="auto")
    return root, ds


def raw_docs() -> dict[str, tac.TacDocument]:
    return {d: tac.split_documents(text, d)[0] for d, text in DOCS.items()}


def test_unit_ids_are_raw_sentence_offsets(built):
    root, _ = built
    docs = raw_docs()
    units = corpus(root, "tac")
    assert len({u["id"] for u in units}) == len(units)
    for u in units:
        doc_id, start, last = u["id"].rsplit(":", 2)
        assert doc_id == u["doc_id"]
        raw = docs[doc_id].raw
        # the unit text is the unescaped, markup-free text of raw[start..last]
        assert docs[doc_id].visible(int(start), int(last) + 1)[0] == u["contents"]
        assert not raw[int(last)].isspace() and not raw[int(start)].isspace()
        for m in u.get("mentions", []):
            d, ss, se, ms, me = cmr.parse_mention_id(m["mention_id"])
            assert (d, ss, se) == (doc_id, int(start), int(last))
            # mention ends inclusive, as in the published CMR files
            assert tac.unescape(raw[ms : me + 1]) == u["contents"][m["start"] : m["end"]]


def test_escaped_mention_and_forum_author(built):
    root, ds = built
    units = {u["id"]: u for u in corpus(root, "tac")}
    s, e = ds.offsets["TEDL15_0010"]  # AT&amp;T
    (unit,) = [
        u for u in units.values() if any(m["cluster"] == "E04" for m in u.get("mentions", []))
    ]
    (m,) = [m for m in unit["mentions"] if m["cluster"] == "E04"]
    assert m["mention_id"].endswith(f":{s}:{e}")  # the TAC span keeps its numbers
    assert unit["contents"][m["start"] : m["end"]] == "AT&T"
    author = [u for u in units.values() if u["contents"] == "tinydancer"]
    assert len(author) == 1 and author[0]["kind"] == "annotated"


def test_longest_query_per_entity_and_published_ids(built):
    root, ds = built
    ts = {t["cluster"]: t for t in topics(root, "tac")}
    # LOC (Ohio) is outside the default types; AT&T and tinydancer have one mention only
    assert sorted(ts) == ["E01", "E02", "NIL0001"]
    longest = {}
    for mid, _, _, _, text, entity, _ in GOLD:
        if entity in ts and len(text) > len(longest.get(entity, ("", ""))[1]):
            longest[entity] = (mid, text)
    for entity, t in ts.items():
        mid, text = longest[entity]
        assert t["qid"] == f"tac:{entity}:{mid}"
        assert t["mention"] == text
        assert t["context"][t["span"][0] : t["span"][1]] == text
        assert t["exclude_doc"] == t["doc_id"]
        assert t["type"] == {"E01": "ORG", "E02": "GPE", "NIL0001": "PER"}[entity]
    queries = cmr.read_cmr_queries(root / "collections" / "tac" / "queries.test.txt")
    assert sorted(queries) == sorted(t["qid"] for t in ts.values())
    for t in ts.values():
        q = queries[t["qid"]]
        assert q.mention_id == t["cmr_mention_id"] and q.unit == t["unit"]


def test_qrels_published_layout_exclude_own_document(built):
    root, _ = built
    path = root / "qrels" / "tac.test.txt"
    qrels, types = cmr.read_cmr_qrels(path)
    assert read_qrels(path) == qrels
    lines = path.read_text(encoding="utf-8").splitlines()
    assert all(line.split("\t")[3] == "1.0" for line in lines)
    units = {u["id"]: u for u in corpus(root, "tac")}
    for t in topics(root, "tac"):
        rel = qrels[t["qid"]]
        assert types[t["qid"]] == t["type"]
        assert len(rel) == t["n_relevant"]
        for docno in rel:
            assert units[docno]["doc_id"] != t["doc_id"]
            assert any(m["cluster"] == t["cluster"] for m in units[docno]["mentions"])
    # Bobby Hall: Hall in B and Bobby Hall in C (A is the query's own document)
    (bh,) = [t for t in topics(root, "tac") if t["cluster"] == "NIL0001"]
    assert sorted(d.split(":")[0] for d in qrels[bh["qid"]]) == [
        "AFP_ENG_20091002.0002",
        "NYT_ENG_20091005.0003",
    ]


def test_date_range_auto_keeps_dated_range_and_undated(built):
    root, _ = built
    docs_in = {u["doc_id"] for u in corpus(root, "tac")}
    assert "NYT_ENG_20091004.0004" in docs_in  # within 2009-10-01 .. 2009-10-05
    assert "NYT_ENG_20080101.0005" not in docs_in  # before the earliest query document
    assert "bolt-eng-DF-170-181103-8882762" in docs_in  # undated: kept and counted
    manifest = json.loads((root / "collections" / "tac" / "manifest.json").read_text())
    assert manifest["dropped"]["documents_outside_date_range"] == 1
    assert manifest["dropped"]["undated_documents_kept"] == 1
    query_days = sorted(tac.doc_date(t["doc_id"]) for t in topics(root, "tac"))
    assert manifest["date_window"] == [query_days[0].isoformat(), query_days[-1].isoformat()]


def test_chains_stored_and_in_units(built):
    root, _ = built
    path = root / "collections" / "tac" / "chains.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        by_doc = {d["doc_id"]: d["chains"] for d in map(json.loads, f)}
    # every document in the corpus has its chains, annotated or not
    assert set(by_doc) == {u["doc_id"] for u in corpus(root, "tac")}
    a = {c["id"]: c for c in by_doc["AFP_ENG_20091001.0001"]}
    assert [m[4] for m in a["NIL0001"]["mentions"]][0] == "gold"
    unit = next(u for u in corpus(root, "tac") if u["contents"].startswith("Bobby Hall addressed"))
    assert "Bobby Hall" in unit["chain"] and "United Nations" in unit["chain"]
    assert "BH" in unit["acronyms"].split() and "UN" in unit["acronyms"].split()
    assert "bob" in unit["trigrams"].split()
    (t,) = [t for t in topics(root, "tac") if t["cluster"] == "NIL0001"]
    assert "Bobby Hall" in t["chain"]


def test_queries_all_keep_own_doc_types_and_determinism(tmp_path, built):
    root0, _ = built
    ds = write_dataset(tmp_path)
    build(tmp_path, ds, "all", queries="all", keep_own_doc=True, types=("PER", "ORG", "GPE", "LOC"))
    ts = topics(tmp_path, "all")
    # every mention of an entity with another mention in another sentence is a query
    assert {t["source"]["mention_id"] for t in ts} == {
        "TEDL15_0001", "TEDL15_0002", "TEDL15_0003", "TEDL15_0004", "TEDL15_0005",
        "TEDL15_0006", "TEDL15_0007", "TEDL15_0009",
    }  # fmt: skip
    assert all("exclude_doc" not in t for t in ts)
    # without a date range, the 2008 document is a candidate
    assert "NYT_ENG_20080101.0005" in {u["doc_id"] for u in corpus(tmp_path, "all")}
    # the 2014 layout (queries XML + links) gives the same collection as the tab file
    xml_inputs = TacInputs(ds.docs, None, ds.queries_xml, ds.links)
    build(tmp_path, ds, "xml", inputs=xml_inputs, date_range="auto", tag="tac")
    build(tmp_path, ds, "tac", date_range="auto")
    for name in ("corpus.jsonl.gz", "chains.jsonl.gz"):
        tac_bytes = (tmp_path / "collections" / "tac" / name).read_bytes()
        assert (tmp_path / "collections" / "xml" / name).read_bytes() == tac_bytes
        # rebuilding in another folder gives byte-identical files
        assert (root0 / "collections" / "tac" / name).read_bytes() == tac_bytes

    def without_source(name: str) -> list[dict]:
        return [{k: v for k, v in t.items() if k != "source"} for t in topics(tmp_path, name)]

    assert without_source("xml") == without_source("tac")
    assert (tmp_path / "qrels" / "xml.test.txt").read_text() == (
        tmp_path / "qrels" / "tac.test.txt"
    ).read_text()


def _edit(path: Path, line: int, column: int, value: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    cols = lines[line - 1].split("\t")
    cols[column] = value
    lines[line - 1] = "\t".join(cols)
    path.write_text("".join(lines), encoding="utf-8")


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        (2, "Bobby Halll", r"does not match the document text 'Bobby Hall'"),
        (3, "AFP_ENG_20091001.0001:99990-99999", r"lie outside document AFP_ENG_20091001\.0001"),
        (3, "AFP_ENG_29990101.0001:5-10", r"document AFP_ENG_29990101\.0001 is not under"),
        (5, "WEAPON", r"unknown entity type 'WEAPON'"),
    ],
)
def test_bad_mentions_name_file_and_line(tmp_path, column, value, message):
    ds = write_dataset(tmp_path)
    _edit(ds.mentions, 6, column, value)
    with pytest.raises(CmrkitError, match=rf"gold\.tab: line 6: .*{message}"):
        build(tmp_path, ds, "bad")
    assert not (tmp_path / "collections" / "bad").exists()
    assert not (tmp_path / "qrels" / "bad.test.txt").exists()
    build(tmp_path, ds, "skip", skip_bad=True)
    manifest = json.loads((tmp_path / "collections" / "skip" / "manifest.json").read_text())
    assert manifest["counts"]["skipped_bad_records"] == 1
    assert "line 6" in manifest["problems"][0]
    assert "TEDL15_0006" not in {t["source"]["mention_id"] for t in topics(tmp_path, "skip")}


def test_malformed_queries_xml_and_existing_output(tmp_path):
    ds = write_dataset(tmp_path)
    text = ds.queries_xml.read_text(encoding="utf-8").replace("</name>", "</nam>", 1)
    ds.queries_xml.write_text(text, encoding="utf-8")
    with pytest.raises(CmrkitError, match=r"queries\.xml: line 4: malformed XML"):
        build(tmp_path, ds, "x", inputs=TacInputs(ds.docs, None, ds.queries_xml, ds.links))
    build(tmp_path, ds, "once")
    kept = build_tac_collection(
        TacInputs(ds.docs, ds.mentions),
        TacOptions("once"),
        collections_dir=tmp_path / "collections",
        qrels_dir=tmp_path / "qrels",
    )
    assert kept.up_to_date  # the same inputs and parameters: kept, not refused
    with pytest.raises(CmrkitError, match="built from other inputs or parameters.*--force"):
        build(tmp_path, ds, "once", types=("PER",))
    shutil.rmtree(tmp_path / "collections" / "once")


def test_sentence_offsets_file_replaces_overlapping_sentences(tmp_path):
    ds = write_dataset(tmp_path)
    raw = DOCS["AFP_ENG_20091001.0001"]
    start = raw.index("The speech in New York")
    last = raw.index("Hall thanked them.") + len("Hall thanked them.") - 1
    offsets = tmp_path / "sentences.txt"
    offsets.write_text(f"AFP_ENG_20091001.0001:{start}:{last}\n", encoding="utf-8")
    inputs = TacInputs(ds.docs, ds.mentions, sentence_offsets=offsets)
    build(tmp_path, ds, "given", inputs=inputs)
    units = {u["id"]: u for u in corpus(tmp_path, "given")}
    given = units[f"AFP_ENG_20091001.0001:{start}:{last}"]
    assert given["contents"].endswith("delegates. Hall thanked them.")
    assert [m["cluster"] for m in given["mentions"]] == ["E02"]
    # no other unit of the document overlaps the given sentence; spaCy's others remain
    spans = [
        tuple(map(int, u["id"].rsplit(":", 2)[1:]))
        for u in units.values()
        if u["doc_id"] == "AFP_ENG_20091001.0001"
    ]
    assert all(e < start or s > last or (s, e) == (start, last) for s, e in spans)
    assert any(u["contents"].startswith("Bobby Hall addressed") for u in units.values())


def test_published_cmr_files_as_topics_and_qrels(tmp_path, built):
    root0, _ = built
    ds = write_dataset(tmp_path)
    queries = tmp_path / "CMR_queries.txt"
    qrels = tmp_path / "CMR_char_offset_qrels.txt"
    # the published layout: trailing spaces, and judged non-relevant / unknown sentences too
    lines = (root0 / "collections" / "tac" / "queries.test.txt").read_text().splitlines()
    queries.write_text("".join(line + " \n" for line in lines), encoding="utf-8")
    extra = next(u["id"] for u in corpus(root0, "tac") if u["contents"].startswith("Markets"))
    (qid,) = [line.split("\t")[0] for line in lines if ":NIL0001:" in line]
    qrels.write_text(
        (root0 / "qrels" / "tac.test.txt").read_text() + f"{qid}\tPER\t{extra}\t-1.0\n",
        encoding="utf-8",
    )
    inputs = TacInputs(ds.docs, cmr_queries=queries, cmr_qrels=qrels)
    build(tmp_path, ds, "published", inputs=inputs)
    # the judgments come through unchanged, in the published layout
    assert (tmp_path / "qrels" / "published.test.txt").read_text() == qrels.read_text()
    ts = {t["qid"]: t for t in topics(tmp_path, "published")}
    assert set(ts) == {line.split("\t")[0] for line in lines}
    for t0 in topics(root0, "tac"):
        t = ts[t0["qid"]]
        assert (t["unit"], t["cmr_mention_id"], t["mention"], t["type"]) == (
            t0["unit"], t0["cmr_mention_id"], t0["mention"], t0["type"]
        )  # fmt: skip
    ids = {u["id"] for u in corpus(tmp_path, "published")}
    judged, _ = cmr.read_cmr_qrels(qrels)
    assert all(d in ids for docs in judged.values() for d in docs)
    # a judged sentence whose document is missing is reported with the qrels file
    with qrels.open("a", encoding="utf-8") as f:
        f.write(f"{qid}\tPER\tAFP_ENG_20091009.0001:0:20\t1.0\n")
    with pytest.raises(CmrkitError, match=r"CMR_char_offset_qrels\.txt: judged sentence AFP_ENG"):
        build(tmp_path, ds, "missing", inputs=inputs)


def test_gold_clusters_written_beside_the_qrels_score_perfectly(built, cli):
    root, _ = built
    key = root / "qrels" / "tac.test.clusters.jsonl"
    records = [json.loads(line) for line in key.read_text(encoding="utf-8").splitlines()]
    ids = [r["mention_id"] for r in records]
    assert len(ids) == len(set(ids)) > 0
    # the key names every annotated mention of the units, with its entity as the cluster
    in_units = {
        m["mention_id"]: (m["cluster"], u["id"])
        for u in corpus(root, "tac")
        for m in u.get("mentions", [])
    }
    assert {r["mention_id"]: (r["cluster"], r["unit"]) for r in records} == in_units
    assert len({r["cluster"] for r in records}) > 1
    manifest = json.loads((root / "collections" / "tac" / "manifest.json").read_text())
    assert manifest["files"]["clusters"] == {"test": str(key)}
    # it is a key eval-coref reads: the key against itself is perfect, a merge of all is not
    merged = root / "all-one.jsonl"
    merged.write_text("".join(json.dumps({**r, "cluster": "x"}) + "\n" for r in records))
    r = cli("eval-coref", key, key, "-m", "muc,b3,lea", "-f", "json")
    assert r.exit_code == 0, r.output
    measures = json.loads(r.stdout)["measures"]
    assert {m: v["f1"] for m, v in measures.items()} == {"muc": 1.0, "bcub": 1.0, "lea": 1.0}
    r = cli("eval-coref", key, merged, "-m", "b3", "-f", "json")
    assert r.exit_code == 0, r.output
    merged_b3 = json.loads(r.stdout)["measures"]["bcub"]
    assert merged_b3["recall"] == 1.0 and merged_b3["precision"] < 1.0
