"""C's double arithmetic where trec_eval's kernels divide by zero or take a log of nothing, as
its x86 build computes it (so the values it prints, ``inf`` and ``-nan`` included, are its)."""

from __future__ import annotations

import math

NEG_NAN = -math.nan  # C's 0.0 / 0.0 on x86 (printed -nan)


def c_div(a: float, b: float) -> float:
    """C double division: x/0 is inf, 0/0 the x86 default NaN (printed -nan)."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return NEG_NAN
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def c_log(x: float) -> float:
    """glibc's log: -inf at 0, the default NaN (printed -nan) below 0."""
    if x > 0:
        return math.log(x)
    if x == 0:
        return -math.inf
    return x if math.isnan(x) else NEG_NAN


def c_divide(np, a, b):
    """:func:`c_div` elementwise on numpy arrays."""
    with np.errstate(all="ignore"):
        inf = np.copysign(np.inf, a) * np.copysign(1.0, b)
        zero = np.where((a == 0) | np.isnan(a), NEG_NAN, inf)
        return np.where(b == 0, zero, a / np.where(b == 0, 1.0, b))
