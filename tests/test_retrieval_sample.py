"""The baselines on the shipped ECB+ sample, end to end through the CLI (real Lucene)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cmrkit.cli import app
from cmrkit.collection.layout import read_topics
from cmrkit.trec import read_qrels, read_run


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    """A working folder with collections/sample built and indexed (no NER, for speed)."""
    root = tmp_path_factory.mktemp("sample")
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    runner = CliRunner()
    res = runner.invoke(app, ["build-collection"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["index", "--no-entities", "--quiet"])
    assert res.exit_code == 0, res.output
    yield root
    mp.undo()


def invoke(*args: str):
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output + (res.stderr or "")
    return res


def average_precision(ranking: list[str], relevant: set[str]) -> float:
    hits, total = 0, 0.0
    for i, docno in enumerate(ranking, 1):
        if docno in relevant:
            hits += 1
            total += hits / i
    return total / len(relevant) if relevant else 0.0


def mean_ap(run: dict[str, dict[str, float]], qrels) -> float:
    aps = []
    for qid, judged in qrels.items():
        docs = sorted(run.get(qid, {}).items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
        aps.append(average_precision([d for d, _ in docs], {d for d, r in judged.items() if r > 0}))
    return sum(aps) / len(aps)


def test_three_baseline_families_on_the_sample(sample):
    invoke("run", "bm25", "--query", "mention", "-k", "30", "--quiet")
    invoke("run", "fields", "--preset", "doc", "-k", "30", "--quiet")
    invoke(
        "run",
        "qe",
        "--method",
        "rocchio",
        "--base",
        "fields",
        "--preset",
        "doc",
        "-k",
        "30",
        "--fb-docs",
        "3",
        "--quiet",
    )
    topics = {t.qid: t for t in read_topics(sample / "collections" / "sample", "test")}
    qrels = read_qrels(sample / "qrels" / "sample.test.txt")
    for name in ("bm25-mention", "fields-doc", "qe-rocchio-fields-doc"):
        path = sample / "runs" / "sample" / f"{name}.test.trec"
        run = read_run(path)
        side = json.loads(path.with_suffix(".json").read_text())
        assert side["n_queries"] == len(topics)
        warned = {w["qid"] for w in side["warnings"]}
        assert set(run) | warned == set(topics)
        for qid, docs in run.items():
            assert topics[qid].unit not in docs
            assert len(docs) <= 30
        # far better than the same candidates in random order
        shuffled = {}
        rng = random.Random(7)
        for qid, docs in run.items():
            scores = list(docs.values())
            rng.shuffle(scores)
            shuffled[qid] = dict(zip(docs, scores, strict=True))
        assert mean_ap(run, qrels) > mean_ap(shuffled, qrels) + 0.05, name


def test_learned_weights_on_the_sample(sample):
    invoke(
        "run",
        "fields",
        "--learn-weights",
        "--train-split",
        "dev",
        "--query",
        "mention",
        "--preset",
        "mention",
        "-k",
        "30",
        "--tune-k",
        "10",
        "--quiet",
    )
    side = json.loads((sample / "runs" / "sample" / "fields-learned.test.json").read_text())
    assert side["learned_weights"] == side["parameters"]["fields"]
    trace = side["learning"]["trace"]
    best = max(step["map"] for step in trace)
    learned = {f: w for f, w in trace[0]["weights"].items()}
    assert best >= trace[0]["map"]
    assert learned["contents"] == 1.0
    # the sidecar's command, rerun, gives the same run
    command = side["command"]
    assert command[:3] == ["cmrkit", "run", "fields"] and "--learn-weights" in command
    first = (sample / "runs" / "sample" / "fields-learned.test.trec").read_bytes()
    invoke(*command[1:], "--force", "--quiet")
    assert (sample / "runs" / "sample" / "fields-learned.test.trec").read_bytes() == first


def test_reruns_are_byte_identical_on_the_sample(sample):
    invoke("run", "bm25", "--query", "mention", "-k", "50", "--name", "again", "--quiet")
    first = (sample / "runs" / "sample" / "again.test.trec").read_bytes()
    invoke(
        "run",
        "bm25",
        "--query",
        "mention",
        "-k",
        "50",
        "--name",
        "again",
        "--force",
        "--threads",
        "1",
        "--quiet",
    )
    assert (sample / "runs" / "sample" / "again.test.trec").read_bytes() == first


def test_feedback_without_term_vectors_equals_feedback_with_them(sample, tmp_path):
    """cmrkit's index stores the contents, not term vectors; RM3 and Rocchio analyse the
    feedback units' stored text again. On real ECB+ text (stemming, numbers, long and non-ASCII
    tokens) the expanded rankings equal those from an index of the same corpus with vectors."""
    import shutil

    from cmrkit.retrieval import QE, Searcher, build_index, open_index

    ours = sample / "collections" / "sample"
    theirs = tmp_path / "sample"
    shutil.copytree(ours, theirs, ignore=shutil.ignore_patterns("index"))
    build_index(theirs, entities=False, progress=False, docvectors=True)
    topics = read_topics(ours, "test")[:300]
    queries = {t.qid: t.context for t in topics} | {t.qid + "m": t.mention for t in topics}
    for qe, fields in (
        (QE(method="rm3", fb_docs=20, fb_terms=30), None),
        (QE(method="rocchio"), {"contents": 1.0, "document": 0.1}),
    ):
        runs = []
        for coll in (ours, theirs):
            s = Searcher(open_index(coll))
            try:
                s.set_qe(qe)
                runs.append(s.search(queries, k=100, fields=fields, threads=2))
            finally:
                s.close()
        assert runs[0] == runs[1], qe.method
        assert sum(map(len, runs[0].values())) > 50 * len(queries)
    assert "docvectors" not in open_index(ours).manifest["settings"]["stored"]
