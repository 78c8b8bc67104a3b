"""`cmrkit cluster COLLECTION` (lemma, head-lemma, lh within scopes), `cmrkit coref-table`, and
average-link clustering against scikit-learn, on the real ECB+ release."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from coref_fixtures import need_perl, run_perl

from cmrkit.collection.clusters import write_conll
from cmrkit.coref.agglomerative import average_link

RELEASE = Path(__file__).resolve().parents[2] / "shared" / "data" / "ecbplus" / "ECB+.zip"
TABLE9 = {  # Hsu & Horwood 2022, the lemma baseline on ECB+ test events: CoNLL F1
    ("topic", "with"): 71.9,
    ("topic", "without"): 58.1,
    ("corpus", "with"): 62.4,
    ("corpus", "without"): 50.4,
}


@pytest.fixture(scope="module")
def ecb(tmp_path_factory):
    if not RELEASE.is_file():
        pytest.skip(f"the ECB+ release is not at {RELEASE}")
    from typer.testing import CliRunner

    from cmrkit.cli import app

    root = tmp_path_factory.mktemp("ecb")
    import os

    cwd = os.getcwd()
    os.chdir(root)
    try:
        runner = CliRunner()

        def run(*args):
            return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

        assert run("build-collection", "--source", "ecbplus", "-i", RELEASE).exit_code == 0
        for within in ("topic", "corpus"):
            r = run("cluster", "ecbplus", "--method", "lemma", "--within", within)
            assert r.exit_code == 0, r.output
        yield root, run
    finally:
        os.chdir(cwd)


def test_the_lemma_baseline_reproduces_hsu_and_horwood_within_1_5(ecb):
    root, run = ecb
    runs = [f"runs/ecbplus/lemma.{w}.test.clusters.jsonl" for w in ("topic", "corpus")]
    r = run("coref-table", "qrels/ecbplus.test.clusters.jsonl", *runs, "-f", "json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["rows"]
    assert [(x["system"], x["scope"], x["singletons"]) for x in rows] == [
        ("lemma", "topic", "with"), ("lemma", "topic", "without"),
        ("lemma", "corpus", "with"), ("lemma", "corpus", "without"),
    ]  # fmt: skip
    for x in rows:
        assert abs(100 * x["conll"] - TABLE9[(x["scope"], x["singletons"])]) < 1.5, x
    again = run("cluster", "ecbplus", "--method", "lemma", "--within", "topic")
    assert again.exit_code == 0 and "is up to date" in again.stderr


def test_the_table_with_singletons_is_the_reference_scorers(ecb, tmp_path):
    """Topic 36's key and lemma response (the scorer's CEAF is slow on all 1,780 mentions as
    one document) written as one CoNLL document each: scorer.pl's MUC, B3 and CEAF-e F1 as
    printed are the table's."""
    need_perl()
    root, run = ecb
    key = [json.loads(x) for x in (root / "qrels/ecbplus.test.clusters.jsonl").open()]
    key = [k for k in key if k["topic"] == "36"]
    resp_path = root / "runs/ecbplus/lemma.topic.test.clusters.jsonl"
    response = {x["mention_id"]: str(x["cluster"]) for x in map(json.loads, resp_path.open())}
    mine = {k["mention_id"] for k in key}
    (tmp_path / "key.jsonl").write_text("".join(json.dumps(k) + "\n" for k in key))
    (tmp_path / "resp.jsonl").write_text(
        "".join(
            json.dumps({"cluster": c, "mention_id": m}) + "\n"
            for m, c in response.items()
            if m in mine
        )
    )
    for name, chain in (
        ("key", lambda k: k["cluster"]),
        ("resp", lambda k: response[k["mention_id"]]),
    ):
        labels: dict[str, str] = {}
        spans = [(i, i, labels.setdefault(chain(k), str(len(labels)))) for i, k in enumerate(key)]
        with open(tmp_path / f"{name}.conll", "w") as f:
            write_conll(f, [("ecb", len(key), spans)])
    perl = run_perl(tmp_path / "key.conll", tmp_path / "resp.conll", "all")
    r = run("coref-table", tmp_path / "key.jsonl", tmp_path / "resp.jsonl", "--singletons", "with",
            "-f", "csv")  # fmt: skip
    assert r.exit_code == 0, r.output
    f1 = {
        row.split(",")[3]: float(row.split(",")[6])
        for row in r.stdout.splitlines()[1:]
        if row.split(",")[3] in ("muc", "bcub", "ceafe")
    }
    from cmrkit.evaluation.coref import perl_percent

    assert len(key) > 100
    assert {m: perl_percent(v) for m, v in f1.items()} == {
        m: f"{perl[m][6]:.2f}" for m in ("muc", "bcub", "ceafe")
    }


