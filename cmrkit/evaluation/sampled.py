"""Moved to :mod:`cmrkit.evaluation.measures.sampled`, beside the measures' definitions (issue
41): this old import path keeps working for one release, with a DeprecationWarning."""

from __future__ import annotations

_NAMES = (
    "MAX_RESULTS", "SINGLE_STRATUM", "SampleStats", "sample_stats", "sample_ranking", "estimate",
    "estimate_pooled", "per_query",
)  # fmt: skip
_MOVED = {name: ("cmrkit.evaluation.measures.sampled", name) for name in _NAMES}


def __getattr__(name: str):
    from cmrkit.evaluation.moved import moved

    return moved(__name__, name, _MOVED)
