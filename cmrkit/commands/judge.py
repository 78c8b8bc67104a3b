"""`cmrkit judgments auto`: an automatic judge labels a pool's pairs (or a run's top k)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from cmrkit.commands.choices import Device, OnUnparsed, Precision, plain
from cmrkit.commands.judgments import judgments_app
from cmrkit.commands.options import DEVICE, FORCE_OUTPUTS, PRECISION
from cmrkit.commands.runs import rerun_argv
from cmrkit.console import console, progress_bar, user_errors
from cmrkit.judgments.auto.options import (
    CALIBRATE_QUERIES,
    DEFAULT_DEPTH,
    LLM_DEFAULTS,
    READER_BATCH_SIZE,
)


def register(app: typer.Typer) -> None:
    """Nothing at the top level: `judgments auto` is in the `judgments` group
    (commands/judgments.py)."""


def _judged(
    calibrate_on: str | None,
    coll: Path,
    run: Path | None,
    depth: int,
    qrels_dir: Path | None,
    queries: int,
) -> Any:
    """The judged pairs of --calibrate-on: a file (people's labels CSV or qrels) or a split,
    with --calibrate-run RUN, --calibrate-depth, --qrels-dir and --calibrate-queries."""
    if calibrate_on is None:
        return None
    from cmrkit.judgments.auto.pairs import feedback_judged, split_judged

    if Path(calibrate_on).is_file():
        from cmrkit.judgments.human import read_feedback

        labels, _ = read_feedback([Path(calibrate_on)])
        return feedback_judged(labels, calibrate_on)
    if run is None:
        from cmrkit.errors import CmrkitError

        raise CmrkitError(
            f"--calibrate-on {calibrate_on} is no file, so a split: pass --calibrate-run RUN, "
            f"a run of split {calibrate_on} whose top --calibrate-depth pairs its qrels label "
            f"(e.g. `cmrkit run bm25 {coll} --split {calibrate_on}`)"
        )
    return split_judged(coll, calibrate_on, run, depth, qrels_dir, queries or None)


@judgments_app.command("auto")
@user_errors
def auto_command(
    ctx: typer.Context,
    pool_file: Path | None = typer.Argument(
        None, metavar="POOL", help="Pool file from `pool create` (or --run)."
    ),
    judge: str = typer.Option(
        ..., "--judge", help="reader:DIR, llm:URL (OpenAI-compatible, with --model) or llm:local."
    ),
    output: Path = typer.Option(..., "-o", "--output", help="Labels CSV to write (+ .json)."),
    run: Path | None = typer.Option(None, "--run", help="Judge a run's top --depth instead."),
    depth: int = typer.Option(DEFAULT_DEPTH, "--depth", help="With --run: units per query."),
    collection: Path | None = typer.Option(
        None, "--collection", help="The collection [default: the pool's or run's]."
    ),
    model: str | None = typer.Option(None, "--model", help="llm:URL: the model name to ask."),
    api_key_env: str | None = typer.Option(
        None, "--api-key-env", help="llm:URL: the environment variable holding the API key."
    ),
    prompt: Path | None = typer.Option(
        None, "--prompt", help="LLM judges: a prompt template replacing the shipped one."
    ),
    concurrency: int = typer.Option(
        LLM_DEFAULTS.concurrency, "--concurrency", help="llm:URL: requests at once."
    ),
    timeout: float = typer.Option(
        LLM_DEFAULTS.timeout, "--timeout", help="llm:URL: seconds per request."
    ),
    retries: int = typer.Option(
        LLM_DEFAULTS.retries, "--retries", help="llm:URL: retries, with backoff."
    ),
    seed: int = typer.Option(
        LLM_DEFAULTS.seed, "--seed", help="LLM judges: the sampling seed (temperature 0)."
    ),
    on_unparsed: OnUnparsed = typer.Option(
        OnUnparsed.skip, "--on-unparsed", help="An answer without a label 1..5: skip (counted)."
    ),
    calibrate_on: str | None = typer.Option(
        None,
        "--calibrate-on",
        help="reader: judged pairs to calibrate on: a SPLIT (with --calibrate-run) or a FILE "
        "(people's labels CSV, or qrels).",
    ),
    calibrate_run: Path | None = typer.Option(
        None, "--calibrate-run", help="A run of the --calibrate-on split (its candidates)."
    ),
    calibrate_depth: int = typer.Option(
        DEFAULT_DEPTH, "--calibrate-depth", help="Candidates per query of --calibrate-run."
    ),
    calibrate_queries: int = typer.Option(
        CALIBRATE_QUERIES,
        "--calibrate-queries",
        help="Judged queries of the split, evenly spread (0: all).",
    ),
    qrels_dir: Path | None = typer.Option(
        None, "--qrels-dir", help="Where the split's qrels are [default: as recorded]."
    ),
    device: Device = DEVICE,
    batch_size: int = typer.Option(
        READER_BATCH_SIZE, "--batch-size", help="reader: sequences per batch."
    ),
    precision: Precision = PRECISION,
    cache: Path | None = typer.Option(
        None, "--cache", help="The label cache [default: judgments.sqlite in the cache folder]."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    force: bool = FORCE_OUTPUTS,
) -> None:
    """Label every sampled pair of a pool (or a run's top k) with an automatic judge: Likert
    1..5 and a probability of relevance (docs/judging.md).

    Example: cmrkit judgments auto pools/sample.pool.jsonl --judge reader:models/reader
    --calibrate-on dev --calibrate-run runs/sample/bm25.dev.trec -o pools/reader.labels.csv
    """
    from cmrkit.errors import CmrkitError
    from cmrkit.fileio import StagedOutputs
    from cmrkit.judgments.auto.auto import auto_judge, write_auto
    from cmrkit.judgments.auto.cache import default_path
    from cmrkit.judgments.auto.judges import JudgeSpec
    from cmrkit.judgments.auto.labels import sidecar_path
    from cmrkit.judgments.auto.make import make_judge
    from cmrkit.judgments.auto.options import JudgeOptions, LlmOptions, ReaderJudgeOptions
    from cmrkit.judgments.auto.pairs import run_targets
    from cmrkit.pooling.pool import pool_targets

    spec = JudgeSpec.parse(judge)
    if (pool_file is None) == (run is None):
        raise CmrkitError("give a POOL or --run RUN (one of them) to judge")
    options = JudgeOptions(
        reader=ReaderJudgeOptions(
            device=plain(device), batch_size=batch_size, precision=plain(precision)
        ),
        llm=LlmOptions(
            prompt=prompt,
            concurrency=concurrency,
            timeout=timeout,
            retries=retries,
            api_key_env=api_key_env,
            seed=seed,
        ),
        model=model,
    )
    options.check(spec.kind)  # before any work
    with StagedOutputs([output, sidecar_path(output)], force=force) as staged:
        targets = (
            pool_targets(pool_file, collection)
            if pool_file is not None
            else run_targets(run, depth, collection)
        )
        judged = _judged(
            calibrate_on,
            targets.coll,
            calibrate_run,
            calibrate_depth,
            qrels_dir,
            calibrate_queries,
        )
        the_judge = make_judge(spec, options)
        with progress_bar(not quiet) as bars:

            def bar(what: str, total: int):
                task = bars.add_task(f"judge {what}", total=total)
                return lambda n: bars.update(task, advance=n)

            try:
                result = auto_judge(
                    targets,
                    the_judge,
                    cache_path=cache if cache is not None else default_path(),
                    judged=judged,
                    on_unparsed=plain(on_unparsed),
                    command=rerun_argv(ctx),
                    bar=bar,
                    warn=lambda text: bars.console.print(
                        f"warning: {text}", markup=False, soft_wrap=True
                    ),
                )
            finally:
                the_judge.close()
        write_auto(result, output, staged)
    side = result.sidecar
    console.print(
        f"wrote {side['labelled']} labels of {side['pairs']} pairs to {output} "
        f"({side['cached']} from the cache, {side['unparsed']} unparsed)",
        markup=False,
        soft_wrap=True,  # one line in a log file too
    )
