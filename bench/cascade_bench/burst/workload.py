"""The one load every mode replays: a steady warm-up, then the trace's busiest window,
each scaled from the capacity profile to a stated multiple of one instance's capacity.

1. Requests: the trace's rows with the replay's token scaling (`Scaling`: prompt =
   round(0.1 x ContextTokens) <= 512, output = GeneratedTokens <= 256, a seeded share
   sent as batch: none by default).
2. Cost: a request keeps one instance busy for `prompt / prefill rate + output /
   tokens_per_s(b)` seconds, b the largest batch whose step meets the interactive ITL
   SLO (the autoscale bench's and `cascade simulate --peak-instances`'s rule). A window's
   demand is its requests' cost over its length: how many instances of one it keeps busy.
3. Burst: the `burst_s` window with the highest demand, or the one starting at
   `burst_start`; each of its requests is sent K = burst_x / demand times on average
   (`cascade_sim.workload.replicate`: floor or ceil copies by a seeded hash, copies
   within 1 s). So whatever the trace, the burst needs `burst_x` instances.
4. Warm-up: steady load, `warmup_x` instances' worth: requests of the burst window's
   sizes (a seeded shuffle, cycled) at even intervals, as many as make that demand. The
   trace before a burst is often idle (its bursts come out of silence), so its own
   warm-up window could be empty; evenly spaced arrivals are what "steady" means.
5. Send times: the warm-up at [0, warmup_s), the burst at [warmup_s, warmup_s +
   burst_s) (a copy may land up to 1 s later); the scale decision is at `warmup_s`.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from cascade_bench.autoscale.workload import demand_batch, to_arrivals, to_planned
from cascade_bench.replay.scale import INTERACTIVE, Planned, Scaling, describe, schedule
from cascade_bench.replay.trace import Trace
from cascade_sim import workload as wl
from cascade_sim.profile import CapacityProfile

# Request index of warm-up request k (its prompt ids are seeded by it): past any trace
# row and its copies (row + copy x COPY_STRIDE).
WARMUP_INDEX = 900_000_000
REFINE = 6  # rounds of K refinement (`scaled`)


@dataclass(frozen=True)
class Shape:
    warmup_s: float = 30.0  # steady load before the burst (send time)
    burst_s: float = 60.0  # the burst window's length (trace time = send time)
    warmup_x: float = 0.5  # warm-up demand, in instances of one
    burst_x: float = 3.0  # burst demand, in instances of one (the issue asks 2-4)
    burst_start: float | None = None  # trace seconds; None: the busiest window

    def check(self) -> None:
        if self.warmup_s <= 0 or self.burst_s <= 0:
            raise ValueError("warm-up and burst lengths must be > 0 s")
        if self.warmup_x <= 0 or self.burst_x <= 0:
            raise ValueError("warm-up and burst multiples must be > 0")


@dataclass(frozen=True)
class Cost:
    """What one request costs an instance (the profile at the SLO-bound batch)."""

    profile: CapacityProfile
    batch: int

    def of(self, p: Planned) -> float:
        a = to_arrivals([p])[0]
        return wl.request_cost_s(a, self.profile, self.batch, self.profile.prefill_tokens_per_s)

    def demand(self, plan: Sequence[Planned], length_s: float) -> float:
        """Instances of one the requests keep busy over `length_s`."""
        return sum(self.of(p) for p in plan) / length_s


@dataclass(frozen=True)
class BurstLoad:
    planned: list[Planned]  # what every mode sends, in send order
    burst_at_s: float  # send time of the burst's start: the scale decision
    burst_end_s: float  # send time of its end (requests arriving in between count)
    doc: dict[str, Any]  # every choice between the trace and the load


def busiest_window(
    at_s: Sequence[float], costs: Sequence[float], length_s: float, earliest: float, latest: float
) -> tuple[float, float]:
    """(start, summed cost) of the window [start, start + length_s) with the most cost,
    its start an arrival time in [earliest, latest]; `at_s` sorted. The first wins ties."""
    prefix = [0.0, *itertools.accumulate(costs)]
    best: tuple[float, float] | None = None
    for i, t in enumerate(at_s):
        if t < earliest:
            continue
        if t > latest:
            break
        j = bisect.bisect_left(at_s, t + length_s)
        total = prefix[j] - prefix[i]
        if best is None or total > best[1]:
            best = (t, total)
    if best is None:
        raise ValueError(f"no request arrives in [{earliest:g}, {latest:g}] s of the trace")
    return best


def scaled(
    plan: Sequence[Planned], length_s: float, target: float, cost: Cost, scaling: Scaling
) -> tuple[list[Planned], dict[str, Any]]:
    """`plan` replicated so its demand over `length_s` is `target` instances; the copies
    and what was done (K, demand before and after). Whole copies of unequal requests
    miss the target a little, more so with few requests: K is refined a few times
    (target / demand got) and the closest kept."""
    if not plan:
        raise ValueError("the window holds no request to scale")
    before = cost.demand(plan, length_s)
    k = target / before
    best: tuple[float, float, list[Planned]] | None = None
    for _ in range(REFINE):
        arrivals = wl.replicate(to_arrivals(plan), k, scaling.seed, scaling.batch_fraction)
        sent = to_planned(arrivals, plan)
        got = cost.demand(sent, length_s)
        if best is None or abs(got - target) < abs(best[1] - target):
            best = (k, got, sent)
        k *= target / got
    assert best is not None
    k, _, out = best
    info = {
        "rate_scale": k,
        "demand_at_1x": before,
        "demand": cost.demand(out, length_s),
        "trace_requests": len(plan),
        "sent_requests": len(out),
        "interactive": sum(1 for p in out if p.request_class == INTERACTIVE),
        "mean_prompt_tokens": sum(p.prompt_tokens for p in out) / len(out) if out else 0,
        "mean_output_tokens": sum(p.output_tokens for p in out) / len(out) if out else 0,
    }
    return out, info


def steady(
    sizes: Sequence[Planned], length_s: float, target: float, cost: Cost, seed: int
) -> tuple[list[Planned], dict[str, Any]]:
    """Requests of these sizes (a seeded shuffle, cycled) at even intervals over
    `length_s`: the first n of the cycle whose summed cost comes nearest `target` x
    `length_s` (at least one)."""
    if not sizes:
        raise ValueError("the burst window holds no request")
    order = list(sizes)
    random.Random(seed).shuffle(order)
    want, total, n = target * length_s, 0.0, 0
    while True:
        step = cost.of(order[n % len(order)])
        if n > 0 and total + step / 2 > want:
            break
        total, n = total + step, n + 1
    every = length_s / n
    out = [replace(order[k % len(order)], index=WARMUP_INDEX + k, at_s=k * every) for k in range(n)]
    info = {
        "rule": "steady: the burst's sizes at even intervals",
        "interval_s": every,
        "demand": cost.demand(out, length_s),
        "sent_requests": n,
        "mean_prompt_tokens": sum(p.prompt_tokens for p in out) / n,
        "mean_output_tokens": sum(p.output_tokens for p in out) / n,
    }
    return out, info


def _window(trace: Trace, scaling: Scaling, start: float, length: float) -> list[Planned]:
    return schedule(trace, replace(scaling, start_s=start, duration_s=length, speedup=1.0))


def build(
    trace: Trace,
    scaling: Scaling,
    shape: Shape,
    profile: CapacityProfile,
    itl_s: float | None,
    max_batch: int,
) -> BurstLoad:
    """The warm-up and the burst, scaled, and their description."""
    shape.check()
    cost = Cost(profile, demand_batch(profile, itl_s, max_batch))
    if shape.burst_start is None:
        whole = schedule(trace, replace(scaling, start_s=0.0, duration_s=None, speedup=1.0))
        latest = max(0.0, trace.span_s - shape.burst_s)
        at, costs = [p.at_s for p in whole], [cost.of(p) for p in whole]
        start, _ = busiest_window(at, costs, shape.burst_s, 0.0, latest)
        rule = "busiest"
    else:
        start, rule = shape.burst_start, "given"
    burst_plan = _window(trace, scaling, start, shape.burst_s)
    burst, burst_info = scaled(burst_plan, shape.burst_s, shape.burst_x, cost, scaling)
    warm, warm_info = steady(burst_plan, shape.warmup_s, shape.warmup_x, cost, scaling.seed)
    # Each burst request's (send time from the decision, cost): the fluid bound's input.
    burst_info["arrivals"] = [[round(p.at_s, 3), round(cost.of(p), 5)] for p in burst]
    burst = [replace(p, at_s=p.at_s + shape.warmup_s) for p in burst]
    planned = sorted([*warm, *burst], key=lambda p: (p.at_s, p.index))
    scaling_doc = describe(trace, replace(scaling, start_s=start), planned)
    doc = {
        "trace": trace.name,
        "trace_span_s": trace.span_s,
        "window_rule": rule,
        "burst_start_trace_s": start,
        "warmup_s": shape.warmup_s,
        "burst_s": shape.burst_s,
        "warmup_x": shape.warmup_x,
        "burst_x": shape.burst_x,
        "demand_batch": cost.batch,
        "prefill_tokens_per_s": profile.prefill_tokens_per_s,
        "decode_tokens_per_s": profile.tokens_per_s(cost.batch),
        "warmup": warm_info,
        "burst": burst_info,
        "sent_requests": len(planned),
        "tokens": {k: scaling_doc[k] for k in ("prompt_tokens", "output_tokens")},
        "batch_fraction": scaling.batch_fraction,
        "seed": scaling.seed,
    }
    end = shape.warmup_s + shape.burst_s
    return BurstLoad(planned, shape.warmup_s, end, doc)
