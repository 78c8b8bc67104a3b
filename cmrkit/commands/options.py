"""The options several commands share, each declared once, here; its default comes from the
library record that uses it (``comparison.AGREEMENT``, ``judgments.simulated.SIMULATION``,
``judgments.auto.options.CONFIDENT``), so the command line and the Python API agree
(``tests/test_defaults.py``). The output options (``--format``, ``--dedupe``,
``--allow-unjudged``) are ``commands/output.py``'s; the run and training options
``commands/runs.py``'s.

Only light modules are imported here (no numpy, no evaluation package): ``cmrkit --help``
builds every command, and `eval` starts with this module loaded; the options of the pooling and
judging commands are made by functions that read their library's defaults when those commands
are declared. :func:`bind` makes an options record from a command's parameters with
every field bound by name or left to its default by name, so that an option renamed in a
command cannot leave its field at the default unseen.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import typer

from cmrkit.commands.choices import Device, Precision, TrecVersion, plain
from cmrkit.comparison import AGREEMENT, AgreementOptions

R = TypeVar("R")

# --- outputs ------------------------------------------------------------------------------
FORCE_OUTPUTS = typer.Option(False, "--force", help="Overwrite existing outputs.")
FORCE_OUTPUT = typer.Option(False, "--force", help="Overwrite an existing output.")

# --- neural models (encode, run dense, run rerank, train reader, judgments auto) ----------
DEVICE = typer.Option(Device.auto, "--device", help="cpu, cuda, or auto (cuda when a GPU is seen).")
PRECISION = typer.Option(
    Precision.fp32,
    "--precision",
    help="fp32; int8: the encoder's linear layers in int8 on the CPU (torch); onnx-int8: the "
    "encoder exported to ONNX and run in int8 on ONNX Runtime (the fastest on a CPU; extra "
    "cmrkit[dense]). int8 models are made once and cached beside the model; docs/dense.md.",
)

# --- pools (pool, assess serve) -----------------------------------------------------------
POOL_ARG = typer.Argument(..., metavar="POOL", help="Pool file from `pool create`.")
POOL_COLLECTION = typer.Option(
    None, "--collection", help="The pool's collection folder [default: as recorded]."
)
PER_QUERY = typer.Option(False, "--per-query", help="The budget is per query.")


def confident_option() -> Any:
    """--confident (pool create, assess serve): None unless given, then hybrid_labels' P."""
    from cmrkit.judgments.auto.options import CONFIDENT

    return typer.Option(
        None,
        "--confident",
        metavar="P",
        help="--auto: the judge takes a pair whose probability of relevance is at least P or "
        f"at most 1 - P (0.5 < P <= 1) [default: {CONFIDENT}].",
    )


def hybrid_labels(auto: Path | None, confident: float | None):
    """The judge's labels of ``--auto`` with ``--confident`` checked (None without --auto)."""
    from cmrkit.errors import CmrkitError

    if auto is None:
        if confident is not None:
            raise CmrkitError("--confident needs --auto LABELS (the judge's labels)")
        return None
    from cmrkit.judgments.auto.hybrid import HybridLabels
    from cmrkit.judgments.auto.options import CONFIDENT

    return HybridLabels(auto, CONFIDENT if confident is None else confident)


# --- simulated assessors (pool create --simulate, pool plan, judgments simulate) ----------
def assessors_option(help: str) -> Any:
    """--assessors: simulated assessors per pair (SimulationOptions' default)."""
    from cmrkit.judgments.simulated import SIMULATION

    return typer.Option(SIMULATION.assessors, help=help)


def noise_option(help: str) -> Any:
    """--noise: the chance a simulated assessor flips the truth (SimulationOptions' default)."""
    from cmrkit.judgments.simulated import SIMULATION

    return typer.Option(SIMULATION.noise, help=help)


