"""End to end on the synthetic TAC dataset: build-collection --source tac, tac check, index, the
bm25 / fields / qe / coref runs, and infAP per entity type with the published-layout files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tac_data import write_dataset
from typer.testing import CliRunner

from cmrkit.cli import app
from cmrkit.commands import tac as tac_commands
from cmrkit.tac import cmr
from cmrkit.trec import read_run

if not any(g.name == "tac" for g in app.registered_groups):
    tac_commands.register(app)


def invoke(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("taccli")
    old = Path.cwd()
    os.chdir(root)
    try:
        ds = write_dataset(root)
        result = invoke(
            "build-collection", "--source", "tac", "--name", "tac15", "--mentions", ds.mentions,
            "--docs", ds.docs, "--queries", "longest", "--date-range", "auto",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        result = invoke("index", "collections/tac15", "--quiet")
        assert result.exit_code == 0, result.output
        for args in (
            ("bm25", "--query", "mention"),
            ("fields", "--preset", "doc"),
            ("qe", "--method", "rocchio", "--base", "fields", "--preset", "doc"),
            ("coref",),
            ("fields", "--weights", "contents=1,chain=0.5,acronyms=0.5,trigrams=0.3",
             "--query", "features", "--name", "features"),
        ):  # fmt: skip
            result = invoke("run", args[0], "collections/tac15", *args[1:], "--quiet")
            assert result.exit_code == 0, result.output
        yield root, ds
    finally:
        os.chdir(old)


RUNS = ("bm25-mention", "fields-doc", "qe-rocchio-fields-doc", "coref", "features")


def topics(root: Path) -> list[dict]:
    lines = (root / "collections" / "tac15" / "topics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_runs_never_return_the_query_document(workdir):
    root, _ = workdir
    own = {t["qid"]: t["doc_id"] for t in topics(root)}
    for name in RUNS:
        run = read_run(root / "runs" / "tac15" / f"{name}.test.trec")
        assert set(run) <= set(own)
        for qid, docs in run.items():
            assert docs, f"{name}: no results for {qid}"
            assert not any(d.rsplit(":", 2)[0] == own[qid] for d in docs)


def test_coref_queries_are_chain_words(workdir):
    root, _ = workdir
    sidecar = json.loads((root / "runs" / "tac15" / "coref.test.json").read_text())
    assert sidecar["parameters"]["fields"] == {"chain": 1.0}
    assert sidecar["ranking"]["own_document_removed"] is True
    chains = {t["qid"]: t["chain"] for t in topics(root)}
    assert sidecar["queries"] == chains
    # Bobby Hall's chain words find the sentence "Hall" of document B through its chain field
    run = read_run(root / "runs" / "tac15" / "coref.test.trec")
    (qid,) = [q for q in chains if ":NIL0001:" in q]
    assert any(d.startswith("NYT_ENG_20091005.0003:") for d in run[qid])


def test_features_query_holds_acronym_trigrams_and_chain(workdir):
    root, _ = workdir
    sidecar = json.loads((root / "runs" / "tac15" / "features.test.json").read_text())
    assert sidecar["parameters"]["fields"] == {
        "contents": 1.0, "chain": 0.5, "acronyms": 0.5, "trigrams": 0.3
    }  # fmt: skip
    for t in topics(root):
        words = sidecar["queries"][t["qid"]].split()
        if t["mention"] == "United Nations":
            assert "UN" in words and "nat" in words
        assert t["chain"].split()[0] in words


def test_infap_per_entity_type(workdir):
    root, _ = workdir
    qrels = root / "qrels" / "tac15.test.txt"
    queries = root / "collections" / "tac15" / "queries.test.txt"
    types = cmr.query_types(queries)
    for name in RUNS:
        result = invoke(
            "eval", f"runs/tac15/{name}.test.trec", qrels, "-m", "infAP", "--topics", queries,
            "--by", "type", "-f", "json",
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        groups = data["groups"]
        assert set(groups) == set(types.values()) == {"PER", "ORG", "GPE"}
        per_query = data["per_query"]
        for etype, group in groups.items():
            values = [per_query[q]["infAP"] for q, t in types.items() if t == etype]
            assert group["queries"] == len(values)
            assert group["measures"]["infAP"] == pytest.approx(sum(values) / len(values))
            assert 0.0 < group["measures"]["infAP"] <= 1.0


def test_tac_check_reports_mismatches(workdir, tmp_path):
    root, ds = workdir
    result = invoke("tac", "check", "--mentions", ds.mentions, "--docs", ds.docs)
    assert result.exit_code == 0, result.output
    assert "0 problem(s)" in result.output
    bad = tmp_path / "gold.tab"
    lines = ds.mentions.read_text().splitlines(keepends=True)
    cols = lines[2].split("\t")
    s, e = (int(x) for x in cols[3].rsplit(":", 1)[1].split("-"))
    cols[3] = f"{cols[3].rsplit(':', 1)[0]}:{s + 1}-{e + 1}"
    lines[2] = "\t".join(cols)
    bad.write_text("".join(lines))
    result = invoke("tac", "check", "--mentions", bad, "--docs", ds.docs)
    assert result.exit_code == 2
    assert f"{bad}: line 3: mention 'New York' does not match" in result.output


def test_build_errors_are_one_line(workdir, tmp_path):
    _, ds = workdir
    os.chdir(tmp_path)
    result = invoke("build-collection", "--source", "tac", "--mentions", ds.mentions)
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: --source tac needs --docs DIR (the TAC source documents)"
    ]
    result = invoke(
        "build-collection", "--source", "tac", "--mentions", ds.mentions, "--docs", ds.docs,
        "--types", "PER,WEAPON",
    )  # fmt: skip
    assert result.exit_code == 2 and "unknown entity type 'WEAPON'" in result.output
