"""Pool reusability: leave one run out, rescore it, and see how much its score and rank move."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from cmrkit.errors import CmrkitError
from cmrkit.fileio import sha256_file
from cmrkit.pooling.pool import Pool
from cmrkit.trec import Qrels, Run, read_qrels, read_run


def score_runs(runs: Mapping[str, Run], qrels: Qrels, measure: str = "infAP") -> dict[str, float]:
    """trec_eval's mean of one measure (any name `cmrkit eval` takes: ``infAP``, ``AP``,
    ``map``, ``P.10``) per run, over the queries of the run that have judgments."""
    from cmrkit.evaluation.scoring import mean_score, query_scorer

    if "," in measure:
        raise CmrkitError(f"--measure {measure!r} must name one measure")
    query_scorer(measure)  # a bad name, or one with several values, fails here
    return {name: mean_score(measure, run, qrels) for name, run in runs.items()}


def _ranks_of(scores: Mapping[str, float]) -> dict[str, int]:
    order = sorted(scores, key=lambda n: (-scores[n], n))
    return {n: i for i, n in enumerate(order, 1)}


def pool_bias(
    pool: Pool,
    runs: Sequence[str | os.PathLike],
    qrels_path: str | os.PathLike,
    *,
    measure: str = "infAP",
) -> list[dict[str, Any]]:
    """Leave-one-run-out: for each pooled run, drop the pairs only it contributed from the qrels,
    rescore it, and report the change of its score and of its rank among the runs."""
    by_sha = {r["sha256"]: r["name"] for r in pool.header["runs"]}
    loaded: dict[str, Run] = {}
    for r in runs:
        name = by_sha.get(sha256_file(r))
        if name is None:
            raise CmrkitError(
                "this run is not one of the pooled runs (its content differs from every run "
                f"recorded in the pool: {', '.join(pool.run_names)})",
                path=r,
            )
        loaded[name] = read_run(r)
    if not loaded:
        raise CmrkitError("give the pooled run files to score")
    qrels = read_qrels(qrels_path)
    full = score_runs(loaded, qrels, measure)
    full_ranks = _ranks_of(full)
    rows = []
    for name in sorted(loaded):
        only = [(p.qid, p.docno) for p in pool.pairs if set(p.ranks) == {name}]
        reduced: Qrels = {q: dict(d) for q, d in qrels.items()}
        removed_relevant = 0
        for qid, docno in only:
            rel = reduced.get(qid, {}).pop(docno, None)
            if rel is not None and rel > 0:
                removed_relevant += 1
        reduced = {q: d for q, d in reduced.items() if d}
        loo = score_runs({name: loaded[name]}, reduced, measure)[name]
        others = dict(full)
        others[name] = loo
        rows.append(
            {
                "run": name,
                "unique_pairs": len(only),
                "unique_relevant": removed_relevant,
                "score": full[name],
                "score_without": loo,
                "delta": loo - full[name],
                "rank": full_ranks[name],
                "rank_without": _ranks_of(others)[name],
            }
        )
    return rows