# --- measures and a system-ranking agreement (eval, compare, agree, judgments check, repro) -
MEASURE_HELP = (
    "Measure: ir_measures names (infAP, AP, AP@10, RR@10, R@100, P@10, nDCG@10, Bpref, SetF, "
    "xinfAP, infNDCG, Judged@10, NumRel, ...) or trec_eval's (map_cut.10, P.5,10, ndcg.1=3,2=9, "
    "iprec_at_recall..10,.20, all_trec, official, all_prefs, qrels_jg); repeat or separate "
    "ir_measures names with commas. Default: infAP, AP, AP@10, AP@50, RR@10, R@10, R@50, R@100, "
    "R@500, P@10, nDCG@10, Judged@10 (with -f trec: trec_eval's official set). cmrkit's own, "
    "not trec_eval's: RR@k, Judged@k, xinfAP, infNDCG, AUC, AUC_micro, MentionRecall@k "
    "(docs/evaluation.md)."
)
MEASURE = typer.Option(None, "--measure", "-m", help=MEASURE_HELP)
BOOTSTRAP = typer.Option(
    AGREEMENT.bootstrap,
    "--bootstrap",
    min=0,
    max=1_000_000,
    help="Bootstrap resamples of the queries for the intervals (0: none).",
)
CI = typer.Option(AGREEMENT.ci, "--ci", help="Confidence level of the intervals.")
SEED = typer.Option(AGREEMENT.seed, "--seed", help="Seed of the bootstrap.")
RBO_P = typer.Option(AGREEMENT.rbo_p, "--rbo-p", help="RBO's persistence p (0 < p < 1).")
DEPTH = typer.Option(None, "--depth", "-M", min=1, help="Score only the top N documents per query.")
TREC_VERSION = typer.Option(
    TrecVersion.v10, "--trec-eval", help="The trec_eval version to equal: 10 or 9."
)


def agreement_options(
    bootstrap: int,
    ci: float,
    seed: int,
    rbo_p: float,
    depth: int | None,
    trec_version: TrecVersion,
) -> dict[str, Any]:
    """The agreement options as the library's keyword arguments (``samples``, ``ci``, ``seed``,
    ``p``, ``depth``, ``version``), checked (:meth:`AgreementOptions.check`) before any work."""
    options = AgreementOptions(bootstrap=bootstrap, ci=ci, seed=seed, rbo_p=rbo_p)
    options.check()
    return {
        "samples": options.bootstrap,
        "ci": options.ci,
        "seed": options.seed,
        "p": options.rbo_p,
        "depth": depth,
        "version": plain(trec_version),
    }


# --- options records from a command's parameters -------------------------------------------
def bind(
    record: type[R],
    params: Mapping[str, Any],
    *,
    leaves: Iterable[str] = (),
    **given: Any,
) -> R:
    """The options record ``record`` (a dataclass) of a command, every field bound explicitly:
    a field in ``given`` takes that value, a field in ``leaves`` keeps the record's default
    (the command has no such option), and every other field is read from the command's
    parameter of its name (``params``: ``ctx.params``; choices as plain strings). A field none
    of these binds, a field left that the command does have, or a name that is no field is a
    TypeError naming it: the mapping cannot drift from the command's options unseen."""
    names = [f.name for f in dataclasses.fields(record)]  # type: ignore[arg-type]
    left = set(leaves)
    unknown = sorted((left | set(given)) - set(names))
    if unknown:
        raise TypeError(f"{record.__name__} has no field {', '.join(unknown)}")
    shadowed = sorted(n for n in left if n in params)
    if shadowed:
        raise TypeError(
            f"{record.__name__}.{shadowed[0]} is left at its default, but the command has the "
            f"option {shadowed[0]!r}: bind it"
        )
    values = dict(given)
    for name in names:
        if name in values or name in left:
            continue
        if name not in params:
            raise TypeError(
                f"{record.__name__}.{name} is bound to no option: the command has no parameter "
                f"{name!r} (renamed?); give it, or leave it to its default by name"
            )
        values[name] = plain(params[name])
    return record(**values)
