"""``cmrkit train dense``: fine-tune a bi-encoder on a collection's own queries.

The default is the CoreSearch recipe, below; ``objective``, ``positives`` and ``negatives``
choose arboEL's arborescence positives and k-NN negatives or EER's objective instead
(``objectives.py`` says what each does; ``mining.py`` draws the examples that depend on the
current model, once per epoch; ``events.py`` makes EER's event strings).

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

import functools
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

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
from cmrkit.retrieval.dense import mining
from cmrkit.retrieval.dense.models import (
    METADATA,
    METADATA_FORMAT,
    QUERY_ENCODER,
    Encoders,
    lengths,
    load_sentence_transformer,
    resolve_model,
)
from cmrkit.retrieval.dense.objectives import (
    EER_MARGIN,
    EER_SCALE,
    KNN_NEGATIVES,
    NEGATIVES,
    OBJECTIVES,
    POSITIVES,
)
from cmrkit.retrieval.dense.options import DenseOptions
from cmrkit.retrieval.neural import quiet_hub, resolve_device
from cmrkit.retrieval.options import RunOptions
from cmrkit.retrieval.runfile import own_document_units

DEV_MEASURES = ("RR@10", "AP@10", "R@10", "R@100")
# the recipe's modes and their defaults: a folder that does not record one was trained with it
# (so the default recipe's metadata is what it was before they existed)
MODES = {
    "objective": "coresearch",
    "positives": "random",
    "negatives": "bm25",
    "event_term": False,
    "event_decoder": False,
}


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
    objective: str = "coresearch"  # or eer (objectives.py)
    positives: str = "random"  # or arborescence (arboEL)
    negatives: str = "bm25"  # or knn: the BM25 negative and the k nearest (arboEL)
    knn_negatives: int = KNN_NEGATIVES
    entities: bool | None = None  # arborescence: the cluster's entity node (None: where named)
    margin: float = EER_MARGIN  # eer: the triplet margin
    event_term: bool = False  # eer: the event-aware InfoNCE (spaCy's event strings)
    event_decoder: bool = False  # eer: the event strings written by EER's decoder

    @property
    def dynamic(self) -> bool:
        """Whether an epoch's examples depend on the current model (drawn at its start)."""
        return self.positives == "arborescence" or self.negatives == "knn"

    @property
    def events(self) -> bool:
        return self.event_term or self.event_decoder

    def record(self) -> dict[str, Any]:
        """The options as the model folder records them: the modes only where they are not
        the default, and each mode's parameters only with it."""
        rec = training.options_record(self)
        for key, default in MODES.items():
            if rec[key] == default:
                del rec[key]
        if self.negatives != "knn":
            del rec["knn_negatives"]
        if self.objective != "eer":
            del rec["margin"]
        if self.positives != "arborescence":
            del rec["entities"]
        return rec

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
        self._check_modes()

    def _check_modes(self) -> None:
        for flag, value, values in (
            ("--objective", self.objective, OBJECTIVES),
            ("--positives", self.positives, POSITIVES),
            ("--negatives", self.negatives, NEGATIVES),
        ):
            if value not in values:
                raise CmrkitError(f"{flag} must be one of {', '.join(values)}, got {value!r}")
        if self.knn_negatives < 1:
            raise CmrkitError(f"--knn-negatives must be at least 1, got {self.knn_negatives}")
        check_range(self.margin, 0, 100, "--margin")
        if self.positives == "arborescence" and self.pairs_per_query != 1:
            raise CmrkitError(
                "--positives arborescence gives each query one positive per epoch, its "
                "arborescence edge: drop --pairs-per-query"
            )
        if self.entities is not None and self.positives != "arborescence":
            raise CmrkitError("--entities and --no-entities go with --positives arborescence")
        events = (("--event-term", self.event_term), ("--event-decoder", self.event_decoder))
        for flag, on in events:
            if on and self.objective != "eer":
                raise CmrkitError(f"{flag} is part of EER's objective: add --objective eer")
        if self.event_decoder:
            from cmrkit.retrieval.dense.events import check_decoder_extra

            check_decoder_extra()


