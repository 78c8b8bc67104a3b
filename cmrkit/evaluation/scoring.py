"""One measure, by any name `cmrkit eval` takes, as a per-query scorer for other commands.

``run fields --learn-weights --measure`` maximises it; other commands that take a measure name
validate it here first, so that every command accepts the same names (ir_measures: ``AP``,
``RR@10``, ``nDCG@10``; trec_eval's: ``map``, ``recip_rank``, ``P.10``, ``ndcg_cut_10``,
``set_F``) and a bad name is reported before anything else. The names are read by
``measures.resolve`` and computed by the ranking engine (``ranking.py``), as `eval` computes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures import SAMPLED_KINDS, Measure, parse_measure
from cmrkit.evaluation.measures import trec as defs

Scores = Callable[[Mapping[str, Mapping[str, float]], Mapping[str, Mapping[str, int]]], dict]


def _measure(text: str, version: str) -> Measure:
    measure = parse_measure(text, version)
    if measure.kind in SAMPLED_KINDS:
        raise CmrkitError(f"measure {text!r} needs stratified qrels; choose another")
    return measure


def query_scorer(text: str, version: str = defs.DEFAULT_VERSION) -> tuple[str, Scores]:
    """(printed name, function(run, qrels) -> {qid: value}) for one single-valued measure.

    Raises CmrkitError (one line) for a name no command knows, or one that yields several
    values (``P`` with trec_eval's nine default cutoffs, ``all_trec``).
    """
    measure = _measure(text, version)

    def scores(run, qrels):
        import cmrkit.evaluation.ranking as ranking

        result = ranking.evaluate(run, qrels, [measure], version=version)
        return {q: result.per_query[q][measure.name] for q in result.scored}

    return measure.name, scores


def mean_score(
    text: str,
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    version: str = defs.DEFAULT_VERSION,
) -> float:
    """The measure's summary over the run's queries that have judgments, as `cmrkit eval`
    prints it on its ``all`` line."""
    import cmrkit.evaluation.ranking as ranking

    measure = _measure(text, version)
    return ranking.evaluate(run, qrels, [measure], version=version).aggregate[measure.name]
