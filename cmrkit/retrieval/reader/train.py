"""``cmrkit train reader``: fine-tune the reader on a collection's own queries.

A training group is one marked query with one relevant unit (drawn each epoch among the query's
positives) and ``negatives`` non-relevant units drawn from its top ``depth`` candidates (a
first-stage run of the train split: ``run bm25``'s default, made on the fly and kept, or
``candidates``). Never the query's own unit, nor, for TAC collections, a unit of its document.
The positive is read in a window that holds the span target; each negative in one of its
windows drawn at random.

The span target is the mention of the query's cluster inside the relevant unit (the first one
when it holds several; the query mention itself never), from the mentions the corpus records
for every annotated unit. Positives without such a mention are left out; ``spans=False``
(``--no-spans``) trains the selection head alone and keeps every positive.

Loss: cross-entropy of the selection scores across the group (the positive is the answer), plus
cross-entropy of the start and end logits over the positive's passage tokens (averaged). With
``select="coref"`` the selection head scores the gold span of the positive and the best
predicted span of each negative. AdamW with weight decay (not on biases and LayerNorm weights),
the heads at ``head_lr``, linear warm-up then decay, gradient norm clipped at 1.
"""

from __future__ import annotations

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
    corpus_path,
    iter_corpus,
    qrels_path,
    read_topics,
    training_splits,
)
from cmrkit.errors import CmrkitError
from cmrkit.figures import plot_training
from cmrkit.retrieval.dense.options import DEFAULT_MODEL
from cmrkit.retrieval.options import RunOptions
from cmrkit.retrieval.runfile import check_run_of, own_document_units, read_sidecar
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

DEV_MEASURES = ("RR@10", "AP@10", "R@10")
DEFAULT_INTERPOLATION = 2.0  # used when no dev split tunes it (see docs/dense.md)
DEFAULT_SPAN_WEIGHT = 1.0  # used when no dev split tunes it (see docs/dense.md)
WEIGHT_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
SPAN_GRID = (0.0, 0.5, 1.0, 2.0)


@dataclass(frozen=True)
class ReaderTrainOptions:
    """The reader's training recipe; the defaults fit about 600 queries in 15 minutes on a
    2-core CPU (see docs/dense.md for what they trade against the paper's settings)."""

    train_split: str = "train"
    dev_split: str | None = None  # None: "dev" when the collection has it and it is not train
    select: str = "cls"
    spans: bool = True
    negatives: int = 3
    depth: int = 20
    epochs: int = 2
    batch_size: int = 2  # groups per step
    learning_rate: float = 5e-5
    head_learning_rate: float = 1e-3
    weight_decay: float = 0.01
    warmup: float = 0.1
    dropout: float = 0.1
    max_length: int = 192
    query_max_length: int = 64
    # the query side: the marked window, then the named entities of the context it cuts off
    # (the names run bm25's default query holds); False: the window alone, the paper's input
    query_entities: bool = True
    spacy_model: str = DEFAULT_SPACY_MODEL
    stride: int = 128
    max_span: int = 10
    seed: int = 13
    max_steps: int | None = None
    candidates: Path | None = None
    # the dev reranking after each epoch: 40 queries x 10 candidates (about 1,800 windows, as
    # many as 225 training steps read); 50 x 20 took 194 s a reranking, 35% of 600 queries' 18 min
    dev_depth: int = 10
    dev_queries: int = 40
    interpolation: float | None = None  # None: tuned on the dev split, else the default
    span_weight: float | None = None  # None: tuned on the dev split, else the default

    def check(self) -> None:
        from cmrkit.retrieval.reader.model import SELECTS
        from cmrkit.retrieval.reader.options import check_weights

        if self.select not in SELECTS:
            raise CmrkitError(f"--select must be one of {', '.join(SELECTS)}, got {self.select!r}")
        if self.select == "coref" and not self.spans:
            raise CmrkitError(
                "--select coref scores spans and cannot train without them; use --select cls "
                "with --no-spans"
            )
        for flag, value, low in (
            ("--negatives", self.negatives, 1),
            ("--depth", self.depth, 1),
            ("--epochs", self.epochs, 1),
            ("--batch-size", self.batch_size, 1),
            ("--stride", self.stride, 1),
            ("--max-span", self.max_span, 1),
            ("--dev-depth", self.dev_depth, 1),
            ("--dev-queries", self.dev_queries, 1),
        ):
            if value < low:
                raise CmrkitError(f"{flag} must be at least {low}, got {value}")
        training.check_steps(self.max_steps, self.warmup)
        if not self.learning_rate > 0 or not self.head_learning_rate > 0:
            raise CmrkitError("--lr and --head-lr must be above 0")
        check_weights(self.interpolation, self.span_weight)
        if not 0 <= self.dropout < 1:
            raise CmrkitError(f"--dropout must lie in [0, 1), got {self.dropout}")