@dataclass
class _Data:
    topics: list[Topic]
    positives: list[list[str]]  # per topic, sorted
    relevant: list[frozenset[str]]  # per topic: every judged-relevant unit
    banned: list[frozenset[str]]  # per topic: own unit and own-document units
    negatives: list[list[str]]  # per topic: BM25 candidates, best first
    texts: dict[str, str]
    hashes: dict[str, str]
    titles: dict[str, str] = field(default_factory=dict)  # cluster -> entity text
    mentions: dict[str, list[tuple[str, int, int]]] = field(default_factory=dict)  # per unit


def _check_arborescence(
    coll: Path, split: str, opts: TrainOptions, topics: list[Topic], qrels: Any
) -> dict[str, str]:
    """Refuse arborescence positives that cannot be built (before the negatives run is made):
    every training cluster of one mention, or ``--entities`` where no cluster names its
    entity; the entity texts of the clusters (none with ``--no-entities``)."""
    from cmrkit.collection.layout import topic_records

    relevant = [frozenset(d for d, g in qrels.get(t.qid, {}).items() if g > 0) for t in topics]
    sizes = mining.cluster_sizes([t.cluster for t in topics], relevant, [t.unit for t in topics])
    if sizes and max(sizes.values()) < 2:
        raise CmrkitError(
            f"--positives arborescence needs training clusters of two mentions or more, and "
            f"each of the {len(sizes):,} clusters of split {split!r} has one; train with "
            "--positives random, or on a split whose clusters hold coreferent mentions"
        )
    if opts.entities is False:
        return {}
    titles = mining.entity_titles(topic_records(coll), {t.qid for t in topics})
    if opts.entities and not titles:
        raise CmrkitError(
            f"--entities: no cluster of split {split!r} names its entity (topics.jsonl has no "
            "cluster_title for its queries: WEC-Eng's coref_link gives one); drop --entities"
        )
    return titles


def _load_data(
    coll: Path, split: str, opts: TrainOptions, run_opts: RunOptions, qrels_dir: Path | None
) -> _Data:
    from cmrkit.trec import ranked, read_run

    path, qrels = training.train_qrels(coll, split, qrels_dir)
    texts: dict[str, str] = {}
    mentions: dict[str, list[tuple[str, int, int]]] = {}
    for _, r in iter_corpus(coll):
        texts[r["id"]] = r["contents"]
        if opts.events and r.get("mentions"):
            mentions[r["id"]] = sorted(
                (str(m["cluster"]), int(m["start"]), int(m["end"])) for m in r["mentions"]
            )
    split_topics = read_topics(coll, split)
    titles = {}
    if opts.positives == "arborescence":
        titles = _check_arborescence(coll, split, opts, split_topics, qrels)
    topics = [t for t in split_topics if t.qid in qrels]
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
    return _Data(topics, positives, relevant, banned, negatives, texts, hashes, titles, mentions)


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
        folder.check_options(
            opts.record(), derived=("dev_split", "scale", "entities"), implicit=MODES
        )
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


