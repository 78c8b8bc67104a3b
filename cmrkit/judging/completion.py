"""Deprecated: now :mod:`cmrkit.judgments.auto.completion`; this path goes in the next release."""

from cmrkit.judgments.moved import moved

__getattr__ = moved(__name__, to="cmrkit.judgments.auto.completion")
