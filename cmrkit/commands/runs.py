"""The `run` and `train` groups, and what the run commands share: the run options, declared
once (as Pyserini's ``define_search_args``), the rerunnable command line, the options record and
the report.

Every system's command (`run bm25`, `run dense`, `run fuse`, `run rerank`, ...) adds itself to
:data:`run_app`, takes its shared options from here, builds :func:`run_options` and ends with
:func:`report_run`.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cmrkit.commands.choices import Engine, plain
from cmrkit.commands.group import group
from cmrkit.console import console, out
from cmrkit.spacy_model import DEFAULT_SPACY_MODEL

if TYPE_CHECKING:
    from cmrkit.retrieval.options import RunOptions

DEFAULT_COLLECTION = Path("collections/sample")

run_app = group(
    order=("bm25", "fields", "qe", "dense", "fuse", "rerank", "coref"),
    help="Run a retrieval baseline over a collection's index; writes runs/NAME/SYSTEM.SPLIT.trec "
    "and a JSON sidecar.",
)
train_app = group(
    order=("dense", "reader", "coref"),
    help="Train a retrieval model on a collection's own queries, or a mention encoder for "
    "coreference.",
)


# how a run is made, not what it is: the sidecar records the engine apart
_NOT_IN_COMMAND = (
    "quiet",
    "verbose",
    "force",
    "auto_index",
    "engine",
    "address",
    "workers",
    "gpus_per_worker",
)


def rerun_argv(ctx: typer.Context) -> list[str]:
    """The command as a full, explicit command line (every option spelled out) that reruns it."""

    names, c = [], ctx
    while c.parent is not None:
        names.append(c.info_name)
        c = c.parent
    words = ["cmrkit", *reversed(names)]
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if param.name in _NOT_IN_COMMAND or value is None:
            continue
        if param.param_type_name == "argument":
            words.append(str(value))
        elif isinstance(value, bool):
            if value:
                words.append(param.opts[0])
            elif param.secondary_opts:
                words.append(param.secondary_opts[0])
        else:
            words += [
                param.opts[-1] if param.opts[-1].startswith("--") else param.opts[0],
                str(value),
            ]
    return words


def leaves_cluster(command: Callable[..., Any]) -> Callable[..., Any]:
    """A command that leaves the Ray cluster it connected to (``--engine ray``) when it ends:
    cmrkit's process ends without the interpreter's exit handlers, so Ray's own would not stop
    a local cluster's processes."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        finally:
            engine = sys.modules.get("cmrkit.retrieval.distributed.engine")
            if engine is not None:
                engine.disconnect()

    return wrapper


def engine_options(
    engine: str, address: str | None, workers: int | None, gpus: float | None = None
):
    """The --engine, --address, --workers (and --gpus-per-worker) options as one record."""
    from cmrkit.retrieval.distributed.engine import EngineOptions

    return EngineOptions(plain(engine), address, workers, gpus)


def run_options(ctx: typer.Context, *, leaves: Iterable[str] = (), **overrides) -> RunOptions:
    """The shared run options of a command, as one record (with the rerunnable command): every
    field of RunOptions read from the command's option of its name (``options.bind``), but
    ``leaves``, the fields the command has no option for (left at their defaults, by name), and
    ``overrides``; ``progress`` is not --quiet, ``engine`` --engine and its Ray options
    (commands without --engine run locally)."""
    from cmrkit.commands.options import bind
    from cmrkit.retrieval.options import RunOptions

    p = ctx.params
    engine = engine_options(
        p.get("engine", "local"), p.get("address"), p.get("workers"), p.get("gpus_per_worker")
    )
    return bind(
        RunOptions,
        p,
        leaves=leaves,
        progress=not p["quiet"],
        argv=tuple(rerun_argv(ctx)),
        engine=engine,
        **{key: plain(value) for key, value in overrides.items()},
    )


def lucene_run(
    ctx: typer.Context, *, leaves: Iterable[str] = (), **overrides: Any
) -> dict[str, Any]:
    """The keywords every Lucene system function takes from a command: BM25's ``k1`` and ``b``
    and the shared options (``leaves`` and ``overrides`` as for :func:`run_options`)."""
    options = run_options(ctx, leaves=leaves, **overrides)
    return {"k1": ctx.params["k1"], "b": ctx.params["b"], "options": options}


