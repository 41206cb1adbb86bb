"""What a burst's P99 wait could be at best: a fluid FIFO queue under a capacity profile.

Why: issue 11's goal asks live modes for <= 0.5 x stop-the-world's burst P99 TTFT. With
one source that also serves, the source's compute bounds what pipelines add before the
targets complete: a pipeline (target [0, L/2), source the rest) costs the source half a
request, so even with every request pipelined it serves 2 instances' worth; cooperative
execution offloads a growing share f of the layers (1 / (1 - f) instances' worth if
enough heads share the source). This model says what those profiles allow, from the
run's own times, so a measured ratio can be read against the physics.

Units: time in seconds from the scale decision, capacity and demand in instances of one
(the burst arrives at `demand`, steady).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Profile = Callable[[float], float]
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


def p99_wait(profile: Profile, demand: float, burst_s: float) -> float:
    """P99 over the burst's arrivals of the time until the queue ahead is served."""
    steps = round(burst_s * 4 / STEP_S)  # the queue drains by then when capacity >= demand
    served, arrived = [0.0] * steps, [0.0] * steps
    s = a = 0.0
    for i in range(steps):
        now = i * STEP_S
        a += demand * STEP_S if now < burst_s else 0.0
        s = min(s + profile(now) * STEP_S, a)
        served[i], arrived[i] = s, a
    waits, j = [], 0
    for i in range(int(burst_s / STEP_S)):
        while j < steps - 1 and served[j] < arrived[i] - 1e-9:
            j += 1
        waits.append((j - i) * STEP_S)
    waits.sort()
    return waits[min(len(waits) - 1, int(0.99 * len(waits)))]


def ratios(t: Times, scale_to: int, blocks: int, demand: float, burst_s: float) -> dict[str, float]:
    """Each live mode's best P99 wait over stop-the-world's, from the same times."""
    base = p99_wait(stop_the_world(t, scale_to), demand, burst_s)
    live = {
        "pipelines": pipelines(t, scale_to),
        "cooperative": cooperative(t, scale_to, blocks),
    }
    return {m: p99_wait(p, demand, burst_s) / base if base else 1.0 for m, p in live.items()}


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
    rows: Mapping[str, Mapping[str, Any]], scale_to: int, blocks: int, demand: float, burst_s: float
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
        out[mode] = {
            "covered_s": covered,
            "complete_s": complete,
            "ttft_p99_ratio": ratios(t, scale_to, blocks, demand, burst_s)[mode],
        }
    return out
