"""The shipped sample built, indexed and run by three real Lucene systems, pooled at depth 5,
and labels written from its gold qrels with noise: the inputs of the judge-check and hybrid
judging tests (the judges themselves are tested in test_judging_*.py with real judges)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cmrkit.cli import app
from cmrkit.fileio import sha256_file
from cmrkit.judgments.auto.labels import Label, sidecar_path, write_labels
from cmrkit.pooling import read_pool
from cmrkit.trec import read_qrels

SYSTEMS = (("bm25",), ("fields", "--preset", "doc"), ("qe", "--method", "rm3"))
RUNS = ("bm25", "fields-doc", "qe-rm3")
IDENTITY = "a1" * 32  # the judge's model sha256 in the labels' sidecar (its reader)


def invoke(*args) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


_BUILT: dict[str, Path] = {}


def sample_root(tmp_path_factory) -> Path:
    """collections/sample, qrels/sample.test.txt, runs/sample/{bm25,fields-doc,qe-rm3}.test.trec
    and pool.jsonl (their depth-5 pool) in one folder, built once per test session."""
    if "root" in _BUILT:
        return _BUILT["root"]
    root = tmp_path_factory.mktemp("judging-sample")
    mp = pytest.MonkeyPatch()
    mp.chdir(root)
    try:
        invoke("build-collection")
        invoke("index", "--no-entities", "--quiet")
        for system in SYSTEMS:
            invoke("run", *system)
        invoke("pool", "create", *(f"runs/sample/{r}.test.trec" for r in RUNS), "--depth", "5",
               "-o", "pool.jsonl")  # fmt: skip
    finally:
        mp.undo()
    _BUILT["root"] = root
    return root


def run_paths(root: Path) -> list[Path]:
    return [root / "runs" / "sample" / f"{r}.test.trec" for r in RUNS]


def noisy_labels(
    root: Path, path: Path, *, flip: float = 0.1, seed: int = 0, judge: str = "auto:reader"
) -> list[Label]:
    """Labels of every pool pair from the gold qrels, each flipped with probability ``flip``:
    probability of relevance drawn around the (flipped) truth, Likert from the probability;
    and the sidecar (judge identity, the pool's sha256) beside them."""
    pool = read_pool(root / "pool.jsonl")
    truth = read_qrels(root / "qrels" / "sample.test.txt")
    rng = random.Random(seed)
    labels = []
    for p in pool.pairs:
        relevant = truth.get(p.qid, {}).get(p.docno, 0) > 0
        if rng.random() < flip:
            relevant = not relevant
        prob = rng.uniform(0.55, 0.999) if relevant else rng.uniform(0.001, 0.45)
        likert = (
            5 if prob > 0.8 else 4 if prob >= 0.5 else 3 if prob > 0.3 else 2 if prob > 0.1 else 1
        )
        labels.append(Label(p.qid, p.docno, judge, likert, round(prob, 6)))
    write_labels(labels, path)
    sidecar = {
        "judge": {
            "kind": judge.split(":", 1)[1],
            "identity": "c3" * 32,  # the sha256 of the judge's parameters, as judgments auto
            "parameters": {"model": {"path": "models/reader", "sha256": IDENTITY}},
        },
        "pool": {"path": str(root / "pool.jsonl"), "sha256": sha256_file(root / "pool.jsonl")},
        "pairs": len(labels),
        "labelled": len(labels),
    }
    sidecar_path(path).write_text(json.dumps(sidecar), encoding="utf-8")
    return labels