def report_run(result) -> None:
    """One line for a run written (or found up to date), with its warnings."""
    side = result.sidecar
    if result.up_to_date:
        out.print(
            f"{result.run_path} is up to date (same system, parameters, index and topics); "
            "--force reruns it"
        )
        return
    if "learned_weights" in side:
        learned = ",".join(f"{f}={w:g}" for f, w in side["learned_weights"].items())
        out.print(f"learned weights: {learned}")
    warned = len(side["warnings"])
    out.print(
        f"wrote {result.run_path} ({side['n_queries']} queries, "
        f"{side['n_queries_with_results']} with results) and {result.sidecar_path.name}"
    )
    if warned:
        console.print(
            f"{warned} query warning(s) recorded in {result.sidecar_path}",
            style="yellow",
            soft_wrap=True,
        )


def report_training(result, detail: str = "", rate: str = "", *, plot: bool = False) -> None:
    """One line for a model trained (or found up to date): ``detail`` after the steps, ``rate``
    before the mean loss; with ``plot`` (--plot), a second line saying where the plot is."""
    from cmrkit.retrieval.training import PLOT

    if result.up_to_date:
        out.print(
            f"{result.path} is up to date (same base model, data, options and seed); "
            "--force trains it again",
            markup=False,
        )
    else:
        _report_trained(result, detail, rate)
    if plot:
        out.print(f"loss plot: {result.path / PLOT}", markup=False)


def _report_trained(result, detail: str, rate: str) -> None:
    last = result.log["epochs"][-1] if result.log["epochs"] else {}
    dev = last.get("dev")
    shown = (", dev " + " ".join(f"{k} {v:.4f}" for k, v in dev.items())) if dev else ""
    used = result.log.get("used") or {}
    if used.get("queries") is not None and used.get("of_queries") is not None:
        # what the steps took: --max-steps may stop long before every query was seen
        detail = f" on {used['queries']:,} of {used['of_queries']:,} queries{detail}"
    out.print(
        f"trained {result.metadata['parameters']['steps']} steps{detail} "
        f"({rate}mean loss {last.get('mean_loss', float('nan')):.4f}{shown}); saved {result.path}"
    )


COLLECTION_ARG = typer.Argument(
    DEFAULT_COLLECTION, help="Collection folder (holds corpus.jsonl.gz and index/)."
)
SPLIT = typer.Option(
    None, "--split", help="Topic split to run [default: test, else the collection's only split]."
)
K = typer.Option(1000, "-k", "--k", help="Results per query (the query's own unit never counts).")
K1 = typer.Option(0.9, "--k1", help="BM25 k1.")
B = typer.Option(0.4, "--b", help="BM25 b.")
THREADS = typer.Option(2, "--threads", help="Search threads.")
SPACY = typer.Option(
    DEFAULT_SPACY_MODEL, "--spacy-model", help="spaCy model for entities/sentences."
)
NAME = typer.Option(None, "--name", help="Run name (file runs/COLLECTION/NAME.SPLIT.trec).")
RUNS = typer.Option(Path("runs"), "--runs-dir", help="Folder that holds runs/COLLECTION/.")
FORCE = typer.Option(False, "--force", help="Overwrite an existing run and sidecar.")
VERBOSE = typer.Option(False, "--verbose", help="Show Lucene's own log output.")
QUIET = typer.Option(False, "--quiet", help="No progress bar.")
AUTO_INDEX = typer.Option(
    True,
    "--auto-index/--no-auto-index",
    help="Build a missing or stale index first (with the index defaults); "
    "--no-auto-index refuses instead.",
)
ENGINE = typer.Option(
    Engine.local,
    "--engine",
    help="local (this process) or ray (a Ray cluster; needs pip install 'cmrkit[ray]').",
)
ADDRESS = typer.Option(
    None,
    "--address",
    help="Ray cluster address (auto, HOST:PORT, ray://HOST:10001) [default: start a Ray "
    "cluster on this machine].",
)
WORKERS = typer.Option(
    None, "--workers", help="Ray: tasks at once [default: the cluster's CPUs].", min=1
)
GPUS = typer.Option(
    None,
    "--gpus-per-worker",
    help="Ray: GPUs each worker holds (refused on a cluster without GPUs) [default: 1 where "
    "the cluster has GPUs and --device is not cpu, else none].",
)

