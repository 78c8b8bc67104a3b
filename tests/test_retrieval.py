"""Retrieval baselines on tiny collections, with the real Lucene (Anserini through Pyserini)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from retrieval_collection import topic, unit, write_collection
from typer.testing import CliRunner

from cmrkit.cli import app
from cmrkit.collection.layout import Topic
from cmrkit.errors import CmrkitError
from cmrkit.fileio import sha256_file
from cmrkit.retrieval import (
    QE,
    Searcher,
    build_index,
    open_index,
    parse_weights,
    run_bm25,
    run_fields,
    run_qe,
)
from cmrkit.retrieval.queries import formulate
from cmrkit.trec import read_run

Q1_CONTEXT = "The volcano Etna erupted violently on Tuesday near Catania in Sicily."
UNITS = [
    unit("P:q1", Q1_CONTEXT, doc_id="d1", title="Etna eruption", annotated=True),
    unit("P:exact", "Etna erupted violently near Catania", doc_id="d2", annotated=True),
    unit("D:t:1", "A riot erupted in the stadium after the match", doc_id="d3"),
    unit("D:t:2", "Violence erupted again downtown during the night", doc_id="d4"),
    unit("D:t:3", "The crowd erupted in cheers when the band arrived", doc_id="d5"),
    unit("D:catania", "Catania airport reopened to flights from Etna region", doc_id="d6"),
    unit("D:title", "An airship story about hydrogen gas", doc_id="d7", title="Zeppelin"),
    unit("D:contents", "The zeppelin landed in a field", doc_id="d8", title="Aviation"),
    unit("D:dup:a", "Unique marmalade festival", doc_id="d9"),
    unit("D:dup:b", "Unique marmalade festival", doc_id="d10"),
    unit("D:g:1", "Kangaroo sightings rose sharply", doc_id="g"),
    unit("D:g:2", "Wombat burrows expanded quickly", doc_id="g"),
    unit("P:s:0:20", "Platypus eggs hatched.", passage="P:s", doc_id="s"),
    unit("P:s:21:40", "Echidna spines grew.", passage="P:s", doc_id="s"),
    unit("D:ent", "Yesterday Angela Merkel spoke in Berlin with Barack Obama", doc_id="d11"),
    unit("D:blimp-title", "An airship story about helium", doc_id="d12", title="Blimp"),
    unit("D:blimp-contents", "The blimp was parked", doc_id="d13", title="Parking"),
    # fillers: Anserini's feedback ignores terms found in more than 10% of the units
    *(
        unit(f"D:fill:{i:02d}", f"Gardening note {i} on tomatoes and basil", doc_id=f"f{i}")
        for i in range(30)
    ),
]
TOPICS = [
    topic("q1", "test", "erupted violently", Q1_CONTEXT, "P:q1"),
    topic("q2", "test", "zeppelin", "A zeppelin flew over", "P:exact"),
    topic("q3", "test", "marmalade", "The marmalade jar", "D:t:1"),
    topic("q_empty", "test", "the", "the of the marmalade", "D:t:2"),
    topic("t1", "train", "blimp", "A blimp was spotted", "D:t:3"),
]
QRELS = {
    "test": {"q1": ["P:exact"], "q2": ["D:title"], "q3": ["D:dup:a"]},
    "train": {"t1": ["D:blimp-title"]},
}


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    """A working folder with collections/tiny indexed (entities on)."""
    root = tmp_path_factory.mktemp("ws")
    coll = write_collection(root, "tiny", UNITS, TOPICS, QRELS)
    build_index(coll, threads=2, progress=False)
    return root


def coll(ws: Path) -> Path:
    return ws / "collections" / "tiny"


def bm25(ws: Path, name: str, **kw):
    return run_bm25(coll(ws), runs_dir=ws / "runs", name=name, force=True, **kw)


def docs(result, qid: str) -> list[str]:
    return [d for d, _ in result.run.get(qid, [])]


def test_index_manifest_records_corpus_hash(ws):
    info = open_index(coll(ws))
    assert info.corpus_sha256 == sha256_file(coll(ws) / "corpus.jsonl.gz")
    assert info.manifest["n_units"] == len(UNITS)
    assert set(info.manifest["settings"]["fields"]) == {"contents", "title", "entities", "document"}


def test_planted_exact_match_ranks_first_and_own_unit_never_returned(ws):
    for formulation in ("mention", "mention+entities", "sentence", "context"):
        r = bm25(ws, f"planted-{formulation.replace('+', '-')}", query=formulation)
        assert docs(r, "q1")[0] == "P:exact", formulation
        for t in TOPICS:
            assert t["unit"] not in docs(r, t["qid"]), (formulation, t["qid"])
        lines = r.run_path.read_text().split("\n")
        assert not any(" P:q1 " in line and line.startswith("q1 ") for line in lines)


def test_k_results_even_when_own_unit_is_excluded(ws):
    # q1's own unit P:q1 matches "erupted"; the other matching units must fill k
    full = bm25(ws, "deep", query="mention")
    n_other = len(docs(full, "q1"))
    assert n_other >= 4
    r = bm25(ws, "k3", query="mention", k=3)
    assert len(docs(r, "q1")) == 3
    assert docs(r, "q1") == docs(full, "q1")[:3]


def test_ties_in_trec_eval_order_and_reruns_identical(ws):
    r1 = bm25(ws, "ties", query="mention")
    ranking = r1.run["q3"]
    # equal texts score equal in Lucene; Anserini separates the tie, lower docno first
    assert [d for d, _ in ranking[:2]] == ["D:dup:a", "D:dup:b"]
    assert ranking[0][1] > ranking[1][1]
    first = r1.run_path.read_bytes()
    r2 = bm25(ws, "ties", query="mention", threads=1)
    assert r2.run_path.read_bytes() == first
    # the file agrees with how trec readers order it
    ordered = sorted(
        read_run(r1.run_path)["q3"].items(), key=lambda kv: (kv[1], kv[0]), reverse=True
    )
    assert [d for d, _ in ordered] == docs(r1, "q3")


def test_empty_query_warns_and_others_run(ws):
    r = bm25(ws, "empty", query="mention")
    warned = [w["qid"] for w in r.sidecar["warnings"]]
    assert warned == ["q_empty"]
    assert "q_empty" not in read_run(r.run_path)
    assert r.sidecar["n_queries"] == 4 and r.sidecar["n_queries_with_results"] == 3


def test_sidecar_records_command_parameters_hashes(ws):
    r = bm25(ws, "sidecar", query="mention", k=7, k1=1.2, b=0.75)
    side = json.loads(r.sidecar_path.read_text())
    info = open_index(coll(ws))
    assert side["parameters"]["k"] == 7 and side["parameters"]["k1"] == 1.2
    assert side["parameters"]["b"] == 0.75 and side["parameters"]["query"] == "mention"
    assert side["index"]["corpus_sha256"] == sha256_file(coll(ws) / "corpus.jsonl.gz")
    assert side["index"]["index_id"] == info.index_id
    assert {"cmrkit", "pyserini", "lucene", "anserini", "java"} <= set(side["versions"])
    assert {"search", "total"} <= set(side["seconds"])
    tags = {line.split()[5] for line in r.run_path.read_text().splitlines()}
    assert len(tags) == 1 and "k1=1.2" in tags.pop()


def test_rerun_is_up_to_date_and_another_run_is_refused_without_force(ws):
    first = bm25(ws, "once", query="mention")
    stamp = first.run_path.stat().st_mtime_ns
    again = run_bm25(coll(ws), runs_dir=ws / "runs", name="once", query="mention")
    assert again.up_to_date and again.run == first.run
    assert first.run_path.stat().st_mtime_ns == stamp  # kept, not rewritten
    with pytest.raises(CmrkitError, match="different run .* --force"):
        run_bm25(coll(ws), runs_dir=ws / "runs", name="once", query="mention", k=5)
    assert first.run_path.stat().st_mtime_ns == stamp


def test_field_weights_move_rankings(ws):
    title_first = run_fields(
        coll(ws),
        runs_dir=ws / "runs",
        name="wt",
        force=True,
        weights="title=1,contents=0.1",
        query="mention",
    )
    contents_first = run_fields(
        coll(ws),
        runs_dir=ws / "runs",
        name="wc",
        force=True,
        weights="contents=1,title=0.1",
        query="mention",
    )
    assert docs(title_first, "q2")[:2] == ["D:title", "D:contents"]
    assert docs(contents_first, "q2")[:2] == ["D:contents", "D:title"]


def test_document_and_entities_fields(ws):
    info = open_index(coll(ws))
    s = Searcher(info)
    try:
        queries = {"w": "wombat", "e": "echidna", "b": "Berlin"}
        by_contents = s.search(queries, k=10, fields={"contents": 1.0})
        by_document = s.search(queries, k=10, fields={"document": 1.0})
        by_entities = s.search(queries, k=10, fields={"entities": 1.0})
    finally:
        s.close()
    # units sharing a doc_id, and sentences sharing a passage, see each other's text
    assert [d for d, _ in by_contents["w"]] == ["D:g:2"]
    assert {d for d, _ in by_document["w"]} == {"D:g:1", "D:g:2"}
    assert {d for d, _ in by_document["e"]} == {"P:s:0:20", "P:s:21:40"}
    assert [d for d, _ in by_entities["b"]] == ["D:ent"]


def test_presets_and_default_query(ws):
    r = run_fields(coll(ws), runs_dir=ws / "runs", preset="doc", force=True)
    assert r.run_path.name == "fields-doc.test.trec"
    assert r.sidecar["parameters"]["fields"] == {"contents": 1.0, "document": 0.1}
    assert r.sidecar["parameters"]["query"] == "mention"
    assert docs(r, "q1")[0] == "P:exact"


def test_unknown_field_and_bad_weights():
    with pytest.raises(CmrkitError, match="unknown field 'text'"):
        parse_weights("text=1")
    with pytest.raises(CmrkitError, match="not a number"):
        parse_weights("contents=high")
    with pytest.raises(CmrkitError, match="above 0"):
        parse_weights("contents=0")
    assert parse_weights("title=0.5, contents=1") == {"contents": 1.0, "title": 0.5}


def test_rocchio_and_rm3_expand_the_query(ws):
    base = bm25(ws, "qe-base", query="mention")
    assert "D:catania" not in docs(base, "q1")
    for method in ("rocchio", "rm3"):
        r = run_qe(
            coll(ws),
            method=method,
            query="mention",
            fb_docs=2,
            fb_terms=20,
            runs_dir=ws / "runs",
            force=True,
        )
        # a unit sharing no word with the query, only with its feedback units
        assert "D:catania" in docs(r, "q1"), method
        assert "P:q1" not in docs(r, "q1")
        assert r.sidecar["parameters"]["qe"]["method"] == method
    # the formulation is not the system's default, so it is part of the default name
    rocchio = json.loads((ws / "runs" / "tiny" / "qe-rocchio-mention.test.json").read_text())
    assert (
        rocchio["parameters"]["qe"]["alpha"] == 0.9 and rocchio["parameters"]["qe"]["beta"] == 0.1
    )
    # the settings as one QE record: the same run (r is rm3's), and a name neither QE nor the
    # shared options know is refused
    feedback = QE(method="rm3", fb_docs=2, fb_terms=20)
    same = run_qe(coll(ws), query="mention", feedback=feedback, runs_dir=ws / "runs", force=True)
    assert same.run == r.run and same.sidecar["parameters"] == r.sidecar["parameters"]
    with pytest.raises(TypeError, match="fb_doc"):
        run_qe(coll(ws), fb_doc=2, runs_dir=ws / "runs")
    s = Searcher(open_index(coll(ws)))
    try:
        s.set_qe(feedback)
        terms = s.feedback_terms("erupted violently")
    finally:
        s.close()
    assert set(terms) - set(s.terms("erupted violently"))


def test_learned_weights_recorded_and_applied(ws):
    r = run_fields(
        coll(ws),
        runs_dir=ws / "runs",
        preset="mention",
        learn_weights=True,
        train_split="train",
        qrels_dir=ws / "qrels",
        force=True,
        tune_k=10,
    )
    side = json.loads(r.sidecar_path.read_text())
    learned = side["learned_weights"]
    # the train query's relevant unit matches through its title only
    assert learned.get("title", 0) > 0
    assert side["parameters"]["fields"] == learned
    trace = side["learning"]["trace"]
    assert trace[0]["weights"]["title"] == 0.0
    assert max(step["map"] for step in trace) > trace[0]["map"]
    assert "w=" in r.run_path.read_text().split()[5]
    assert r.run_path.name == "fields-learned.test.trec"


def test_learning_needs_train_qrels(ws):
    with pytest.raises(CmrkitError, match="no qrels for the train split 'dev'"):
        run_fields(
            coll(ws),
            runs_dir=ws / "runs",
            learn_weights=True,
            train_split="dev",
            qrels_dir=ws / "qrels",
            force=True,
        )


CONTEXT = (
    "Barack Obama met Angela Merkel in Berlin. Protests erupted violently in Berlin on "
    "Monday. Nobody was hurt."
)


def make_topic(mention: str):
    start = CONTEXT.index(mention)
    return Topic("x", "test", mention, CONTEXT, (start, start + len(mention)), "u")


def test_query_formulations():
    q = formulate([make_topic("erupted violently")], "mention+entities")["x"]
    assert q.startswith("erupted violently ")
    assert "Barack Obama" in q and "Angela Merkel" in q
    assert q.count("Berlin") == 1
    assert q.index("Barack Obama") < q.index("Angela Merkel") < q.index("Berlin")
    # an entity overlapping the mention is the mention itself: not repeated
    q = formulate([make_topic("Angela Merkel")], "mention+entities")["x"]
    assert q.startswith("Angela Merkel ") and q.count("Angela Merkel") == 1
    s = formulate([make_topic("erupted violently")], "sentence")["x"]
    assert s.strip() == "Protests erupted violently in Berlin on Monday."
    assert formulate([make_topic("Berlin")], "mention")["x"] == "Berlin"
    assert formulate([make_topic("Berlin")], "context")["x"] == CONTEXT


def test_bad_inputs(ws, tmp_path):
    with pytest.raises(CmrkitError, match="no such collection"):
        run_bm25(tmp_path / "nowhere", runs_dir=tmp_path / "runs")
    bare = write_collection(tmp_path, "bare", UNITS[:3], TOPICS[:1])
    with pytest.raises(CmrkitError, match="cmrkit index"):
        run_bm25(bare, runs_dir=tmp_path / "runs", auto_index=False)
    assert not (bare / "index").exists()
    with pytest.raises(CmrkitError, match="no topics in split 'dev'"):
        run_bm25(coll(ws), split="dev", runs_dir=tmp_path / "runs")
    with pytest.raises(CmrkitError, match="unknown query formulation"):
        run_bm25(coll(ws), query="title", runs_dir=tmp_path / "runs")
    # an up-to-date index is kept; one with other settings is a conflict
    stamp = (coll(ws) / "index" / "cmrkit-index.json").stat().st_mtime_ns
    assert build_index(coll(ws)).up_to_date
    assert (coll(ws) / "index" / "cmrkit-index.json").stat().st_mtime_ns == stamp
    with pytest.raises(CmrkitError, match="other settings .* --force"):
        build_index(coll(ws), entities=False)
    with pytest.raises(CmrkitError, match="no 'chain' field"):
        run_fields(coll(ws), weights={"chain": 1.0}, runs_dir=tmp_path / "runs")
    with pytest.raises(CmrkitError, match="coreference chain"):
        run_fields(coll(ws), weights={"contents": 1.0}, query="chain", runs_dir=tmp_path / "r")


def test_stale_index_refused_then_rebuilt(tmp_path):
    c = write_collection(tmp_path, "stale", UNITS[:4], TOPICS[:1])
    build_index(c, entities=False, progress=False)
    write_collection(tmp_path, "stale", UNITS[:5], TOPICS[:1])
    with pytest.raises(CmrkitError, match="stale index"):
        run_bm25(c, runs_dir=tmp_path / "runs", query="mention", auto_index=False)
    with pytest.raises(CmrkitError, match="another corpus"):
        build_index(c, entities=False)
    build_index(c, entities=False, force=True, progress=False)
    r = run_bm25(c, runs_dir=tmp_path / "runs", query="mention")
    assert docs(r, "q1")[0] == "P:exact"
    assert "D:t:2" in docs(r, "q1")


def test_run_builds_a_missing_or_stale_index_first(tmp_path, capsys):
    c = write_collection(tmp_path, "auto", UNITS[:5], TOPICS[:1])
    r = run_bm25(c, runs_dir=tmp_path / "runs", query="mention")
    assert "has no index: building it first" in capsys.readouterr().err
    assert docs(r, "q1")[0] == "P:exact" and open_index(c).manifest["settings"]["entities"]
    write_collection(tmp_path, "auto", UNITS[:6], TOPICS[:1])
    r = run_bm25(c, runs_dir=tmp_path / "runs", query="mention", force=True)
    assert "has a stale index" in capsys.readouterr().err
    assert open_index(c).manifest["n_units"] == 6 and "D:catania" not in docs(r, "q1")


def test_split_defaults_to_test_else_the_only_split(tmp_path):
    one = write_collection(tmp_path, "one", UNITS[:5], [dict(TOPICS[4], unit="D:t:1")])
    r = run_bm25(one, runs_dir=tmp_path / "runs", query="mention")
    assert r.run_path.name == "bm25-mention.train.trec" and r.sidecar["split"] == "train"
    two = [dict(t, split="dev") for t in TOPICS[:2]] + [dict(TOPICS[4], unit="D:t:1")]
    c = write_collection(tmp_path, "two", UNITS[:5], two)
    with pytest.raises(CmrkitError, match="no test split; choose one of dev, train with --split"):
        run_bm25(c, runs_dir=tmp_path / "runs", auto_index=False)


def test_cli_errors_are_one_line(ws, tmp_path):
    runner = CliRunner()
    res = runner.invoke(
        app, ["run", "fields", str(coll(ws)), "--weights", "bogus=1", "--runs-dir", str(tmp_path)]
    )
    assert res.exit_code == 2
    err = res.stderr if hasattr(res, "stderr") else res.output
    assert err.strip().startswith("error:") and "unknown field 'bogus'" in err
    assert "Traceback" not in res.output
    res = runner.invoke(app, ["run", "bm25", str(tmp_path / "none"), "--runs-dir", str(tmp_path)])
    assert res.exit_code == 2 and "no such collection" in res.stderr


def test_cli_run_hides_java_output(ws, tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cmrkit",
            "run",
            "bm25",
            str(coll(ws)),
            "--query",
            "mention",
            "-k",
            "5",
            "--runs-dir",
            str(tmp_path),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    # the only thing on stderr is cmrkit's own note about the empty query
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [
        f"1 query warning(s) recorded in {tmp_path / 'tiny' / 'bm25-mention.test.json'}"
    ]
    assert "wrote" in proc.stdout
    side = json.loads((tmp_path / "tiny" / "bm25-mention.test.json").read_text())
    assert side["command"][:3] == ["cmrkit", "run", "bm25"]
    assert side["command"][-2:] == ["--split", "test"]  # the split it chose, spelled out
    lines = (tmp_path / "tiny" / "bm25-mention.test.trec").read_text().splitlines()
    assert lines and all(len(line.split()) == 6 for line in lines)


def test_relative_paths_after_chdir(ws, monkeypatch):
    # the JVM keeps the working folder it started in; cmrkit must hand it absolute paths
    monkeypatch.chdir(ws)
    r = run_bm25(
        Path("collections/tiny"),
        runs_dir=Path("runs"),
        name="relative",
        force=True,
        query="mention",
    )
    assert docs(r, "q1")[0] == "P:exact"
    assert (ws / "runs" / "tiny" / "relative.test.trec").exists()


def test_bare_collection_names_as_status_takes_them(ws, monkeypatch, tmp_path):
    """`cmrkit status sample` worked while `run bm25 sample` and `index sample` said "no such
    collection folder": a bare NAME is collections/NAME for every command."""
    monkeypatch.chdir(ws)
    runner = CliRunner()
    res = runner.invoke(app, ["index", "tiny"])
    assert res.exit_code == 0, res.output
    assert "up to date" in res.output or "indexed" in res.output
    res = runner.invoke(app, ["run", "bm25", "tiny", "--query", "mention", "--name", "bare"])
    assert res.exit_code == 0, res.output
    assert read_run(ws / "runs" / "tiny" / "bare.test.trec")["q1"]
    assert not (ws / "runs" / "collections").exists()
    # a folder of that name here wins; a name found nowhere is refused, saying where it looked
    res = runner.invoke(app, ["run", "bm25", "missing", "--runs-dir", str(tmp_path)])
    assert res.exit_code == 2 and "collections/" in res.stderr
    from cmrkit.evaluation.units import read_annotated_units

    assert read_annotated_units("tiny").mentions == read_annotated_units(coll(ws)).mentions