@dataclass
class _Data:
    topics: list[Topic]
    positives: list[list[tuple[str, tuple[int, int] | None]]]  # (unit, gold characters)
    negatives: list[list[str]]  # candidates, best first
    texts: dict[str, str]
    hashes: dict[str, str]
    skipped: dict[str, int]


def candidates_run(
    coll: Path, split: str, given: Path | None, run_opts: RunOptions, what: str
) -> Path:
    """The first-stage run of ``split``: ``given`` (checked), else ``run bm25``'s default."""
    if given is None:
        from cmrkit.retrieval.systems import run_bm25

        return run_bm25(coll, options=RunOptions.build(run_opts, {"split": split})).run_path
    path = Path(given)
    if not path.is_file():
        raise CmrkitError(f"no such run file ({what})", path=path)
    check_run_of(path, read_sidecar(path), collection=coll, split=split, what=what)
    return path


def _load_data(
    coll: Path, opts: ReaderTrainOptions, run_opts: RunOptions, qrels_dir: Path | None
) -> _Data:
    from cmrkit.trec import ranked, read_run

    split = opts.train_split
    path, qrels = training.train_qrels(coll, split, qrels_dir)
    texts: dict[str, str] = {}
    mentions: dict[str, list[tuple[str, str, int, int]]] = {}
    for _, record in iter_corpus(coll):
        texts[record["id"]] = record["contents"]
        found = record.get("mentions") or []
        if found:
            mentions[record["id"]] = sorted(
                (str(m["cluster"]), str(m.get("mention_id")), int(m["start"]), int(m["end"]))
                for m in found
            )
    if opts.spans and not mentions:
        raise CmrkitError(
            "no unit of the corpus carries mention spans, and span training needs them; "
            "rebuild the collection with mentions, or pass --no-spans to train selection only",
            path=corpus_path(coll),
        )
    topics = [t for t in read_topics(coll, split) if t.qid in qrels]
    if not topics:
        raise CmrkitError(f"no topic of split {split!r} has judgments in the qrels", path=path)
    run_path = candidates_run(coll, split, opts.candidates, run_opts, "--candidates")
    run = read_run(run_path)
    if not any(t.qid in run for t in topics):
        raise CmrkitError(
            f"the candidates run holds none of the {split!r} queries (another split or "
            "collection?); give a run of the train split",
            path=run_path,
        )
    own_docs = own_document_units(coll, topics)
    kept_topics, positives, negatives = [], [], []
    skipped = {"no_positive": 0, "no_negative": 0}
    for t in topics:
        rel = {d for d, g in qrels[t.qid].items() if g > 0}
        ban = {t.unit} | set(own_docs.get(t.qid, frozenset()))
        cluster = t.cluster
        pos: list[tuple[str, tuple[int, int] | None]] = []
        for d in sorted(rel):
            if d not in texts or d in ban:
                continue
            if not opts.spans:
                pos.append((d, None))
                continue
            gold = [
                (s, e)
                for c, mid, s, e in mentions.get(d, [])
                if c == cluster and "_".join(mid.split()) != t.qid and 0 <= s < e
            ]
            if gold:
                pos.append((d, min(gold)))
        ranking = ranked(run.get(t.qid, {}))
        neg = [d for d, _ in ranking if d not in rel and d not in ban and d in texts][: opts.depth]
        if not pos:
            skipped["no_positive"] += 1
            continue
        if not neg:
            skipped["no_negative"] += 1
            continue
        kept_topics.append(t)
        positives.append(pos)
        negatives.append(neg)
    if not kept_topics:
        raise CmrkitError(
            f"no query of split {split!r} has both a relevant unit"
            + (" holding a mention of its cluster" if opts.spans else "")
            + " and a non-relevant candidate; check the qrels and the candidates run",
            path=path,
        )
    hashes = {
        **training.data_hashes(coll, path, "candidates_run", run_path),
        "candidates_run": str(run_path),
    }
    return _Data(kept_topics, positives, negatives, texts, hashes, skipped)