# the options `train dense` and `train reader` share
TRAIN_SPLIT = typer.Option("train", "--train-split", help="Split to train on.")
WEIGHT_DECAY = typer.Option(0.01, "--weight-decay", help="AdamW weight decay.")
WARMUP = typer.Option(0.1, "--warmup", help="Share of steps warming up.")
MAX_STEPS = typer.Option(None, "--max-steps", help="Stop after N steps.")
SEED = typer.Option(13, "--seed", help="Seed for sampling, shuffling, dropout.")
QRELS_DIR = typer.Option(
    None, "--qrels-dir", help="Folder holding NAME.SPLIT.txt qrels (default qrels/)."
)
PLOT = typer.Option(False, "--plot", help="Also write loss.png in the folder.")

# the options every Lucene run command shares, in the order `--help` and the rerunnable command
# list them: (type, declaration)
SHARED: dict[str, tuple[Any, Any]] = {
    "k": (int, K),
    "k1": (float, K1),
    "b": (float, B),
    "threads": (int, THREADS),
    "spacy_model": (str, SPACY),
    "name": (str | None, NAME),
    "runs_dir": (Path, RUNS),
    "force": (bool, FORCE),
    "verbose": (bool, VERBOSE),
    "quiet": (bool, QUIET),
    "auto_index": (bool, AUTO_INDEX),
    "engine": (Engine, ENGINE),
    "address": (str | None, ADDRESS),
    "workers": (int | None, WORKERS),
}
LUCENE_RUN = tuple(SHARED)
# the Ray options of the neural commands (encode, run dense, run rerank)
NEURAL_ENGINE: dict[str, tuple[Any, Any]] = {
    "engine": (Engine, ENGINE),
    "address": (str | None, ADDRESS),
    "workers": (int | None, WORKERS),
    "gpus_per_worker": (float | None, GPUS),
}

# the options `train dense` and `train reader` share, after each command's own; the trainers
# read them with :func:`training_call`
TRAINING: dict[str, tuple[Any, Any]] = {
    "train_split": (str, TRAIN_SPLIT),
    "weight_decay": (float, WEIGHT_DECAY),
    "warmup": (float, WARMUP),
    "max_steps": (int | None, MAX_STEPS),
    "seed": (int, SEED),
    "qrels_dir": (Path | None, QRELS_DIR),
    "plot": (bool, PLOT),
    # the first-stage run a trainer makes on the fly
    **{
        n: SHARED[n]
        for n in ("threads", "spacy_model", "runs_dir", "verbose", "quiet", "auto_index")
    },
}
_DECLARED = {**SHARED, **TRAINING, **NEURAL_ENGINE}


def training_recipe(ctx: typer.Context) -> dict[str, Any]:
    """The shared options that are part of a training recipe, as the trainers' options take
    them (``train_split``, ``weight_decay``, ``warmup``, ``max_steps``, ``seed``)."""
    names = ("train_split", "weight_decay", "warmup", "max_steps", "seed")
    return {k: ctx.params[k] for k in names}


def training_call(ctx: typer.Context) -> dict[str, Any]:
    """The keyword arguments both trainers take from the shared options: the options of the
    first-stage run made on the fly, where qrels are, the plot, progress and the command line.
    The command's own --force replaces the model folder only."""
    return {
        # the run is made on the fly on the train split, named and cut as the trainer says
        "run_options": run_options(ctx, leaves=("k", "name", "split"), force=False),
        "qrels_dir": ctx.params["qrels_dir"],
        "plot": ctx.params["plot"],
        "progress": not ctx.params["quiet"],
        "argv": rerun_argv(ctx),
    }


def shared_options(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command the shared options ``names`` (declared once, in :data:`SHARED` or
    :data:`TRAINING`), after
    its own parameters. The command reads them from ``ctx.params`` (as :func:`run_options`
    does); it is called with its own parameters only."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command)
        own = set(signature.parameters)
        added = [
            inspect.Parameter(
                n,
                inspect.Parameter.KEYWORD_ONLY,
                default=_DECLARED[n][1],
                annotation=_DECLARED[n][0],
            )
            for n in names
            if n not in own
        ]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return command(*args, **{k: v for k, v in kwargs.items() if k in own})

        params = [*signature.parameters.values(), *added]
        wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {
            **command.__annotations__,
            **{p.name: p.annotation for p in added},
        }
        return wrapper

    return decorate
