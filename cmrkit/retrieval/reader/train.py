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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from cmrkit.retrieval.entities import DEFAULT_MODEL as DEFAULT_SPACY_MODEL
from cmrkit.retrieval.options import RunOptions
from cmrkit.retrieval.runfile import check_run_of, own_document_units, read_sidecar
from cmrkit.retrieval.training import (
    ModelFolder,
    TrainedModel,
    adamw,
    check_steps,
    data_hashes,
    dev_scores,
    linear_schedule,
    options_record,
    seed_all,
    total_steps,
    train_epochs,
    train_qrels,
    training_log,
)

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
        from cmrkit.retrieval.reader.rerank import check_weights

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
        check_steps(self.max_steps, self.warmup)
        if not self.learning_rate > 0 or not self.head_learning_rate > 0:
            raise CmrkitError("--lr and --head-lr must be above 0")
        check_weights(self.interpolation, self.span_weight)
        if not 0 <= self.dropout < 1:
            raise CmrkitError(f"--dropout must lie in [0, 1), got {self.dropout}")


ReaderTrainResult = TrainedModel


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
    path, qrels = train_qrels(coll, split, qrels_dir)
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
        **data_hashes(coll, path, "candidates_run", run_path),
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
    net: Any,
    tokenizer: Any,
    lay: Any,
    coll: Path,
    split: str,
    markers: tuple[str, str],
    opts: ReaderTrainOptions,
    run_path: Path,
    texts: dict[str, str],
    device: str,
    qrels_dir: Path | None,
) -> tuple[dict[str, dict[str, tuple[float, float]]], dict[str, dict[str, float]], dict[str, Any]]:
    """The current reader's (selection, best span) scores of the candidates' top ``dev_depth``
    (``dev_queries`` judged queries of the dev split, evenly spread over its sorted qids), the
    candidates' own scores of the same units, and the judgments of those queries."""
    from cmrkit.retrieval.reader.features import passage_tokens, query_spacy, topic_windows
    from cmrkit.retrieval.reader.rerank import score_pairs
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
    qwin = topic_windows(tokenizer, topics, markers, lay.query_budget, query_spacy(vars(opts)))
    docnos = sorted({d for h in heads for d in h})
    where = {d: i for i, d in enumerate(docnos)}
    ptoks = passage_tokens(tokenizer, [texts[d] for d in docnos])
    pairs = [(qi, where[d]) for qi, h in enumerate(heads) for d in h]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    scored = score_pairs(
        net,
        lay,
        pad,
        qwin,
        ptoks,
        pairs,
        stride=opts.stride,
        max_span=opts.max_span,
        batch_size=32,
        device=device,
    )
    reader: dict[str, dict[str, tuple[float, float]]] = {t.qid: {} for t in topics}
    for (qi, pi), s in zip(pairs, scored, strict=True):
        reader[topics[qi].qid][docnos[pi]] = (round(s.score, 6), round(s.span_score, 4))
    first = {
        t.qid: {d: float(run[t.qid][d]) for d in h} for t, h in zip(topics, heads, strict=True)
    }
    return reader, first, {t.qid: qrels[t.qid] for t in topics}


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
    return dev_scores(run, judged, DEV_MEASURES)


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
    model: str = "all-MiniLM-L6-v2",
    markers: tuple[str, str] | None = None,
    device: str = "auto",
    train: ReaderTrainOptions | None = None,
    run_options: RunOptions | None = None,
    qrels_dir: str | Path | None = None,
    plot: bool = False,
    force: bool = False,
    progress: bool = True,
    argv: list[str] | None = None,
) -> ReaderTrainResult:
    """Fine-tune a reader (base: any local Hugging Face encoder folder, default the offline
    MiniLM) on the train split of ``collection``; save it to ``output``."""
    from cmrkit.retrieval.dense.models import quiet_hub
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
    with ModelFolder(
        out, kind="reader", metadata=READER_METADATA, files=files, force=force
    ) as folder:
        folder.check_options(options_record(opts), derived=("dev_split",))
        return _train(
            coll,
            out,
            folder,
            model,
            markers,
            device,
            opts,
            run_options,
            qrels_dir,
            plot,
            progress,
            argv,
            started,
        )


