"""``cmrkit train dense``: fine-tune a bi-encoder on a collection's own queries (CoreSearch recipe).

Each training example is a marked query and one of its positive units (every positive, or
``pairs_per_query`` of them drawn each epoch). A batch scores every query against every unit in
the batch: its own positive, the other examples' positives (in-batch negatives) and one hard
negative per example, drawn at random from the query's BM25 top ``negatives_depth`` (never a
positive of the query, its own unit or a unit of its own document). Units relevant to a query
are never its negatives, even when they arrive as another example's positive. The loss is
cross-entropy over these scores (inner product, times ``scale``: 20 for models that normalise
their embeddings, as sentence-transformers' MultipleNegativesRankingLoss, else 1 as DPR).
AdamW with weight decay (not on biases and LayerNorm weights), linear warm-up then decay.

The saved folder is a normal sentence-transformers model (the passage encoder; with separate
encoders the query encoder lies in ``query_encoder/``) plus ``cmrkit-model.json`` (markers, base
model, training data hashes, parameters) and ``cmrkit-train.json`` (loss per step, dev measures
per epoch, timings; also ``loss.png`` with ``plot``). Same data, parameters and seed give the
same weights on CPU.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cmrkit.retrieval.training as training
from cmrkit.collection.layout import (
    Topic,
    collection_dir,
    iter_corpus,
    qrels_path,
    read_topics,
    training_splits,
)
from cmrkit.errors import CmrkitError, check_range
from cmrkit.figures import plot_training
from cmrkit.fileio import as_os_error
from cmrkit.retrieval.dense.models import (
    METADATA,
    METADATA_FORMAT,
    QUERY_ENCODER,
    Encoders,
    lengths,
    load_sentence_transformer,
    resolve_model,
)
from cmrkit.retrieval.dense.options import DenseOptions
from cmrkit.retrieval.neural import quiet_hub, resolve_device
from cmrkit.retrieval.options import RunOptions
from cmrkit.retrieval.runfile import own_document_units

DEV_MEASURES = ("RR@10", "AP@10", "R@10", "R@100")


@dataclass(frozen=True)
class TrainOptions:
    """The training recipe (defaults: minutes on a 2-core CPU for the embedded sample)."""

    train_split: str = "train"
    dev_split: str | None = None  # None: "dev" when the collection has it and it is not train
    shared_encoder: bool = False
    epochs: int = 1
    batch_size: int = 16
    learning_rate: float = 2e-5
    weight_decay: float = 0.01
    warmup: float = 0.1
    negatives_depth: int = 20
    pairs_per_query: int | None = 1  # None: every positive each epoch (CoreSearch)
    scale: float | None = None  # None: 20 for normalised embeddings, else 1
    seed: int = 13
    max_steps: int | None = None
    negatives_run: Path | None = None  # a BM25 run of the train split; None: run bm25 (kept)

    def check(self) -> None:
        if self.epochs < 1:
            raise CmrkitError(f"--epochs must be at least 1, got {self.epochs}")
        if self.batch_size < 2:
            raise CmrkitError(
                f"--batch-size must be at least 2 (in-batch negatives), got {self.batch_size}"
            )
        if not 0 < self.learning_rate < math.inf:
            raise CmrkitError(f"--lr must be a finite number above 0, got {self.learning_rate}")
        # NaN or infinity here would train a model of NaN weights and save it with exit 0
        check_range(self.weight_decay, 0, 1000, "--weight-decay")
        if self.scale is not None and not 0 < self.scale < math.inf:
            raise CmrkitError(f"the similarity scale must be finite and above 0, got {self.scale}")
        training.check_steps(self.max_steps, self.warmup)
        if self.negatives_depth < 1:
            raise CmrkitError(f"--negatives-depth must be at least 1, got {self.negatives_depth}")
        if self.pairs_per_query is not None and self.pairs_per_query < 1:
            raise CmrkitError(f"--pairs-per-query must be at least 1, got {self.pairs_per_query}")


@dataclass
class _Data:
    topics: list[Topic]
    positives: list[list[str]]  # per topic, sorted
    relevant: list[frozenset[str]]  # per topic: every judged-relevant unit
    banned: list[frozenset[str]]  # per topic: own unit and own-document units
    negatives: list[list[str]]  # per topic: BM25 candidates, best first
    texts: dict[str, str]
    hashes: dict[str, str]


def _load_data(
    coll: Path, split: str, opts: TrainOptions, run_opts: RunOptions, qrels_dir: Path | None
) -> _Data:
    from cmrkit.trec import ranked, read_run

    path, qrels = training.train_qrels(coll, split, qrels_dir)
    texts = {r["id"]: r["contents"] for _, r in iter_corpus(coll)}
    topics = [t for t in read_topics(coll, split) if t.qid in qrels]
    if not topics:
        raise CmrkitError(f"no topic of split {split!r} has judgments in the qrels", path=path)
    if opts.negatives_run is not None:
        run_path = Path(opts.negatives_run)
        if not run_path.is_file():
            raise CmrkitError("no such run file (--negatives-run)", path=run_path)
    else:
        from cmrkit.retrieval.systems import run_bm25

        run_path = run_bm25(coll, options=run_opts).run_path
    run = read_run(run_path)
    missing = [t.qid for t in topics if t.qid not in run]
    if len(missing) == len(topics):
        raise CmrkitError(
            f"the negatives run holds none of the {split!r} queries (another split or "
            "collection?); give a BM25 run of the train split",
            path=run_path,
        )
    own_docs = own_document_units(coll, topics)
    positives, relevant, banned, negatives = [], [], [], []
    for t in topics:
        rel = frozenset(d for d, g in qrels[t.qid].items() if g > 0)
        positives.append(sorted(d for d in rel if d in texts and d != t.unit))
        relevant.append(rel)
        ban = frozenset({t.unit}) | own_docs.get(t.qid, frozenset())
        banned.append(ban)
        ranking = ranked(run.get(t.qid, {}))
        negatives.append(
            [d for d, _ in ranking if d not in rel and d not in ban and d in texts][
                : opts.negatives_depth
            ]
        )
    hashes = {
        **training.data_hashes(coll, path, "negatives_run", run_path),
        "negatives_run": str(run_path),
    }
    return _Data(topics, positives, relevant, banned, negatives, texts, hashes)


def _examples(data: _Data, opts: TrainOptions, rng: random.Random) -> list[tuple[int, str, str]]:
    """(topic index, positive, hard negative) for one epoch, shuffled."""
    pool = list(data.texts)
    out: list[tuple[int, str, str]] = []
    for i, pos in enumerate(data.positives):
        if not pos:
            continue
        chosen = (
            pos
            if opts.pairs_per_query is None
            else rng.sample(pos, min(len(pos), opts.pairs_per_query))
        )
        for p in chosen:
            if data.negatives[i]:
                neg = rng.choice(data.negatives[i])
            else:  # BM25 found no non-relevant unit: a random one
                while True:
                    neg = rng.choice(pool)
                    if neg not in data.relevant[i] and neg not in data.banned[i]:
                        break
            out.append((i, p, neg))
    rng.shuffle(out)
    return out


def _dev_measures(
    encoders: Any,
    coll: Path,
    split: str,
    markers: tuple[str, str],
    query_len: int,
    passage_len: int,
    batch_size: int,
    qrels_dir: Path | None,
) -> dict[str, float]:
    """RR@10, AP@10, R@10, R@100 of the current model on the dev split (whole corpus, exact)."""
    from cmrkit.retrieval.dense.encode import encode_ids, passage_ids, query_ids
    from cmrkit.retrieval.dense.search import search
    from cmrkit.trec import read_qrels

    qrels = read_qrels(qrels_path(coll, split, qrels_dir))
    topics = [t for t in read_topics(coll, split) if t.qid in qrels]
    ids, texts = [], []
    for _, record in iter_corpus(coll):
        ids.append(record["id"])
        texts.append(record["contents"])
    pvecs = encode_ids(
        encoders.passage,
        passage_ids(encoders.passage.tokenizer, texts, passage_len),
        batch_size=batch_size,
    )
    tokens = query_ids(
        encoders.query.tokenizer,
        [t.context for t in topics],
        [t.span for t in topics],
        markers,
        query_len,
    )
    qvecs = encode_ids(encoders.query, tokens, batch_size=batch_size)
    own_docs = own_document_units(coll, topics)
    exclude = [frozenset({t.unit}) | own_docs.get(t.qid, frozenset()) for t in topics]
    hits = search(qvecs, pvecs, ids, 100, exclude=exclude)
    run = {t.qid: dict(h) for t, h in zip(topics, hits, strict=True)}
    return training.dev_scores(run, qrels, DEV_MEASURES)


def train_dense(
    collection: str | Path,
    output: str | Path,
    *,
    dense: DenseOptions | None = None,
    train: TrainOptions | None = None,
    run_options: RunOptions | None = None,
    qrels_dir: str | Path | None = None,
    plot: bool = False,
    force: bool = False,
    progress: bool = True,
    argv: list[str] | None = None,
) -> training.TrainedModel:
    """Fine-tune ``dense.model`` on the train split of a collection; save it to ``output``.

    ``run_options`` are those of the BM25 run that gives the hard negatives (its split is the
    train split); ``dense`` gives the base model, device, lengths and markers.
    """
    quiet_hub()
    started = time.perf_counter()
    dense = dense or DenseOptions(batch_size=16)
    opts = train or TrainOptions()
    opts.check()
    coll = collection_dir(collection)
    out = Path(output)
    # the output is claimed now, as the run commands do: a second training writing the same
    # folder fails at once naming this one, instead of both training and one model being lost
    encoders = ["modules.json"] + ([] if opts.shared_encoder else [f"{QUERY_ENCODER}/modules.json"])
    with training.ModelFolder(
        out, kind="dense-model", metadata=METADATA, files=encoders, force=force
    ) as folder:
        folder.check_options(training.options_record(opts), derived=("dev_split", "scale"))
        qdir = Path(qrels_dir) if qrels_dir is not None else None
        base_run = RunOptions.build(run_options, {"split": opts.train_split, "argv": None})
        session = _Training.prepare(coll, dense, opts, base_run, qdir)
        kept = folder.kept(session.metadata(session.steps), varying=["data.collection"])
        if kept is not None:
            if plot:
                folder.plot(kept, _plot)
            return training.TrainedModel(
                out, session.metadata(session.steps), kept, up_to_date=True
            )
        log, step = session.fit(progress)
        log_out = training.training_log(
            argv,
            ("negatives_run", session.data.hashes["negatives_run"]),
            log,
            session.timings,
            started,
        )
        trained = session.metadata(step)
        session.save(folder.target(), out, trained)
        folder.finish(log_out, _plot if plot else None)
        return training.TrainedModel(out, trained, log_out)


@dataclass
class _Training:
    """One training of a bi-encoder: :meth:`prepare` reads the data and loads the encoders,
    :meth:`fit` runs the steps (``batch_loss``) and the dev measures after each epoch,
    :meth:`save` writes the model."""

    coll: Path
    dense: DenseOptions
    opts: TrainOptions
    ref: Any  # the base model (ModelRef)
    markers: tuple[str, str]
    query_len: int
    passage_len: int
    dev_split: str | None
    qdir: Path | None
    data: _Data
    encoders: Encoders
    scale: float
    epochs: list[list[tuple[int, str, str]]]
    steps: int
    timings: dict[str, float]
    query_tokens: list[list[int]]
    _passages: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def prepare(
        cls,
        coll: Path,
        dense: DenseOptions,
        opts: TrainOptions,
        base_run: RunOptions,
        qdir: Path | None,
    ) -> _Training:
        """Read the data (making the BM25 run when needed), seed, load the encoders and draw
        every epoch's examples."""
        import copy

        from cmrkit.retrieval.dense.encode import query_ids

        dev_split = training_splits(coll, opts.train_split, opts.dev_split, qdir)
        ref = resolve_model(dense.model, download=dense.download)
        markers = dense.markers or ref.markers
        query_len, passage_len = lengths(ref, dense)
        t0 = time.perf_counter()
        data = _load_data(coll, opts.train_split, opts, base_run, qdir)
        timings = {"data": round(time.perf_counter() - t0, 3)}
        if not any(data.positives):
            raise CmrkitError(
                f"no query of split {opts.train_split!r} has a positive unit in the corpus"
            )
        training.seed_all(opts.seed)
        device = resolve_device(dense.device)
        passage = load_sentence_transformer(ref.path, device)
        query = passage if opts.shared_encoder else copy.deepcopy(passage)
        if ref.separate_query_encoder and not opts.shared_encoder:
            query = load_sentence_transformer(ref.path / QUERY_ENCODER, device)
        normalised = any(type(m).__name__ == "Normalize" for m in passage)
        scale = opts.scale if opts.scale is not None else (20.0 if normalised else 1.0)
        rng = random.Random(opts.seed)
        epochs = [_examples(data, opts, rng) for _ in range(opts.epochs)]
        steps = training.total_steps(epochs, opts.batch_size, opts.max_steps)
        topics = data.topics
        tokens = query_ids(
            query.tokenizer,
            [t.context for t in topics],
            [t.span for t in topics],
            markers,
            query_len,
        )
        return cls(
            coll, dense, opts, ref, markers, query_len, passage_len, dev_split, qdir, data,
            Encoders(ref, device, query, passage), scale, epochs, steps, timings, tokens,
        )  # fmt: skip

    @property
    def modules(self) -> list[Any]:
        """The encoders trained: one when shared, else the query's and the passages'."""
        e = self.encoders
        return [e.passage] if self.opts.shared_encoder else [e.query, e.passage]

    def metadata(self, steps: int) -> dict[str, Any]:
        """What the model folder records of its training (``steps`` taken)."""
        opts, data = self.opts, self.data
        return {
            "format": METADATA_FORMAT,
            "markers": list(self.markers),
            "base_model": {**self.ref.identity(), "tag": self.ref.tag},
            "shared_encoder": opts.shared_encoder,
            "data": {
                "collection": str(self.coll),
                "train_split": opts.train_split,
                "n_queries": sum(1 for p in data.positives if p),
                "n_examples": sum(len(e) for e in self.epochs),
                **{k: v for k, v in data.hashes.items() if k != "negatives_run"},
            },
            "parameters": {
                **training.options_record(opts),
                "dev_split": self.dev_split,
                "scale": self.scale,
                "query_max_length": self.query_len,
                "passage_max_length": self.passage_len,
                "steps": steps,
                "device": self.encoders.device,
            },
        }

    def fit(self, progress: bool) -> tuple[dict[str, Any], int]:
        """Train; the log and the steps taken."""
        opts = self.opts
        named = [(n, p) for m in self.modules for n, p in m.named_parameters() if p.requires_grad]
        optimizer = training.adamw([(named, opts.learning_rate)], opts.weight_decay)
        return training.train_epochs(
            self.epochs,
            batch_size=opts.batch_size,
            steps=self.steps,
            batch_loss=self.batch_loss,
            train_mode=self.train_mode,
            parameters=[p for _, p in named],
            optimizer=optimizer,
            scheduler=training.linear_schedule(optimizer, opts.warmup, self.steps),
            eval_dev=self.eval_dev if self.dev_split is not None else None,
            timings=self.timings,
            progress=progress,
            label=f"training on {self.coll.name} {opts.train_split}",
        )

    def train_mode(self) -> None:
        for module in self.modules:
            module.train()

    def eval_dev(self) -> dict[str, float]:
        assert self.dev_split is not None
        return _dev_measures(
            self.encoders, self.coll, self.dev_split, self.markers, self.query_len,
            self.passage_len, self.dense.batch_size, self.qdir,
        )  # fmt: skip

    def passage_tokens(self, docnos: list[str]) -> list[list[int]]:
        """Token ids of units, each tokenized once."""
        from cmrkit.retrieval.dense.encode import passage_ids

        todo = [d for d in docnos if d not in self._passages]
        if todo:
            tokenizer = self.encoders.passage.tokenizer
            texts = [self.data.texts[d] for d in todo]
            for d, ids in zip(todo, passage_ids(tokenizer, texts, self.passage_len), strict=True):
                self._passages[d] = ids
        return [self._passages[d] for d in docnos]

    def batch_loss(self, batch: Sequence[tuple[int, str, str]]) -> Any:
        """Cross-entropy of each query's scores over the batch's units (its positive, the
        others' positives, the hard negatives), units relevant to it or banned for it masked."""
        import torch

        from cmrkit.retrieval.dense.encode import collate

        data, device = self.data, self.encoders.device
        query, passage = self.encoders.query, self.encoders.passage
        columns: list[str] = []
        where: dict[str, int] = {}
        for _, p, n in batch:
            for d in (p, n):
                if d not in where:
                    where[d] = len(columns)
                    columns.append(d)
        target = torch.tensor([where[p] for _, p, _ in batch], device=device)
        mask = torch.zeros((len(batch), len(columns)), dtype=torch.bool, device=device)
        for row, (i, p, _) in enumerate(batch):
            for d, col in where.items():
                if d != p and (d in data.relevant[i] or d in data.banned[i]):
                    mask[row, col] = True
        qv = query(collate(query, [self.query_tokens[i] for i, _, _ in batch]))[
            "sentence_embedding"
        ]
        pv = passage(collate(passage, self.passage_tokens(columns)))["sentence_embedding"]
        scores = ((qv @ pv.T) * self.scale).masked_fill(mask, float("-inf"))
        return torch.nn.functional.cross_entropy(scores, target)

    def save(self, target: Path, out: Path, metadata: dict[str, Any]) -> None:
        """The encoders (sentence-transformers folders) and the metadata, into ``target``."""
        try:
            self.encoders.passage.save(str(target), create_model_card=False)
            if not self.opts.shared_encoder:
                self.encoders.query.save(str(target / QUERY_ENCODER), create_model_card=False)
        except Exception as e:  # safetensors reports a full disk as its own error type
            found = as_os_error(e, out)
            if found is not None:
                raise found from None
            raise
        training.write_json(target / METADATA, metadata)


def _plot(log: dict[str, Any], path: Path) -> None:
    """The loss per step and the dev measures per epoch."""
    plot_training(log, path, DEV_MEASURES, "dev")
