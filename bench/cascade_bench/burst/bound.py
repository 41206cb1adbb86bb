"""What a burst's P99 wait could be at best: a fluid FIFO queue under a capacity profile.

Why: issue 11's goal asks live modes for <= 0.5 x stop-the-world's burst P99 TTFT. With
one source that also serves, the source's compute bounds what pipelines add before the
targets complete: a pipeline (target [0, L/2), source the rest) costs the source half a
request, so even with every request pipelined it serves 2 instances' worth; cooperative
execution offloads a growing share f of the layers (1 / (1 - f) instances' worth if
enough heads share the source). This model says what those profiles allow, from the
run's own times, so a measured ratio can be read against the physics.

The arrivals are the burst the bench sends (each request's send time and its cost in
instance-seconds, the rule that scaled the burst), not a steady rate: a trace's busiest
window is often a spike (the code trace's: ~5x for 7 s, then ~3x, then 16 s of nothing),
and a spike that lands before any new capacity sets the P99 whatever comes later. A
steady rate of the same mean flattered the live modes (run 7: 0.46 / 0.37 steady against
0.85 / 0.69 at the window's own shape).

Units: time in seconds from the scale decision, capacity in instances of one, a request's
cost in instance-seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Profile = Callable[[float], float]
Arrivals = Sequence[tuple[float, float]]  # (seconds from the decision, instance-seconds)
STEP_S = 0.01


@dataclass(frozen=True)
class Times:
    """When capacity changes, in seconds from the scale decision."""

    covered_s: float  # the first pipeline's layers are all held (its head can serve)
    complete_s: float  # new instances serve alone (stop-the-world's first new token)


def stop_the_world(t: Times, scale_to: int) -> Profile:
    return lambda s: 1.0 if s < t.complete_s else float(scale_to)


def pipelines(t: Times, scale_to: int) -> Profile:
    """One source closes one pipeline at half the layers: 2 instances' worth at best."""
    return lambda s: 1.0 if s < t.covered_s else 2.0 if s < t.complete_s else float(scale_to)


def ceiling(t: Times, scale_to: int) -> Profile:
    """Every node's compute serving from the first coverage on: no live mode can do more
    (host copies as extra sources included), whatever its pipelines."""
    return lambda s: 1.0 if s < t.covered_s else float(scale_to)


def cooperative(t: Times, scale_to: int, blocks: int) -> Profile:
    """Targets' share grows linearly from one block at coverage to all at completion;
    every target pairs with the source (scale_to - 1 heads)."""
    heads = float(scale_to - 1)

    def capacity(s: float) -> float:
        if s < t.covered_s:
            return 1.0
        if s >= t.complete_s:
            return float(scale_to)
        span = max(t.complete_s - t.covered_s, STEP_S)
        f = 1.0 / blocks + (1.0 - 1.0 / blocks) * (s - t.covered_s) / span
        return min(1.0 / max(1.0 - f, 1e-9), heads / f, float(scale_to))

    return capacity


def steady(demand: float, burst_s: float, every_s: float = 0.1) -> list[tuple[float, float]]:
    """A steady burst: `demand` instances' worth as small requests every `every_s`."""
    return [(i * every_s, demand * every_s) for i in range(round(burst_s / every_s))]


def p99_wait(profile: Profile, arrivals: Arrivals) -> float:
    """P99 over the arrivals of the time until the work up to and including each is served
    (FIFO, fluid: capacity is spent only on work that has arrived)."""
    if not arrivals:
        return 0.0
    todo = sorted(arrivals)
    through, total = [], 0.0
    for _, cost in todo:
        total += cost
        through.append(total)
    waits: list[float] = []
    served = arrived = 0.0
    i = j = step = 0
    while i < len(todo):
        now = step * STEP_S
        while j < len(todo) and todo[j][0] <= now:
            arrived += todo[j][1]
            j += 1
        served = min(served + profile(now) * STEP_S, arrived)
        while i < j and served >= through[i] - 1e-9:
            waits.append(now - todo[i][0])
            i += 1
        step += 1
    waits.sort()
    return waits[min(len(waits) - 1, int(0.99 * len(waits)))]


def ratios(t: Times, scale_to: int, blocks: int, arrivals: Arrivals) -> dict[str, float]:
    """Each live mode's best P99 wait over stop-the-world's, from the same times."""
    base = p99_wait(stop_the_world(t, scale_to), arrivals)
    live = {
        "pipelines": pipelines(t, scale_to),
        "cooperative": cooperative(t, scale_to, blocks),
        "ceiling": ceiling(t, scale_to),
    }
    return {m: p99_wait(p, arrivals) / base if base else 1.0 for m, p in live.items()}


def covered_s(row: Mapping[str, Any]) -> float | None:
    """The mode's first pipeline coverage, in seconds from its scale decision."""
    at = [
        p["start_t"] + pipe["coveredSeconds"] - row["scale_decision_t"]
        for p in row.get("plans") or []
        if p.get("start_t") is not None
        for pipe in p.get("pipelines") or []
        if pipe.get("coveredSeconds") is not None
    ]
    return min(at) if at else None


def from_run(
    rows: Mapping[str, Mapping[str, Any]], scale_to: int, blocks: int, arrivals: Arrivals
) -> dict[str, Any]:
    """Each live mode's fluid bound from its own coverage time and stop-the-world's first
    new token (when new instances serve alone)."""
    complete = rows.get("stop_the_world", {}).get("first_new_token_s")
    out: dict[str, Any] = {}
    for mode in ("pipelines", "cooperative"):
        covered = covered_s(rows[mode]) if mode in rows else None
        if complete is None or covered is None:
            continue
        t = Times(covered_s=min(covered, complete), complete_s=complete)
        r = ratios(t, scale_to, blocks, arrivals)
        out[mode] = {
            "covered_s": covered,
            "complete_s": complete,
            "ttft_p99_ratio": r[mode],
            "ceiling_ttft_p99_ratio": r["ceiling"],
        }
    return out
