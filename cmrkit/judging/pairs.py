"""Deprecated: now :mod:`cmrkit.judgments.auto.pairs`; this path goes in the next release."""

from cmrkit.judgments.moved import moved

__getattr__ = moved(
    __name__, {"pool_targets": "cmrkit.pooling.pool"}, to="cmrkit.judgments.auto.pairs"
)
