"""``cmrkit train coref``: Hsu & Horwood's (2022) contrastive mention encoder, trained on a
collection's annotated mentions (``coref/encoder.py`` holds its input and network).

- **Pairs**, chosen within gold topics from the base encoder's view of every train mention
  (each embedded once, ``encoder.encode(heads=False)``): for each mention, the ``positives``
  least similar mentions of its chain (positives), and the ``negatives`` most similar
  mentions of other chains in its own subtopic and as many in the topic's other subtopics
  (negatives); the negatives are down-sampled to those more similar than the positives'
  median similarity. A pair chosen from both of its mentions counts once.
- **Batches**: a batch holds at most ``batch_size`` mentions of one topic and every remaining
  pair among them; it grows from a pair drawn at random by the mention closing the most
  remaining pairs with it (ties: a seeded order), so a mention is encoded once for all its
  pairs in the batch. Each epoch packs every pair once, afresh.
- **Loss**: contrastive, ``y d^2 + (1 - y) max(0, margin - d)^2`` with ``d = 1 - cos``, the mean
  over the batch's pairs. AdamW (weight decay but on biases and LayerNorm weights), the MLPs at
  ``head_lr``, linear warm-up then decay, gradient norm clipped at 1 (``retrieval/training``).
- **Threshold**: after each epoch the dev split's mentions are encoded and clustered within
  their gold topics by average link at each threshold of the grid; the best CoNLL F1 (with
  singletons, ``evaluation/coref.py``) after the last epoch is the threshold stored with the
  model (``--threshold`` of ``cmrkit cluster --method embedding`` defaults to it).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import cmrkit.retrieval.training as training
from cmrkit.collection import layout
from cmrkit.coref.mentions import CorefMentions, read_mentions
from cmrkit.coref.options import DEFAULT_THRESHOLD, CorefTrainOptions
from cmrkit.errors import CmrkitError
from cmrkit.fileio import sha256_file
from cmrkit.retrieval.dense.options import DEFAULT_MODEL

THRESHOLD_GRID = tuple(round(0.05 * i, 2) for i in range(-4, 20))  # -0.2 .. 0.95
DEV_MEASURES = ("CoNLL",)


@dataclass
class Pairs:
    """The training pairs (mention indexes ``i < j``, label 1 coreferent, the base encoder's
    cosine) and how many each step of the choice found."""

    i: np.ndarray
    j: np.ndarray
    label: np.ndarray
    similarity: np.ndarray
    counts: dict[str, Any]


def _groups(values: Sequence[Any]) -> list[np.ndarray]:
    """Indexes of equal values, groups in order of first appearance."""
    found: dict[Any, list[int]] = {}
    for n, v in enumerate(values):
        found.setdefault(v, []).append(n)
    return [np.asarray(g, dtype=np.int64) for g in found.values()]


def _extreme(sims: np.ndarray, allowed: np.ndarray, k: int, most: bool) -> np.ndarray:
    """The positions of the ``k`` allowed entries of ``sims`` most (or least) similar, ties by
    position."""
    where = np.flatnonzero(allowed)
    if not len(where) or k <= 0:
        return where[:0]
    key = -sims[where] if most else sims[where]
    return where[np.lexsort((where, key))[:k]]


def select_pairs(
    vectors: np.ndarray,
    chains: Sequence[str],
    topics: Sequence[str],
    subtopics: Sequence[str],
    positives: int,
    negatives: int,
) -> Pairs:
    """Hsu & Horwood's training pairs, within each topic (see the module's docstring)."""
    x = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    x = np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)
    chosen: dict[tuple[int, int], tuple[int, float]] = {}
    for group in _groups(topics):
        s = x[group] @ x[group].T
        chain = np.asarray([chains[g] for g in group], dtype=object)
        sub = np.asarray([subtopics[g] for g in group], dtype=object)
        for a in range(len(group)):
            same = chain == chain[a]
            same[a] = False
            other = chain != chain[a]
            picks = [(b, 1) for b in _extreme(s[a], same, positives, most=False)]
            for side in (sub == sub[a], sub != sub[a]):
                picks += [(b, 0) for b in _extreme(s[a], other & side, negatives, most=True)]
            for b, y in picks:
                u, v = sorted((int(group[a]), int(group[b])))
                chosen[(u, v)] = (y, float(s[a, b]))
    keys = sorted(chosen)
    label = np.asarray([chosen[k][0] for k in keys], dtype=np.int64)
    sims = np.asarray([chosen[k][1] for k in keys], dtype=np.float64)
    median = float(np.median(sims[label == 1])) if (label == 1).any() else float("-inf")
    keep = (label == 1) | (sims > median)
    pairs = np.asarray(keys, dtype=np.int64).reshape(-1, 2)[keep]
    negative = label[keep] == 0
    same_sub = np.asarray([subtopics[a] == subtopics[b] for a, b in pairs.tolist()], dtype=bool)
    counts = {
        "positives": int((label == 1).sum()),
        "negatives_chosen": int((label == 0).sum()),
        "positive_median_similarity": round(median, 6),
        "negatives": int(negative.sum()),
        "negatives_within_subtopic": int((negative & same_sub).sum()),
        "negatives_across_subtopics": int((negative & ~same_sub).sum()),
    }
    counts["pairs"] = counts["positives"] + counts["negatives"]
    return Pairs(pairs[:, 0], pairs[:, 1], label[keep], sims[keep], counts)


Batch = tuple[tuple[int, ...], tuple[tuple[int, int, int], ...]]  # mentions, (a, b, y) in them


def pack_batches(pairs: Pairs, size: int, rng: random.Random) -> list[Batch]:
    """Every pair once, in batches of at most ``size`` mentions (see the module's docstring):
    each batch's mentions and its pairs as positions in them with their labels."""
    n_pairs = len(pairs.i)
    ends = list(zip(pairs.i.tolist(), pairs.j.tolist(), strict=True))
    touching: dict[int, list[int]] = {}
    for p, (a, b) in enumerate(ends):
        touching.setdefault(a, []).append(p)
        touching.setdefault(b, []).append(p)
    nodes = sorted(touching)
    rank = dict(zip(nodes, rng.sample(range(len(nodes)), len(nodes)), strict=True))
    done = np.zeros(n_pairs, dtype=bool)
    batches: list[Batch] = []
    for start in rng.sample(range(n_pairs), n_pairs):
        if done[start]:
            continue
        members = _grown(list(ends[start]), ends, touching, done, rank, size)
        inside = set(members)
        position = {m: k for k, m in enumerate(members)}
        found = []
        for node in members:
            for p in touching[node]:
                a, b = ends[p]
                if not done[p] and a in inside and b in inside:
                    done[p] = True
                    found.append((position[a], position[b], int(pairs.label[p])))
        batches.append((tuple(members), tuple(found)))
    return batches


def _grown(
    members: list[int],
    ends: list[tuple[int, int]],
    touching: dict[int, list[int]],
    done: np.ndarray,
    rank: dict[int, int],
    size: int,
) -> list[int]:
    """``members`` grown to at most ``size`` by the mention closing the most remaining pairs
    with them (ties: the lower ``rank``), while one closes any."""
    inside = set(members)
    gain: dict[int, int] = {}

    def add(node: int) -> None:
        gain.pop(node, None)
        for p in touching[node]:
            if done[p]:
                continue
            a, b = ends[p]
            other = b if a == node else a
            if other not in inside:
                gain[other] = gain.get(other, 0) + 1

    for node in members:
        add(node)
    while len(members) < size and gain:
        best = max(gain, key=lambda u: (gain[u], -rank[u]))
        members.append(best)
        inside.add(best)
        add(best)
    return members


def contrastive_loss(u: Any, v: Any, y: Any, margin: float) -> Any:
    """The mean of ``y d^2 + (1 - y) max(0, margin - d)^2``, ``d = 1 - cos(u, v)``."""
    import torch

    d = 1.0 - torch.nn.functional.cosine_similarity(u, v, dim=-1)
    return (y * d.pow(2) + (1 - y) * torch.clamp(margin - d, min=0).pow(2)).mean()


def topic_clusters(
    vectors: np.ndarray, mentions: CorefMentions, threshold: float, within: str = "topic"
) -> np.ndarray:
    """Cluster labels of the mentions' vectors by average link within ``within``."""
    from cmrkit.coref.cluster import cluster_vectors
    from cmrkit.coref.scopes import scope

    return cluster_vectors(vectors, scope(mentions, within).groups, threshold)


def conll_f1(mentions: CorefMentions, labels: np.ndarray) -> float:
    """CoNLL F1 (fraction) of a clustering of the mentions against their chains, all
    documents as one, singletons kept (``evaluation/coref.py``, the reference scorer's)."""
    from cmrkit.collection.clusters import CORPUS_DOCUMENT, ID, Clustering, Document
    from cmrkit.evaluation.coref import score

    def clustering(name: str, chains: Sequence[str]) -> Clustering:
        doc = Document(CORPUS_DOCUMENT)
        for line, (m, c) in enumerate(zip(mentions.mentions, chains, strict=True), 1):
            doc.add(m.mention_id, doc.chain(c), line)
        return Clustering(name, "jsonl", ID, {CORPUS_DOCUMENT: doc})

    key = clustering("key", [m.cluster for m in mentions.mentions])
    response = clustering("response", [str(x) for x in labels.tolist()])
    result = score(key, response, ["conll"], scope="corpus", singletons="keep")
    return float(result.total["conll"])  # type: ignore[arg-type]


def tune_threshold(
    vectors: np.ndarray, mentions: CorefMentions, grid: Sequence[float] = THRESHOLD_GRID
) -> tuple[float, float, dict[str, float]]:
    """The grid's threshold of the best CoNLL F1 within gold topics (ties: the lower
    threshold), that F1 and every threshold's (keys as ``f"{t:g}"``)."""
    table: dict[str, float] = {}
    best = (float("-inf"), 0.0)
    for t in grid:
        f1 = round(conll_f1(mentions, topic_clusters(vectors, mentions, t)), 6)
        table[f"{t:g}"] = f1
        if f1 > best[0]:
            best = (f1, float(t))
    return best[1], best[0], table


def _dev_split(coll: Path, train_split: str, dev_split: str | None) -> CorefMentions | None:
    """The dev split's mentions: ``dev`` when the collection has it (and it is not the train
    split), the named one, or none (``"none"``)."""
    if dev_split == "none":
        return None
    if dev_split is None:
        if train_split == "dev":
            return None
        try:
            return read_mentions(coll, "dev")
        except CmrkitError:
            return None
    if dev_split == train_split:
        raise CmrkitError(f"--dev-split {dev_split!r} is the train split; name another or none")
    return read_mentions(coll, dev_split)


def train_coref(
    collection: str | Path,
    output: str | Path,
    *,
    model: str = DEFAULT_MODEL,
    markers: tuple[str, str] | None = None,
    device: str = "auto",
    train: CorefTrainOptions | None = None,
    plot: bool = False,
    force: bool = False,
    progress: bool = True,
    argv: list[str] | None = None,
) -> training.TrainedModel:
    """Train the contrastive mention encoder (base: a local Hugging Face encoder folder, default
    the offline MiniLM) on the train split's mentions; save it to ``output``."""
    from cmrkit.coref.encoder import HEADS, METADATA
    from cmrkit.retrieval.dense.options import DEFAULT_MARKERS
    from cmrkit.retrieval.neural import quiet_hub

    quiet_hub()
    started = time.perf_counter()
    opts = train or CorefTrainOptions()
    opts.check()
    coll = layout.collection_dir(collection)
    out = Path(output)
    marks = markers or DEFAULT_MARKERS
    files = [HEADS, "encoder/config.json"]
    with training.ModelFolder(
        out, kind="coref-model", metadata=METADATA, files=files, force=force
    ) as folder:
        folder.check_options(training.options_record(opts), derived=("dev_split",))
        session = _Training.prepare(coll, opts, model, marks, device)
        kept = folder.kept(session.metadata(), varying=_VARYING)
        if kept is not None:
            if plot:
                folder.plot(kept, _plot)
            stored = json.loads((out / METADATA).read_text(encoding="utf-8"))
            return training.TrainedModel(out, stored, kept, up_to_date=True)
        trained, log = session.fit(progress, argv, started)
        target = folder.target()
        target.mkdir(parents=True, exist_ok=True)
        session.save(target, trained)
        folder.finish(log, _plot if plot else None)
        return training.TrainedModel(out, trained, log)


# known only once the pairs are chosen and the model trained (the same inputs give the same)
_VARYING = ("data.pairs", "threshold", "parameters.steps", "parameters.sequences")


@dataclass
class _Training:
    """One training: :meth:`prepare` reads the mentions and loads the base encoder (cheap, so
    an up-to-date folder is found at once); :meth:`fit` embeds the train mentions, chooses the
    pairs, trains, tunes the threshold; :meth:`save` writes the folder."""

    coll: Path
    opts: CorefTrainOptions
    base: Any  # ModelRef
    markers: tuple[str, str]
    device: str
    train: CorefMentions
    dev: CorefMentions | None
    hashes: dict[str, str]
    net: Any = None
    tokenizer: Any = None
    items: list[Any] | None = None
    pairs: Pairs | None = None
    dev_items: list[Any] | None = None
    dev_tuned: tuple[float, float, dict[str, float]] | None = None
    timings: dict[str, float] | None = None
    n_sequences: int = 0
    steps: int = 0

    @classmethod
    def prepare(
        cls,
        coll: Path,
        opts: CorefTrainOptions,
        model: str,
        markers: tuple[str, str],
        device: str,
    ) -> _Training:
        from cmrkit.retrieval.dense.models import resolve_model
        from cmrkit.retrieval.neural import resolve_device

        if not layout.mentions_path(coll).is_file():
            raise CmrkitError(
                f"has no {layout.MENTIONS}: `train coref` reads the mentions, topics and "
                "documents a collection built from ECB+ or uCDCR keeps (build-collection "
                "--source ecbplus|ucdcr)",
                path=coll,
            )
        train = read_mentions(coll, opts.train_split)
        train.require("topic", "topic_id", "train coref (pairs are chosen within topics)")
        dev = _dev_split(coll, opts.train_split, opts.dev_split)
        if dev is not None:
            dev.require("topic", "topic_id", "train coref (the threshold is tuned within topics)")
        base = resolve_model(model)
        hashes = {"mentions_sha256": sha256_file(layout.mentions_path(coll))}
        if layout.documents_path(coll).is_file():
            hashes["documents_sha256"] = sha256_file(layout.documents_path(coll))
        return cls(coll, opts, base, markers, resolve_device(device), train, dev, hashes)

    def metadata(self) -> dict[str, Any]:
        """What the folder records (the ``_VARYING`` keys filled once trained)."""
        from cmrkit.coref.encoder import FORMAT, SIMILARITY_RANGE

        opts = self.opts
        return {
            "format": FORMAT,
            "base_model": {**self.base.identity(), "tag": self.base.tag},
            "markers": list(self.markers),
            "max_length": opts.max_length,
            "similarity": "cosine",
            "threshold_range": list(SIMILARITY_RANGE),
            "threshold": None,
            "data": {
                "collection": str(self.coll),
                "train_split": opts.train_split,
                "n_mentions": len(self.train.mentions),
                "dev_split": self.dev.split if self.dev is not None else None,
                "n_dev_mentions": len(self.dev.mentions) if self.dev is not None else 0,
                "pairs": None,
                **self.hashes,
            },
            "parameters": {
                **training.options_record(opts),
                "dev_split": self.dev.split if self.dev is not None else None,
                "steps": None,
                "sequences": None,
                "device": self.device,
            },
        }

    def _encode(self, items: list[Any], heads: bool, progress: bool, label: str) -> np.ndarray:
        from cmrkit.console import progress_bar
        from cmrkit.coref.encoder import encode

        with progress_bar(progress, label) as bar:
            task = bar.add_task("mentions", total=len(items))
            return encode(
                self.net, self.tokenizer, items, batch_size=32, device=self.device,
                heads=heads, tick=lambda n: bar.advance(task, n),
            )  # fmt: skip

    def _setup(self, progress: bool) -> None:
        """Seed, build the network, embed the train mentions by the base encoder, choose the
        pairs."""
        from cmrkit.coref.encoder import build_net, mention_inputs
        from cmrkit.retrieval.reader.model import load_encoder

        opts = self.opts
        t0 = time.perf_counter()
        training.seed_all(opts.seed)
        encoder, self.tokenizer = load_encoder(self.base.path)
        self.net = build_net(encoder, opts.head_dim).to(self.device)
        train = self.train
        self.items = mention_inputs(
            self.tokenizer, train.mentions, train.documents, self.markers, opts.max_length
        )
        if self.dev is not None:
            self.dev_items = mention_inputs(
                self.tokenizer, self.dev.mentions, self.dev.documents, self.markers,
                opts.max_length,
            )  # fmt: skip
        label = f"embedding {train.split} mentions by the base encoder"
        base = self._encode(self.items, False, progress, label)
        ms = train.mentions
        self.pairs = select_pairs(
            base, [m.cluster for m in ms], [str(m.topic) for m in ms],
            [str(m.subtopic if m.subtopic is not None else m.topic) for m in ms],
            opts.positives, opts.negatives,
        )  # fmt: skip
        if not self.pairs.counts["positives"]:
            raise CmrkitError(
                f"split {train.split!r} has no coreferent mentions within a topic: nothing to "
                "train on",
                path=train.path,
            )
        self.timings = {"base_embedding": round(time.perf_counter() - t0, 3)}

    def fit(
        self, progress: bool, argv: list[str] | None, started: float
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Train; the trained model's metadata (with its threshold) and the training log."""
        from cmrkit.console import console

        self._setup(progress)
        assert self.pairs is not None and self.timings is not None
        opts = self.opts
        rng = random.Random(opts.seed)
        epochs = [pack_batches(self.pairs, opts.batch_size, rng) for _ in range(opts.epochs)]
        self.steps = training.total_steps(epochs, 1, opts.max_steps)
        if progress:
            c = self.pairs.counts
            seqs = sum(len(b[0]) for b in epochs[0])
            console.print(
                f"pairs: {c['pairs']:,} ({c['positives']:,} positive, {c['negatives']:,} "
                f"negative of {c['negatives_chosen']:,} chosen); {len(epochs[0]):,} batches, "
                f"{seqs:,} sequences an epoch",
                markup=False,
                soft_wrap=True,
            )
        named = [(n, p) for n, p in self.net.named_parameters() if p.requires_grad]
        encoder = [(n, p) for n, p in named if n.startswith("encoder.")]
        heads = [(n, p) for n, p in named if not n.startswith("encoder.")]
        optimizer = training.adamw(
            [(encoder, opts.learning_rate), (heads, opts.head_learning_rate)], opts.weight_decay
        )
        log, step = training.train_epochs(
            epochs,
            batch_size=1,
            steps=self.steps,
            batch_loss=lambda batches: self.batch_loss(batches[0]),
            train_mode=self.net.train,
            parameters=[p for _, p in named],
            optimizer=optimizer,
            scheduler=training.linear_schedule(optimizer, opts.warmup, self.steps),
            eval_dev=self.eval_dev if self.dev is not None else None,
            timings=self.timings,
            progress=progress,
            label=f"training the coreference encoder on {self.coll.name} {opts.train_split}",
            dev_before=False,
            query_of=lambda batch: None,  # a batch is a topic's mentions, not a query's
        )
        self.timings["sequences_per_second"] = round(
            self.n_sequences / max(self.timings["train"], 1e-9), 3
        )
        trained = self._trained(step)
        log["pairs"] = self.pairs.counts
        if self.dev_tuned is not None:
            log["threshold"] = {"dev_conll_by_threshold": self.dev_tuned[2]}
        run = ("collection", str(self.coll))
        return trained, training.training_log(argv, run, log, self.timings, started)

    def _trained(self, step: int) -> dict[str, Any]:
        assert self.pairs is not None
        meta = self.metadata()
        meta["data"]["pairs"] = self.pairs.counts
        meta["parameters"]["steps"] = step
        meta["parameters"]["sequences"] = self.n_sequences
        if self.opts.threshold is not None:
            meta["threshold"] = {"value": self.opts.threshold, "how": "given (--threshold)"}
        elif self.dev_tuned is not None and step:
            value, f1, _ = self.dev_tuned
            meta["threshold"] = {
                "value": value,
                "how": f"tuned on {self.dev.split} CoNLL F1 within gold topics, with singletons",  # type: ignore[union-attr]
                "dev_conll": f1,
                "grid": [THRESHOLD_GRID[0], THRESHOLD_GRID[-1], 0.05],
            }
        else:
            meta["threshold"] = {"value": DEFAULT_THRESHOLD, "how": "default (no dev split)"}
        return meta

    def eval_dev(self) -> dict[str, float]:
        """The dev split encoded by the current network and clustered at every threshold of
        the grid: the best CoNLL F1 and its threshold."""
        assert self.dev is not None and self.dev_items is not None
        vectors = self._encode(self.dev_items, True, False, "dev")
        self.dev_tuned = tune_threshold(vectors, self.dev)
        return {"CoNLL": self.dev_tuned[1], "threshold": self.dev_tuned[0]}

    def batch_loss(self, batch: Batch) -> Any:
        """The contrastive loss of one batch's pairs."""
        import torch

        from cmrkit.coref.encoder import collate, represent

        assert self.items is not None
        members, found = batch
        self.n_sequences += len(members)
        tok = self.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else 0
        typed = "token_type_ids" in tok.model_input_names
        reps = represent(self.net, collate([self.items[m] for m in members], pad, typed,
                                           self.device))  # fmt: skip
        a = torch.tensor([f[0] for f in found], device=self.device)
        b = torch.tensor([f[1] for f in found], device=self.device)
        y = torch.tensor([float(f[2]) for f in found], device=self.device)
        return contrastive_loss(reps[a], reps[b], y, self.opts.margin)

    def save(self, target: Path, metadata: dict[str, Any]) -> None:
        from cmrkit.coref.encoder import save_model

        save_model(self.net, self.tokenizer, target, metadata)


def _plot(log: dict[str, Any], path: Path) -> None:
    """The loss per step and the dev CoNLL F1 per epoch."""
    from cmrkit.figures import plot_training

    plot_training(log, path, DEV_MEASURES, "dev (within gold topics, tuned threshold)")