def test_predicted_topics_and_lh_and_head_lemma_run(ecb):
    root, run = ecb
    r = run("cluster", "ecbplus", "--method", "lh", "--within", "predicted")
    assert r.exit_code == 0, r.output
    assert "predicted topics:" in r.stderr and "purity 1.000" in r.stderr
    sidecar = json.loads((root / "runs/ecbplus/lh.predicted.test.clusters.json").read_text())
    assert sidecar["method"] == "lh" and sidecar["predicted_topics"]["documents"] == 206
    r = run("cluster", "ecbplus", "--method", "head-lemma", "--within", "subtopic", "-o", "h.jsonl")
    assert r.exit_code == 0 and (root / "h.jsonl").is_file()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--method", "lemma", "--topic-threshold", "2"], "--topic-threshold 2.0 is outside"),
        (["--method", "lh", "--jaccard", "1.5"], "--jaccard 1.5 is outside"),
        (["--method", "lemma", "--top", "3"], "--top: for clustering a run"),
        ([], "a collection is clustered by --method lemma"),
    ],
)
def test_bad_options_are_one_line_and_write_nothing(ecb, args, said):
    root, run = ecb
    r = run("cluster", "ecbplus", "--within", "predicted", "-o", "bad.jsonl", *args)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and said in r.stderr, r.stderr
    assert not (root / "bad.jsonl").exists()


def test_predicted_topics_need_two_documents(cli, tmp_path):
    from conftest import wec_record, write_json

    tokens = "The ship was hijacked and then the ship was freed .".split()
    recs = [wec_record(f"m{i}", "c1" if i < 2 else f"s{i}", "doc1", tokens, [j])
            for i, j in enumerate((3, 9, 1))]  # fmt: skip
    write_json(tmp_path / "test.json", recs)
    r = cli("build-collection", "-i", "test=test.json", "-n", "one", "--unit", "mention")
    assert r.exit_code == 0, r.output
    r = cli("cluster", "one", "--method", "lemma", "--within", "predicted")
    assert r.exit_code == 2 and "split 'test' has 1; use --within corpus" in r.stderr
    r = cli("cluster", "one", "--method", "lemma", "--within", "corpus")  # from the units
    assert r.exit_code == 0, r.output
    r = cli("cluster", "one", "--method", "lemma", "--within", "topic")
    assert r.exit_code == 2 and "topic_id" in r.stderr


def _clustered(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n // 8, 128))
    return centers[rng.integers(0, len(centers), n)] + rng.normal(scale=0.8, size=(n, 128))


@pytest.mark.parametrize("threshold", [0.3, 0.5])
def test_average_link_equals_scikit_learns(threshold):
    from sklearn.cluster import AgglomerativeClustering

    x = _clustered(400, 3)
    ours = average_link(x, threshold)
    theirs = AgglomerativeClustering(
        n_clusters=None, metric="cosine", linkage="average", distance_threshold=1 - threshold
    ).fit(x)
    assert ours.exact
    same = {(a, b) for a, b in zip(ours.labels.tolist(), theirs.labels_.tolist(), strict=True)}
    assert len(same) == len(set(ours.labels.tolist())) == len(set(theirs.labels_.tolist()))
    sparse = average_link(x, threshold, exact_limit=100, neighbours=40)
    assert sparse.exact and sparse.components > 1
    assert np.array_equal(sparse.labels, ours.labels)


def test_a_component_past_the_dense_limit_is_clustered_on_the_graph():
    x = _clustered(300, 5)
    approx = average_link(x, 0.05, exact_limit=20, neighbours=10)
    assert not approx.exact and approx.approximate > 0
    assert len(approx.labels) == 300 and approx.labels.min() == 0
    with pytest.raises(ValueError):
        average_link(x, 1.5)
