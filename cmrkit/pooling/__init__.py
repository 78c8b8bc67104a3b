"""Pools of candidates for assessment: ``pool`` (create, read, write, report), ``strategies``
(which pairs to judge: depth, rbp, rrf, mtf, maxmean, strata), ``rounds`` (applying a strategy
to a pool, the adaptive rounds), ``sample`` (sample qrels for xinfAP), ``bias`` (leave-one-run-out
reusability) and ``plan`` (strategies x budgets, simulated; import it from
``cmrkit.pooling.plan``). The judgments a pool needs as it goes come from
:mod:`cmrkit.judgments` (the simulated assessors: :mod:`cmrkit.judgments.simulated`)."""

from cmrkit.judgments.moved import moved
from cmrkit.pooling.bias import pool_bias, score_runs
from cmrkit.pooling.pool import (
    POOL_FORMAT,
    POOL_VERSION,
    Pool,
    PoolPair,
    annotated_pairs,
    check_collection,
    collection_identity,
    create_pool,
    infer_collection,
    natural_key,
    parse_sample_spec,
    pool_report,
    read_pool,
    read_query_ids,
    subset_pool,
    write_pool,
)
from cmrkit.pooling.rounds import (
    apply_strategy,
    next_round,
    plain_pool,
    pool_runs,
)
from cmrkit.pooling.sample import sample_qrels
from cmrkit.pooling.strategies import STRATEGIES, StrategyOptions, parse_strata

__all__ = [
    "POOL_FORMAT",
    "POOL_VERSION",
    "STRATEGIES",
    "Pool",
    "PoolPair",
    "StrategyOptions",
    "annotated_pairs",
    "apply_strategy",
    "check_collection",
    "collection_identity",
    "create_pool",
    "infer_collection",
    "natural_key",
    "next_round",
    "parse_sample_spec",
    "parse_strata",
    "plain_pool",
    "pool_runs",
    "pool_bias",
    "pool_report",
    "read_pool",
    "read_query_ids",
    "sample_qrels",
    "score_runs",
    "subset_pool",
    "write_pool",
]

__getattr__ = moved(__name__, {"SimulatedAssessors": "cmrkit.judgments.simulated"})
