"""Which trace windows the autoscale bench reports on: a rule fixed before any tuning.

A policy tuned on one window and reported on the same one says nothing about the next
(one 8-minute window of the code trace met every goal; another pinned Cascade at
maxReplicas). So the evaluation set is chosen by a rule that looks only at the trace,
never at a result: cut the trace into whole, non-overlapping windows of the run's length
from its first arrival; rank them by request count; take the busiest, the median and the
quietest (ties go to the earlier window). The bench scales every window's load to the
same peak (workload.py), so the three differ in shape — how bursty, how long the lulls —
not in height.

Knobs are chosen elsewhere: `tuning` names every other whole window (with the synthetic
cases at another `--seed`), so what a knob was chosen on and what it is reported on never
overlap (issue 33; bench/results/JOURNAL.md, 2026-12-04).
"""

from __future__ import annotations

from dataclasses import dataclass

from cascade_bench.replay.trace import Trace

PICKS = ("busiest", "median", "quietest")
TUNING = "tuning"  # every whole window the picks did not take


@dataclass(frozen=True)
class Window:
    name: str  # "busiest" | "median" | "quietest" | "tuning"
    start_s: float  # trace seconds
    duration_s: float
    requests: int

    @property
    def rate_per_s(self) -> float:
        return self.requests / self.duration_s


def whole_windows(trace: Trace, duration_s: float) -> list[tuple[float, int]]:
    """(start, requests) of every whole window of `duration_s` from the first arrival."""
    if duration_s <= 0:
        raise ValueError(f"window duration must be > 0 s, got {duration_s}")
    if not trace.rows:
        raise ValueError(f"{trace.name}: no requests")
    count = int(trace.span_s // duration_s)
    if count < 1:
        raise ValueError(
            f"{trace.name}: spans {trace.span_s:.0f} s, shorter than one {duration_s:.0f} s window"
        )
    counts = [0] * count
    for row in trace.rows:
        i = int(row.offset_s // duration_s)
        if i < count:
            counts[i] += 1
    return [(i * duration_s, n) for i, n in enumerate(counts)]


def evaluation_windows(trace: Trace, duration_s: float) -> list[Window]:
    """The busiest, median and quietest whole windows (fewer when the trace has fewer
    windows than picks: each window is picked once)."""
    ranked = sorted(whole_windows(trace, duration_s), key=lambda w: (-w[1], w[0]))
    positions = {"busiest": 0, "median": (len(ranked) - 1) // 2, "quietest": len(ranked) - 1}
    out: list[Window] = []
    taken: set[int] = set()
    for name in PICKS:
        i = positions[name]
        if i in taken:
            continue
        taken.add(i)
        start, n = ranked[i]
        out.append(Window(name, start, duration_s, n))
    return out


def tuning_windows(trace: Trace, duration_s: float) -> list[Window]:
    """The whole windows `evaluation_windows` leaves, in trace order: where to tune."""
    taken = {w.start_s for w in evaluation_windows(trace, duration_s)}
    return [
        Window(TUNING, start, duration_s, n)
        for start, n in whole_windows(trace, duration_s)
        if start not in taken
    ]
