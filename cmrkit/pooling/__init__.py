"""Pools of candidates for assessment: ``pool`` (create, read, write, report) and ``bias``
(leave-one-run-out reusability)."""

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
    read_topics_jsonl,
    subset_pool,
    write_pool,
)

__all__ = [
    "POOL_FORMAT",
    "POOL_VERSION",
    "Pool",
    "PoolPair",
    "annotated_pairs",
    "check_collection",
    "collection_identity",
    "create_pool",
    "infer_collection",
    "natural_key",
    "parse_sample_spec",
    "pool_bias",
    "pool_report",
    "read_pool",
    "read_query_ids",
    "read_topics_jsonl",
    "score_runs",
    "subset_pool",
    "write_pool",
]