def _groups(
    data: _Data, opts: ReaderTrainOptions, rng: random.Random
) -> list[tuple[int, tuple[str, tuple[int, int] | None], list[str]]]:
    """(topic index, positive, negatives) for one epoch, shuffled."""
    out = []
    for i, pos in enumerate(data.positives):
        chosen = rng.choice(pos)
        pool = data.negatives[i]
        out.append((i, chosen, rng.sample(pool, min(opts.negatives, len(pool)))))
    rng.shuffle(out)
    return out


def _dev_scores(
    reader: Any,
    coll: Path,
    split: str,
    opts: ReaderTrainOptions,
    run_path: Path,
    texts: dict[str, str],
    qrels_dir: Path | None,
) -> tuple[dict[str, dict[str, tuple[float, float]]], dict[str, dict[str, float]], dict[str, Any]]:
    """The current reader's (selection, best span) scores of the candidates' top ``dev_depth``
    (``dev_queries`` judged queries of the dev split, evenly spread over its sorted qids), the
    candidates' own scores of the same units, and the judgments of those queries."""
    from cmrkit.retrieval.reader.scoring import score_candidates
    from cmrkit.trec import ranked, read_qrels, read_run

    qrels = read_qrels(qrels_path(coll, split, qrels_dir))
    run = read_run(run_path)
    judged = sorted(
        (t for t in read_topics(coll, split) if t.qid in qrels and t.qid in run),
        key=lambda t: t.qid,
    )
    # spread over the split, not its first qids (neighbouring qids share clusters: the first
    # 50 of the re-split's dev queries gave RR@10 1.0 at most weights, and tuned nothing)
    n, m = len(judged), min(opts.dev_queries, len(judged))
    topics = [judged[i * n // m] for i in range(m)]
    own_docs = own_document_units(coll, topics)
    heads = []
    for t in topics:
        ban = {t.unit} | set(own_docs.get(t.qid, frozenset()))
        heads.append([d for d, _ in ranked(run[t.qid]) if d not in ban][: opts.dev_depth])
    scored = score_candidates(reader, topics, heads, texts, batch_size=32)
    reader_scores = {
        t.qid: {d: (round(s.score, 6), round(s.span_score, 4)) for d, s in zip(h, v, strict=True)}
        for t, h, v in zip(topics, heads, scored, strict=True)
    }
    first = {
        t.qid: {d: float(run[t.qid][d]) for d in h} for t, h in zip(topics, heads, strict=True)
    }
    return reader_scores, first, {t.qid: qrels[t.qid] for t in topics}


def _measures(
    reader: dict[str, dict[str, tuple[float, float]]],
    first: dict[str, dict[str, float]],
    judged: dict[str, Any],
    span_weight: float,
    weight: float,
) -> dict[str, float]:
    """RR@10, AP@10, R@10 of the dev rankings at span weight S and interpolation weight W."""
    from cmrkit.retrieval.reader.rerank import combine

    run: dict[str, dict[str, float]] = {}
    for qid, scores in reader.items():
        docs = sorted(scores)
        final = combine(
            [scores[d][0] for d in docs],
            [scores[d][1] for d in docs],
            [first[qid][d] for d in docs],
            span_weight,
            weight,
        )
        run[qid] = {d: round(float(v), 6) for d, v in zip(docs, final.tolist(), strict=True)}
    return training.dev_scores(run, judged, DEV_MEASURES)


def tune_weights(
    reader: dict[str, dict[str, tuple[float, float]]],
    first: dict[str, dict[str, float]],
    judged: dict[str, Any],
    span_weight: float | None = None,
    weight: float | None = None,
) -> tuple[float, float, dict[str, dict[str, float]]]:
    """The span weight S (``SPAN_GRID``) and interpolation weight W (``WEIGHT_GRID``) with the
    best dev RR@10, then AP@10, then the smaller W, then the smaller S; a weight given is kept
    and only the other is tuned. Also the measures at every pair, keyed ``"s=S w=W"``."""
    spans = SPAN_GRID if span_weight is None else (span_weight,)
    weights = WEIGHT_GRID if weight is None else (weight,)
    table = {
        f"s={sw:g} w={w:g}": _measures(reader, first, judged, sw, w)
        for sw in spans
        for w in weights
    }

    def key(pair: tuple[float, float]) -> tuple[float, float, float, float]:
        got = table[f"s={pair[0]:g} w={pair[1]:g}"]
        return (got["RR@10"], got["AP@10"], -pair[1], -pair[0])

    best = max(((sw, w) for sw in spans for w in weights), key=key)
    return best[0], best[1], table


_WEIGHTS = (  # key in the reader folder, its option, its value when nothing tunes it
    ("interpolation", "--interpolation", DEFAULT_INTERPOLATION),
    ("span_weight", "--span-weight", DEFAULT_SPAN_WEIGHT),
)


def recorded_weights(
    opts: ReaderTrainOptions, dev_scored: tuple[Any, Any, Any] | None, dev_split: str | None
) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """W and S as the reader folder records them (``{"weight", "how"}`` each): as given, else
    tuned together on the last dev reranking (``dev_scored``), else the defaults. Also the
    tuning's log entry (the dev table and the choice), None when nothing was tuned."""
    tuned: dict[str, float] = {}
    table = None
    if dev_scored is not None and (opts.interpolation is None or opts.span_weight is None):
        span_weight, weight, table = tune_weights(*dev_scored, opts.span_weight, opts.interpolation)
        tuned = {"interpolation": weight, "span_weight": span_weight}
    out: dict[str, dict[str, Any]] = {}
    for key, flag, default in _WEIGHTS:
        given = getattr(opts, key)
        if given is not None:
            out[key] = {"weight": given, "how": flag}
        elif key in tuned:
            out[key] = {
                "weight": tuned[key],
                "how": f"tuned on dev split {dev_split!r} (best RR@10 of the last dev reranking)",
            }
        else:
            out[key] = {"weight": default, "how": "the default (no dev split to tune it on)"}
    return out, (None if table is None else {"dev": table, **out})


def train_reader(
    collection: str | Path,
    output: str | Path,
    *,
    model: str = DEFAULT_MODEL,
    markers: tuple[str, str] | None = None,
    device: str = "auto",
    train: ReaderTrainOptions | None = None,
    run_options: RunOptions | None = None,
    qrels_dir: str | Path | None = None,
    plot: bool = False,
    force: bool = False,
    progress: bool = True,
    argv: list[str] | None = None,
) -> training.TrainedModel:
    """Fine-tune a reader (base: any local Hugging Face encoder folder, default the offline
    MiniLM) on the train split of ``collection``; save it to ``output``."""
    from cmrkit.retrieval.neural import quiet_hub
    from cmrkit.retrieval.reader.model import ENCODER, HEADS, READER_METADATA

    quiet_hub()
    started = time.perf_counter()
    opts = train or ReaderTrainOptions()
    opts.check()
    coll = collection_dir(collection)
    out = Path(output)
    # the output is claimed now, as the run commands do: a second training writing the same
    # folder fails at once naming this one, instead of both training and one reader being lost
    files = [HEADS, f"{ENCODER}/config.json"]
    with training.ModelFolder(
        out, kind="reader", metadata=READER_METADATA, files=files, force=force
    ) as folder:
        folder.check_options(training.options_record(opts), derived=("dev_split",))
        qdir = Path(qrels_dir) if qrels_dir is not None else None
        base_run = RunOptions.build(run_options, {"split": opts.train_split, "argv": None})
        session = _Training.prepare(coll, opts, model, markers, device, base_run, qdir)
        # the sequences are counted while training (None here): the same data, options and
        # seed give the same count, so it is not compared, nor are the weights tuned at the end
        kept = folder.kept(
            session.metadata(session.steps, None),
            varying=["data.collection", "parameters.sequences", "interpolation", "span_weight"],
        )
        if kept is not None:
            if plot:
                folder.plot(kept, _plot)
            return training.TrainedModel(
                out, session.metadata(session.steps, None), kept, up_to_date=True
            )
        trained, log = session.fit(progress, argv, started)
        target = folder.target()
        target.mkdir(parents=True, exist_ok=True)
        session.save(target, trained)
        folder.finish(log, _plot if plot else None)
        return training.TrainedModel(out, trained, log)


Group = tuple[int, tuple[str, tuple[int, int] | None], list[str]]  # topic, positive, negatives


@dataclass
class _Training:
    """One training of the reader, from its data and starting network to the trained folder:
    :meth:`prepare` reads the data and builds the network and the epochs' groups; :meth:`fit`
    runs the steps (``batch_loss``), the dev reranking after each epoch (``eval_dev``) and the
    weights' tuning; :meth:`save` writes the reader."""

    coll: Path
    opts: ReaderTrainOptions
    base: Any  # the base encoder (ModelRef)
    markers: tuple[str, str]
    dev_split: str | None
    dev_run: Path | None
    qdir: Path | None
    data: _Data
    device: str
    net: Any
    tokenizer: Any
    lay: Any
    qwin: list[Any]
    epochs: list[list[Group]]
    steps: int
    timings: dict[str, float]
    pick: random.Random  # the windows of the negatives
    n_sequences: int = 0
    dev_scored: Any = None  # the last dev reranking (reader, first stage, judgments)
    _passages: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def prepare(
        cls,
        coll: Path,
        opts: ReaderTrainOptions,
        model: str,
        markers: tuple[str, str] | None,
        device: str,
        base_run: RunOptions,
        qdir: Path | None,
    ) -> _Training:
        """Read the data (making the first-stage runs when needed), seed, build the network
        and draw every epoch's groups."""
        from cmrkit.retrieval.dense.models import resolve_model
        from cmrkit.retrieval.dense.options import DEFAULT_MARKERS
        from cmrkit.retrieval.neural import resolve_device
        from cmrkit.retrieval.reader.features import layout, query_spacy, topic_windows
        from cmrkit.retrieval.reader.model import ReaderNet, load_encoder

        dev_split = training_splits(coll, opts.train_split, opts.dev_split, qdir)
        base = resolve_model(model)
        markers = markers or DEFAULT_MARKERS
        t0 = time.perf_counter()
        data = _load_data(coll, opts, base_run, qdir)
        dev_run = (
            candidates_run(coll, dev_split, None, base_run, "dev candidates")
            if dev_split is not None
            else None
        )
        timings = {"data": round(time.perf_counter() - t0, 3)}
        training.seed_all(opts.seed)
        dev = resolve_device(device)
        encoder, tokenizer = load_encoder(base.path)
        net = ReaderNet(encoder, opts.select, opts.dropout).to(dev)
        lay = layout(tokenizer, opts.max_length, opts.query_max_length)
        qwin = topic_windows(
            tokenizer, data.topics, markers, lay.query_budget, query_spacy(vars(opts))
        )
        rng = random.Random(opts.seed)
        epochs = [_groups(data, opts, rng) for _ in range(opts.epochs)]
        steps = training.total_steps(epochs, opts.batch_size, opts.max_steps)
        return cls(
            coll, opts, base, markers, dev_split, dev_run, qdir, data, dev, net, tokenizer, lay,
            qwin, epochs, steps, timings, random.Random(opts.seed + 1),
        )  # fmt: skip

    def metadata(self, steps: int, sequences: int | None) -> dict[str, Any]:
        """What the reader folder records of its training (``steps`` taken, ``sequences``
        read: None before training)."""
        from cmrkit.retrieval.reader.model import READER_FORMAT

        opts, data = self.opts, self.data
        return {
            "format": READER_FORMAT,
            "select": opts.select,
            "markers": list(self.markers),
            "base_model": {**self.base.identity(), "tag": self.base.tag},
            "data": {
                "collection": str(self.coll),
                "train_split": opts.train_split,
                "n_queries": len(data.topics),
                "n_groups": sum(len(e) for e in self.epochs),
                "skipped_queries": data.skipped,
                **{k: v for k, v in data.hashes.items() if k != "candidates_run"},
            },
            "parameters": {
                **training.options_record(opts),
                "dev_split": self.dev_split,
                "steps": steps,
                "sequences": sequences,
                "device": self.device,
            },
        }

    def fit(
        self, progress: bool, argv: list[str] | None, started: float
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Train; the trained reader's metadata (with its weights W and S) and its training
        log."""
        opts = self.opts
        named = [(n, p) for n, p in self.net.named_parameters() if p.requires_grad]
        optimizer = training.adamw(
            [
                ([(n, p) for n, p in named if n.startswith("encoder.")], opts.learning_rate),
                (
                    [(n, p) for n, p in named if not n.startswith("encoder.")],
                    opts.head_learning_rate,
                ),
            ],
            opts.weight_decay,
        )
        log, step = training.train_epochs(
            self.epochs,
            batch_size=opts.batch_size,
            steps=self.steps,
            batch_loss=self.batch_loss,
            train_mode=self.net.train,
            parameters=[p for _, p in named],
            optimizer=optimizer,
            scheduler=training.linear_schedule(optimizer, opts.warmup, self.steps),
            eval_dev=self.eval_dev if self.dev_run is not None else None,
            timings=self.timings,
            progress=progress,
            label=f"training the reader on {self.coll.name} {opts.train_split}",
            dev_before=False,  # the heads start random: a dev score before training is noise
        )
        seconds = self.timings
        seconds["sequences_per_second"] = round(self.n_sequences / max(seconds["train"], 1e-9), 3)
        trained = self.metadata(step, self.n_sequences)
        weights, tuning = recorded_weights(opts, self.dev_scored if step else None, self.dev_split)
        trained.update(weights)
        if tuning is not None:
            log["weights"] = tuning
        run = ("candidates_run", self.data.hashes["candidates_run"])
        return trained, training.training_log(argv, run, log, seconds, started)

    def save(self, target: Path, metadata: dict[str, Any]) -> None:
        from cmrkit.retrieval.reader.model import save_reader

        save_reader(self.net, self.tokenizer, target, metadata)

    def eval_dev(self) -> dict[str, float]:
        """The dev reranking of the current network, at S = W = 0 (kept for the tuning)."""
        from cmrkit.retrieval.reader.features import query_spacy
        from cmrkit.retrieval.reader.scoring import Reader

        assert self.dev_split is not None and self.dev_run is not None
        opts = self.opts
        reader = Reader(
            self.net, self.tokenizer, self.lay, self.markers, opts.stride, opts.max_span,
            query_spacy(vars(opts)), self.device,
        )  # fmt: skip
        self.dev_scored = _dev_scores(
            reader, self.coll, self.dev_split, opts, self.dev_run, self.data.texts, self.qdir
        )
        return _measures(*self.dev_scored, 0.0, 0.0)

    def batch_loss(self, groups: Sequence[Group]) -> Any:
        """Cross-entropy of the selection scores across each group (the positive first), plus
        that of the positives' span starts and ends over their passage tokens."""
        import torch

        from cmrkit.retrieval.reader.model import best_spans, collate, passage_mask

        seqs, bounds, golds = self._items(groups)
        self.n_sequences += len(seqs)
        net, dev, opts = self.net, self.device, self.opts
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        hidden = net.hidden(collate(seqs, self.lay, pad, dev))
        start, end = net.span_logits(hidden)
        valid = passage_mask(seqs, hidden.shape[1], dev)
        if opts.select == "cls":
            scores = net.cls_scores(hidden)
        else:
            with torch.no_grad():
                spans, _ = best_spans(start.detach(), end.detach(), valid, opts.max_span)
            for row, target in golds:
                if target is not None:
                    spans[row, 0], spans[row, 1] = target[0], target[1]
            query = torch.tensor([x.query_mention for x in seqs], device=dev)
            scores = net.coref_scores(hidden, query, spans)
        ce = torch.nn.functional.cross_entropy
        target0 = torch.zeros(1, dtype=torch.long, device=dev)
        loss = torch.stack([ce(scores[lo:hi][None], target0) for lo, hi in bounds]).mean()
        with_span = [(row, t) for row, t in golds if t is not None]
        if opts.spans and with_span:
            rows = torch.tensor([r for r, _ in with_span], device=dev)
            s_gold = torch.tensor([t[0] for _, t in with_span], device=dev)
            e_gold = torch.tensor([t[1] for _, t in with_span], device=dev)
            mask = ~valid[rows]
            s_log = start[rows].masked_fill(mask, -1e4)
            e_log = end[rows].masked_fill(mask, -1e4)
            loss = loss + (ce(s_log, s_gold) + ce(e_log, e_gold)) / 2
        return loss

    def _items(
        self, groups: Sequence[Group]
    ) -> tuple[list[Any], list[tuple[int, int]], list[tuple[int, tuple[int, int] | None]]]:
        """The sequences of a batch of groups (each group's positive, then its negatives), each
        group's rows, and each positive's row with its span target (token positions; None
        when it has none in its window)."""
        seqs: list[Any] = []
        bounds: list[tuple[int, int]] = []
        golds: list[tuple[int, tuple[int, int] | None]] = []
        for i, (docno, gold), negs in groups:
            lo = len(seqs)
            x, target = self._positive(i, docno, gold)
            seqs.append(x)
            golds.append((lo, target))
            seqs.extend(self._negative(i, d) for d in negs)
            bounds.append((lo, len(seqs)))
        return seqs, bounds, golds

    def _passage(self, docno: str) -> Any:
        from cmrkit.retrieval.reader.features import passage_tokens

        if docno not in self._passages:
            self._passages[docno] = passage_tokens(self.tokenizer, [self.data.texts[docno]])[0]
        return self._passages[docno]

    def _positive(self, i: int, docno: str, gold: tuple[int, int] | None) -> tuple[Any, Any]:
        """The positive read in the first window that holds its gold mention whole (from the
        mention's start when no window does), with the span target in that sequence."""
        from cmrkit.retrieval.reader.features import char_to_tokens, item, window_starts

        lay, p = self.lay, self._passage(docno)
        starts = window_starts(len(p.ids), lay.passage_budget, self.opts.stride)
        tokens = char_to_tokens(p.offsets, *gold) if gold is not None else None
        if tokens is None:
            return item(lay, self.qwin[i], p, starts[0]), None
        first, last = tokens
        inside = [s for s in starts if s <= first and last < s + lay.passage_budget]
        if not inside:  # a mention longer than a window: read from its start
            return item(lay, self.qwin[i], p, first), None
        x = item(lay, self.qwin[i], p, inside[0])
        return x, (x.passage_at + first - x.window, x.passage_at + last - x.window)

    def _negative(self, i: int, docno: str) -> Any:
        """A negative read in one of its windows, drawn at random."""
        from cmrkit.retrieval.reader.features import item, window_starts

        p = self._passage(docno)
        starts = window_starts(len(p.ids), self.lay.passage_budget, self.opts.stride)
        return item(self.lay, self.qwin[i], p, self.pick.choice(starts))


def _plot(log: dict[str, Any], path: Path) -> None:
    """The loss per step and the reranked dev measures per epoch."""
    plot_training(log, path, DEV_MEASURES, "dev (reranked)")
