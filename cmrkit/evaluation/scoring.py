"""One measure, by any name `cmrkit eval` takes, as a per-query scorer for other commands.

``run fields --learn-weights --measure`` maximises it; other commands that take a measure name
validate it here first, so that every command accepts the same names (ir_measures: ``AP``,
``RR@10``, ``nDCG@10``; trec_eval's: ``map``, ``recip_rank``, ``P.10``, ``ndcg_cut_10``) and a
bad name is reported before anything else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from cmrkit.errors import CmrkitError
from cmrkit.evaluation.measures import parse_measure
from cmrkit.evaluation.measures import trec as defs

Scores = Callable[[Mapping[str, Mapping[str, float]], Mapping[str, Mapping[str, int]]], dict]


def query_scorer(text: str, version: str = defs.DEFAULT_VERSION) -> tuple[str, Scores]:
    """(printed name, function(run, qrels) -> {qid: value}) for one single-valued measure.

    Raises CmrkitError (one line) for a name no command knows, or one that yields several
    values (``P`` with trec_eval's nine default cutoffs, ``all_trec``).
    """
    try:
        measure = parse_measure(text)
    except CmrkitError as legacy:
        error = legacy
    else:
        if measure.kind in ("xinfAP", "infNDCG"):
            raise CmrkitError(f"measure {text!r} needs stratified qrels; choose another")

        def legacy_scores(run, qrels):
            import cmrkit.evaluation.ranking as ranking

            result = ranking.evaluate(run, qrels, [measure], version=version)
            return {q: result.per_query[q][measure.name] for q in result.scored}

        return measure.name, legacy_scores
    try:
        request = defs.parse_request([text], version)
    except CmrkitError:
        raise error from None
    import cmrkit.evaluation.trec_eval as te

    names = [n for n in request.marked if n not in ("runid", "num_q")]
    columns = [te._setup(n, request) for n in names]
    printed = [p for c in columns for p in c.names]
    if len(printed) != 1:
        raise CmrkitError(
            f"measure {text!r} gives {len(printed)} values ({', '.join(printed[:4])}...); "
            "name one, e.g. P.10 or P@10"
        )

    def trec_scores(run, qrels):
        results = te.Results({q: list(d.items()) for q, d in run.items() if d}, "")
        rel_info = te.RelInfo("qrels", qrels={q: dict(d) for q, d in qrels.items()})
        result = te.evaluate(results, rel_info, request, te.Options(version=version))
        k = result.names.index(printed[0])
        return {q: result.per_query[q][k] for q in result.queries}

    return printed[0], trec_scores


def mean_score(
    text: str,
    run: Mapping[str, Mapping[str, float]],
    qrels: Mapping[str, Mapping[str, int]],
    version: str = defs.DEFAULT_VERSION,
) -> float:
    """The measure's summary over the run's queries that have judgments, as `cmrkit eval`
    prints it on its ``all`` line."""
    name, scores = query_scorer(text, version)
    try:
        measure = parse_measure(text)
    except CmrkitError:
        values = list(scores(run, qrels).values())
        total = 0.0
        for v in values:  # trec_eval's accumulation, query by query
            total += v
        return total / len(values) if values else 0.0
    import cmrkit.evaluation.ranking as ranking

    return ranking.evaluate(run, qrels, [measure], version=version).aggregate[measure.name]
