"""Deprecated: the automatic judges are :mod:`cmrkit.judgments.auto`; ``cmrkit.judging.X`` is
``cmrkit.judgments.auto.X`` (``pairs.pool_targets``: ``cmrkit.pooling.pool.pool_targets``) for
one release, with a DeprecationWarning."""