def _train(
    coll: Path,
    out: Path,
    folder: ModelFolder,
    model: str,
    markers: tuple[str, str] | None,
    device: str,
    opts: ReaderTrainOptions,
    run_options: RunOptions | None,
    qrels_dir: str | Path | None,
    plot: bool,
    progress: bool,
    argv: list[str] | None,
    started: float,
) -> ReaderTrainResult:
    import torch

    from cmrkit.retrieval.dense.models import resolve_device, resolve_model
    from cmrkit.retrieval.dense.options import DEFAULT_MARKERS
    from cmrkit.retrieval.reader.features import (
        char_to_tokens,
        item,
        layout,
        passage_tokens,
        query_spacy,
        topic_windows,
        window_starts,
    )
    from cmrkit.retrieval.reader.model import (
        READER_FORMAT,
        ReaderNet,
        best_spans,
        collate,
        load_encoder,
        passage_mask,
        save_reader,
    )

    qdir = Path(qrels_dir) if qrels_dir is not None else None
    dev_split = training_splits(coll, opts.train_split, opts.dev_split, qdir)
    ref = resolve_model(model)
    markers = markers or DEFAULT_MARKERS
    base_run = RunOptions.build(run_options, {"split": opts.train_split, "argv": None})
    t0 = time.perf_counter()
    data = _load_data(coll, opts, base_run, qdir)
    dev_run = (
        candidates_run(coll, dev_split, None, base_run, "dev candidates")
        if dev_split is not None
        else None
    )
    timings: dict[str, float] = {"data": round(time.perf_counter() - t0, 3)}

    seed_all(opts.seed)
    dev = resolve_device(device)
    encoder, tokenizer = load_encoder(ref.path)
    net = ReaderNet(encoder, opts.select, opts.dropout).to(dev)
    lay = layout(tokenizer, opts.max_length, opts.query_max_length)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    qwin = topic_windows(tokenizer, data.topics, markers, lay.query_budget, query_spacy(vars(opts)))
    ptok_cache: dict[str, Any] = {}

    def ptok(docno: str) -> Any:
        if docno not in ptok_cache:
            ptok_cache[docno] = passage_tokens(tokenizer, [data.texts[docno]])[0]
        return ptok_cache[docno]

    rng = random.Random(opts.seed)
    epochs = [_groups(data, opts, rng) for _ in range(opts.epochs)]
    steps = total_steps(epochs, opts.batch_size, opts.max_steps)

    def metadata(steps: int, sequences: int | None) -> dict[str, Any]:
        params = {
            **options_record(opts),
            "dev_split": dev_split,
            "steps": steps,
            "sequences": sequences,
            "device": dev,
        }
        return {
            "format": READER_FORMAT,
            "select": opts.select,
            "markers": list(markers),
            "base_model": {**ref.identity(), "tag": ref.tag},
            "data": {
                "collection": str(coll),
                "train_split": opts.train_split,
                "n_queries": len(data.topics),
                "n_groups": sum(len(e) for e in epochs),
                "skipped_queries": data.skipped,
                **{k: v for k, v in data.hashes.items() if k != "candidates_run"},
            },
            "parameters": params,
        }

    # the sequences are counted while training: the same data, options and seed give the same
    kept = folder.kept(
        metadata(steps, None),
        varying=["data.collection", "parameters.sequences", "interpolation", "span_weight"],
    )
    if kept is not None:
        if plot:
            folder.plot(kept, _plot)
        return ReaderTrainResult(out, metadata(steps, None), kept, up_to_date=True)
    named = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
    encoder_named = [(n, p) for n, p in named if n.startswith("encoder.")]
    head_named = [(n, p) for n, p in named if not n.startswith("encoder.")]
    optimizer = adamw(
        [(encoder_named, opts.learning_rate), (head_named, opts.head_learning_rate)],
        opts.weight_decay,
    )
    scheduler = linear_schedule(optimizer, opts.warmup, steps)

    def positive_item(i: int, docno: str, gold: tuple[int, int] | None) -> tuple[Any, Any]:
        p = ptok(docno)
        starts = window_starts(len(p.ids), lay.passage_budget, opts.stride)
        if gold is None:
            return item(lay, qwin[i], p, starts[0]), None
        tokens = char_to_tokens(p.offsets, *gold)
        if tokens is None:
            return item(lay, qwin[i], p, starts[0]), None
        first, last = tokens
        inside = [s for s in starts if s <= first and last < s + lay.passage_budget]
        if not inside:  # a mention longer than a window: read from its start
            return item(lay, qwin[i], p, first), None
        x = item(lay, qwin[i], p, inside[0])
        return x, (x.passage_at + first - x.window, x.passage_at + last - x.window)

    def negative_item(i: int, docno: str, pick: random.Random) -> Any:
        p = ptok(docno)
        starts = window_starts(len(p.ids), lay.passage_budget, opts.stride)
        return item(lay, qwin[i], p, pick.choice(starts))

    eval_dev = None
    dev_scored: list[Any] = []
    if dev_split is not None and dev_run is not None:
        dev_texts = data.texts

        def eval_dev() -> dict[str, float]:
            scored = _dev_scores(
                net, tokenizer, lay, coll, dev_split, markers, opts, dev_run, dev_texts, dev, qdir
            )
            dev_scored[:] = [scored]
            return _measures(*scored, 0.0, 0.0)

    n_sequences = 0
    pick = random.Random(opts.seed + 1)
    ce = torch.nn.functional.cross_entropy

    def batch_loss(batch_groups: Sequence[Any]) -> Any:
        nonlocal n_sequences
        seqs: list[Any] = []
        bounds: list[tuple[int, int]] = []
        golds: list[tuple[int, tuple[int, int] | None]] = []
        for i, (docno, gold), negs in batch_groups:
            lo = len(seqs)
            x, target = positive_item(i, docno, gold)
            seqs.append(x)
            golds.append((lo, target))
            seqs.extend(negative_item(i, d, pick) for d in negs)
            bounds.append((lo, len(seqs)))
        n_sequences += len(seqs)
        inputs = collate(seqs, lay, pad, dev)
        hidden = net.hidden(inputs)
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

    log, step = train_epochs(
        epochs,
        batch_size=opts.batch_size,
        steps=steps,
        batch_loss=batch_loss,
        train_mode=net.train,
        parameters=[p for _, p in named],
        optimizer=optimizer,
        scheduler=scheduler,
        eval_dev=eval_dev,
        timings=timings,
        progress=progress,
        label=f"training the reader on {coll.name} {opts.train_split}",
        dev_before=False,  # the heads start random: a dev score before training is noise
    )
    timings["sequences_per_second"] = round(n_sequences / max(timings["train"], 1e-9), 3)

    trained = metadata(step, n_sequences)
    weights, tuning = recorded_weights(
        opts, dev_scored[0] if dev_scored and step else None, dev_split
    )
    trained.update(weights)
    if tuning is not None:
        log["weights"] = tuning
    log_out = training_log(
        argv, ("candidates_run", data.hashes["candidates_run"]), log, timings, started
    )
    target = folder.target()
    target.mkdir(parents=True, exist_ok=True)
    save_reader(net, tokenizer, target, trained)
    folder.finish(log_out, _plot if plot else None)
    return ReaderTrainResult(out, trained, log_out)


def _plot(log: dict[str, Any], path: Path) -> None:
    """The loss per step and the reranked dev measures per epoch."""
    plot_training(log, path, DEV_MEASURES, "dev (reranked)")
