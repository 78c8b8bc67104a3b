"""`cmrkit index` and `cmrkit run bm25 | fields | qe`: Lucene baselines through Pyserini."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from cmrkit.commands.choices import Engine, Expansion, ExpansionBase, Formulation, Preset
from cmrkit.commands.runs import (
    ADDRESS,
    COLLECTION_ARG,
    ENGINE,
    LUCENE_RUN,
    QRELS_DIR,
    QUIET,
    SPACY,
    SPLIT,
    VERBOSE,
    WORKERS,
    engine_options,
    leaves_cluster,
    lucene_run,
    report_run,
    run_app,
    shared_options,
)
from cmrkit.console import out, user_errors

WEIGHTS = typer.Option(
    None,
    "--weights",
    help="Field weights, e.g. contents=0.1,entities=1,title=0.5 "
    "(fields: contents, title, entities, document).",
)
PRESET = typer.Option(
    None, "--preset", help="doc: contents 1 + document 0.1 (CMR doc); mention: contents only."
)

Command = Callable[..., Any]


def _lucene_run_command(name: str) -> Callable[[Command], Command]:
    """A `run` command over the Lucene index: the shared run options, a Ray cluster it started
    left behind on any exit, errors as one line."""

    def wrap(fn: Command) -> Command:
        return run_app.command(name)(user_errors(leaves_cluster(shared_options(*LUCENE_RUN)(fn))))

    return wrap


def register(app: typer.Typer) -> None:
    """Add `index`; `run bm25`, `run fields` and `run qe` are in the `run` group."""
    app.command("index")(index_command)


@user_errors
@leaves_cluster
def index_command(
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
    engine: Engine = ENGINE,
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

    options = engine_options(engine, address, workers)
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
        out.print(f"{info.path} is up to date (built from the current corpus); --force rebuilds it")
        return
    out.print(f"indexed {m['n_units']:,} units into {info.path} in {m['seconds']['total']} s")


@_lucene_run_command("bm25")
def bm25_command(
    ctx: typer.Context,
    collection: Path = COLLECTION_ARG,
    split: str | None = SPLIT,
    query: Formulation = typer.Option(
        Formulation("mention+entities"),
        "--query",
        help="mention, mention+entities, sentence or context (chain and features: the "
        "topics' within-document chains, as TAC collections have them).",
    ),
) -> None:
    """BM25 over the unit text; the query is the mention plus its context's named entities.

    Example: cmrkit run bm25 collections/sample --split test --query mention+entities
    """
    from cmrkit.retrieval import run_bm25

    report_run(
        run_bm25(
            collection,
            query=query,
            **lucene_run(ctx),
        )
    )


@_lucene_run_command("fields")
def fields_command(
    ctx: typer.Context,
    collection: Path = COLLECTION_ARG,
    split: str | None = SPLIT,
    weights: str | None = WEIGHTS,
    preset: Preset | None = PRESET,
    query: Formulation | None = typer.Option(
        None,
        "--query",
        help="Query formulation (default: mention for presets, else mention+entities).",
    ),
    learn_weights: bool = typer.Option(
        False,
        "--learn-weights",
        help="Tune the weights on the train split (coordinate ascent) and apply them to --split.",
    ),
    train_split: str = typer.Option("train", "--train-split", help="Split to learn on."),
    measure: str = typer.Option(
        "map",
        "--measure",
        help="Measure to maximise, by any name `cmrkit eval` takes (AP, RR@10, nDCG@10, "
        "map, recip_rank, P.10).",
    ),
    tune_k: int = typer.Option(100, "--tune-k", help="Ranking depth while learning."),
    qrels_dir: Path | None = QRELS_DIR,
) -> None:
    """Multi-field BM25 with per-field weights (default: the CMR doc preset).

    Example: cmrkit run fields collections/sample --weights contents=1,entities=0.5,title=0.2
    """
    from cmrkit.retrieval import run_fields

    report_run(
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
            **lucene_run(ctx),
        )
    )


@_lucene_run_command("qe")
def qe_command(
    ctx: typer.Context,
    collection: Path = COLLECTION_ARG,
    method: Expansion = typer.Option(Expansion.rm3, "--method", help="rm3 or rocchio."),
    base: ExpansionBase = typer.Option(ExpansionBase.bm25, "--base", help="bm25 or fields."),
    split: str | None = SPLIT,
    query: Formulation | None = typer.Option(
        None, "--query", help="Query formulation (default as for the base system)."
    ),
    weights: str | None = WEIGHTS,
    preset: Preset | None = PRESET,
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
) -> None:
    """Pseudo-relevance feedback (RM3, or Rocchio with CMR's 0.9/0.1) on bm25 or fields.

    Example: cmrkit run qe collections/sample --method rocchio --base fields --preset doc
    """
    from cmrkit.commands.options import bind
    from cmrkit.retrieval import QE, run_qe

    # the expansion's options are named as QE's fields; two of them have no option here
    feedback = bind(QE, ctx.params, leaves=("filter_terms", "use_negative"))
    report_run(
        run_qe(
            collection,
            base=base,
            query=query,
            weights=weights,
            preset=preset,
            feedback=feedback,
            **lucene_run(ctx),
        )
    )