class _Epochs(Sequence):
    """The examples of each epoch, drawn when the epoch starts (after the one before trained),
    for the recipes whose examples depend on the current model; ``size`` examples each."""

    def __init__(self, count: int, size: int, draw: Callable[[int], list]) -> None:
        self.count, self.size, self._draw = count, size, draw
        self._drawn: list[list] = []

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: Any) -> list:
        if not isinstance(index, int) or not 0 <= index < self.count:
            raise IndexError(index)
        while len(self._drawn) <= index:
            self._drawn.append(self._draw(len(self._drawn)))
        return self._drawn[index]


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
    epochs: Sequence[Sequence[tuple]]
    steps: int
    timings: dict[str, float]
    query_tokens: list[list[int]]
    n_examples: int = 0
    clusters: mining.Clusters | None = None
    events: dict[tuple[str, str], Any] = field(default_factory=dict)  # (cluster, unit) -> Event
    parser: dict[str, str] = field(default_factory=dict)  # the spaCy pipeline of the events
    decoder: Any = None  # events.EventDecoder with --event-decoder
    _passages: dict[str, list[int]] = field(default_factory=dict)
    _batches: int = 0

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
        every epoch's examples (or, for the recipes that depend on the model, the way to)."""
        import copy

        from cmrkit.retrieval.dense.encode import query_ids

        dev_split = training_splits(coll, opts.train_split, opts.dev_split, qdir)
        ref = resolve_model(dense.model, download=dense.download)
        markers = dense.markers or ref.markers
        query_len, passage_len = lengths(ref, dense)
        nlp = None
        if opts.events:  # a missing spaCy model is refused before the negatives run is made
            from cmrkit.retrieval.dense.events import load_parser

            nlp = load_parser(base_run.spacy_model)
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
        if opts.objective == "eer" and opts.scale is None:
            scale = EER_SCALE  # over cosine similarities, normalised or not
        rng = random.Random(opts.seed)
        epochs: Sequence[Sequence[tuple]] = []
        if not opts.dynamic:
            epochs = [_examples(data, opts, rng) for _ in range(opts.epochs)]
        topics = data.topics
        tokens = query_ids(
            query.tokenizer,
            [t.context for t in topics],
            [t.span for t in topics],
            markers,
            query_len,
        )
        session = cls(
            coll, dense, opts, ref, markers, query_len, passage_len, dev_split, qdir, data,
            Encoders(ref, device, query, passage), scale, epochs, 0, timings, tokens,
        )  # fmt: skip
        session._plan(rng, nlp)
        return session

    def _plan(self, rng: random.Random, nlp: Any) -> None:
        """The steps, the examples per epoch, the clusters, the event strings and the decoder."""
        opts, data = self.opts, self.data
        per_epoch = sum(
            0 if not p else 1 if opts.positives == "arborescence"
            else len(p) if opts.pairs_per_query is None else min(len(p), opts.pairs_per_query)
            for p in data.positives
        )  # fmt: skip
        if opts.dynamic:
            self.clusters = mining.training_clusters(
                [t.cluster for t in data.topics],
                data.positives,
                [t.unit for t in data.topics],
                data.titles if opts.positives == "arborescence" else None,
            )
            self.timings["mining"] = 0.0
            draw = functools.partial(self._draw, rng)
            self.epochs = _Epochs(opts.epochs, per_epoch, draw)
        self.n_examples = sum(len(e) for e in self.epochs) if not opts.dynamic else (
            per_epoch * opts.epochs
        )  # fmt: skip
        sized = [range(per_epoch)] * opts.epochs if opts.dynamic else self.epochs
        self.steps = training.total_steps(sized, opts.batch_size, opts.max_steps)
        if nlp is not None:
            self._parse_events(nlp)
        if opts.event_decoder:
            from cmrkit.retrieval.dense.events import EventDecoder

            self.decoder = EventDecoder(self.encoders.passage)

    def _parse_events(self, nlp: Any) -> None:
        """The event of every (cluster, positive unit) a query may learn from."""
        from cmrkit.retrieval.dense.events import parse_events

        t0 = time.perf_counter()
        data = self.data
        wanted: dict[tuple[str, str], tuple[str, tuple[int, int] | None]] = {}
        for t, pos in zip(data.topics, data.positives, strict=True):
            for d in pos:
                spans = [(s, e) for c, s, e in data.mentions.get(d, []) if c == t.cluster]
                wanted[(str(t.cluster), d)] = (d, spans[0] if spans else None)
        parsed = parse_events(nlp, data.texts, wanted.values())
        self.events = {key: parsed[w] for key, w in wanted.items()}
        self.parser = {"model": nlp.meta.get("lang", "") + "_" + nlp.meta.get("name", ""),
                       "version": str(nlp.meta.get("version"))}  # fmt: skip
        self.timings["events"] = round(time.perf_counter() - t0, 3)

    @property
    def modules(self) -> list[Any]:
        """The encoders trained: one when shared, else the query's and the passages'."""
        e = self.encoders
        return [e.passage] if self.opts.shared_encoder else [e.query, e.passage]

    def metadata(self, steps: int) -> dict[str, Any]:
        """What the model folder records of its training (``steps`` taken)."""
        opts, data = self.opts, self.data
        parameters = {
            **opts.record(),
            "dev_split": self.dev_split,
            "scale": self.scale,
            "query_max_length": self.query_len,
            "passage_max_length": self.passage_len,
            "steps": steps,
            "device": self.encoders.device,
        }
        if opts.positives == "arborescence":
            assert self.clusters is not None
            parameters["entities"] = bool(self.clusters.entities)
        if opts.events:
            from cmrkit.retrieval.dense.events import EVENT_TEMPLATE, GENERATED_TOKENS

            parameters["event"] = {"template": EVENT_TEMPLATE, "parser": self.parser}
            if opts.event_decoder:
                parameters["event"]["decoder"] = {
                    "generation": "greedy", "max_new_tokens": GENERATED_TOKENS
                }  # fmt: skip
        return {
            "format": METADATA_FORMAT,
            "markers": list(self.markers),
            "base_model": {**self.ref.identity(), "tag": self.ref.tag},
            "shared_encoder": opts.shared_encoder,
            "data": {
                "collection": str(self.coll),
                "train_split": opts.train_split,
                "n_queries": sum(1 for p in data.positives if p),
                "n_examples": self.n_examples,
                **{k: v for k, v in data.hashes.items() if k != "negatives_run"},
            },
            "parameters": parameters,
        }

    def fit(self, progress: bool) -> tuple[dict[str, Any], int]:
        """Train; the log and the steps taken."""
        opts = self.opts
        named = [(n, p) for m in self.modules for n, p in m.named_parameters() if p.requires_grad]
        if self.decoder is not None:  # trained beside the encoders, never saved
            named += [(f"decoder.{n}", p) for n, p in self.decoder.decoder.named_parameters()]
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
        if self.decoder is not None:
            self.decoder.model.train()

    def eval_dev(self) -> dict[str, float]:
        assert self.dev_split is not None
        return _dev_measures(
            self.encoders, self.coll, self.dev_split, self.markers, self.query_len,
            self.passage_len, self.dense.batch_size, self.qdir,
        )  # fmt: skip

    def text(self, key: str) -> str:
        """A unit's text, or an entity node's (its cluster's title)."""
        if key.startswith("entity\t"):
            return self.data.titles[key.partition("\t")[2]]
        return self.data.texts[key]

    def passage_tokens(self, docnos: list[str]) -> list[list[int]]:
        """Token ids of units (and entity texts), each tokenized once."""
        from cmrkit.retrieval.dense.encode import passage_ids

        todo = [d for d in docnos if d not in self._passages]
        if todo:
            tokenizer = self.encoders.passage.tokenizer
            texts = [self.text(d) for d in todo]
            for d, ids in zip(todo, passage_ids(tokenizer, texts, self.passage_len), strict=True):
                self._passages[d] = ids
        return [self._passages[d] for d in docnos]

    def _draw(self, rng: random.Random, epoch: int) -> list[tuple]:
        """The examples of an epoch that depend on the current model: the training clusters
        encoded, then each query's positive and negatives (``mining.draw_epoch``); nothing
        once the last step is taken."""
        if self._batches >= self.steps:
            return []
        from cmrkit.retrieval.dense.encode import encode_ids

        t0 = time.perf_counter()
        assert self.clusters is not None
        query, passage = self.encoders.query, self.encoders.passage
        batch = self.dense.batch_size
        rows = [i for i, p in enumerate(self.data.positives) if p]
        found = encode_ids(query, [self.query_tokens[i] for i in rows], batch_size=batch)
        queries = np.zeros((len(self.data.topics), found.shape[1]), dtype=np.float32)
        queries[rows] = found
        units = encode_ids(passage, self.passage_tokens(self.clusters.pool), batch_size=batch)
        entities = encode_ids(
            passage, self.passage_tokens(self.clusters.entities), batch_size=batch
        )
        vectors = mining.Vectors(queries, units, entities)
        examples = mining.draw_epoch(
            self.data,
            self.clusters,
            vectors,
            arborescence=self.opts.positives == "arborescence",
            knn=self.opts.knn_negatives if self.opts.negatives == "knn" else None,
            pairs=self.opts.pairs_per_query,
            rng=rng,
        )
        self.timings["mining"] = round(self.timings["mining"] + time.perf_counter() - t0, 3)
        return examples

    def _related(self, i: int, key: str) -> bool:
        """Whether a unit (or entity node) is never query i's negative: relevant to it, banned
        for it, or its own cluster's entity."""
        data = self.data
        if key.startswith("entity\t"):
            return key == mining.entity_key(str(data.topics[i].cluster))
        return key in data.relevant[i] or key in data.banned[i]

    def batch_loss(self, batch: Sequence[tuple]) -> Any:
        """The objective's loss of one batch of examples ``(query, positive, *negatives)``."""
        import torch

        from cmrkit.retrieval.dense.encode import collate
        from cmrkit.retrieval.dense.objectives import candidate_loss, in_batch_loss

        self._batches += 1
        device = self.encoders.device
        query, passage = self.encoders.query, self.encoders.passage
        columns: list[str] = []
        where: dict[str, int] = {}
        for example in batch:
            for d in example[1:]:
                if d not in where:
                    where[d] = len(columns)
                    columns.append(d)
        target = torch.tensor([where[ex[1]] for ex in batch], device=device)
        mask = torch.zeros((len(batch), len(columns)), dtype=torch.bool, device=device)
        for row, (i, p, *_) in enumerate(batch):
            for d, col in where.items():
                if d != p and self._related(i, d):
                    mask[row, col] = True
        qv = query(collate(query, [self.query_tokens[ex[0]] for ex in batch]))["sentence_embedding"]
        pv = passage(collate(passage, self.passage_tokens(columns)))["sentence_embedding"]
        if self.opts.objective == "eer":
            return self._eer_loss(batch, qv, pv, target, mask, where)
        if self.opts.positives == "arborescence":
            candidates, valid = self._candidates(batch, where, with_positive=True)
            return candidate_loss((qv @ pv.T) * self.scale, candidates, valid)
        return in_batch_loss((qv @ pv.T) * self.scale, target, mask)

    def _candidates(self, batch: Sequence[tuple], where: dict[str, int], with_positive: bool):
        """Per example, the columns of its positive (with ``with_positive``) and its own
        negatives, padded into one matrix, and which are real."""
        import torch

        device = self.encoders.device
        lists = [[where[d] for d in (ex[1:] if with_positive else ex[2:])] for ex in batch]
        width = max(len(x) for x in lists)
        candidates = torch.zeros((len(batch), width), dtype=torch.long, device=device)
        valid = torch.zeros((len(batch), width), dtype=torch.bool, device=device)
        for row, cols in enumerate(lists):
            candidates[row, : len(cols)] = torch.tensor(cols, dtype=torch.long)
            valid[row, : len(cols)] = True
        return candidates, valid

    def _eer_loss(self, batch, qv, pv, target, mask, where) -> Any:
        """EER's InfoNCE and triplet losses, plus its event-aware InfoNCE (and the decoder's
        generation loss) when asked."""
        from cmrkit.retrieval.dense.encode import collate, passage_ids
        from cmrkit.retrieval.dense.objectives import eer_loss, event_loss

        negatives, valid = self._candidates(batch, where, with_positive=False)
        loss = eer_loss(qv, pv, target, mask, negatives, valid, self.opts.margin, self.scale)
        if not self.opts.events:
            return loss
        data, passage = self.data, self.encoders.passage
        events = [None if ex[1].startswith("entity\t")
                  else self.events[(str(data.topics[ex[0]].cluster), ex[1])]
                  for ex in batch]  # fmt: skip
        strings = [
            self.text(ex[1]) if e is None else e.text for ex, e in zip(batch, events, strict=True)
        ]
        if self.decoder is not None:
            rows = [k for k, e in enumerate(events) if e is not None]
            if rows:
                sentences = [events[k].sentence for k in rows]
                loss = loss + self.decoder.loss(sentences, [strings[k] for k in rows])
                for k, written in zip(rows, self.decoder.generate(sentences), strict=True):
                    strings[k] = written
        tokens = passage_ids(passage.tokenizer, strings, self.passage_len)
        ev = passage(collate(passage, tokens))["sentence_embedding"]
        emask = torch_mask(
            [[c != r and self._related(batch[r][0], batch[c][1]) for c in range(len(batch))]
             for r in range(len(batch))], qv.device,
        )  # fmt: skip
        return loss + event_loss(qv, ev, emask, self.scale)

    def save(self, target: Path, out: Path, metadata: dict[str, Any]) -> None:
        """The encoders (sentence-transformers folders) and the metadata, into ``target``
        (EER's decoder, a training aid, is left out)."""
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


def torch_mask(rows: list[list[bool]], device: Any) -> Any:
    """A boolean tensor of ``rows`` on ``device``."""
    import torch

    return torch.tensor(rows, dtype=torch.bool, device=device)


def _plot(log: dict[str, Any], path: Path) -> None:
    """The loss per step and the dev measures per epoch."""
    plot_training(log, path, DEV_MEASURES, "dev")
