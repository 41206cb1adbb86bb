"""Percentiles, defined once for every component that reports them.

`percentile` interpolates linearly between ranks (numpy's default): the benches' and the
simulator's summaries. `nearest_rank` returns a value that was observed: the gateway's
`/v1/load` percentiles (a TTFT some request saw). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (q in [0, 100]), linear between ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def nearest_rank(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (q in [0, 100]) by nearest rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]
