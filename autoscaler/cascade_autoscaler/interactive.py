"""Chiron §5.2, the interactive half of the global policy: keep headroom for bursts.

Interactive requests are never queued (Chiron's zero-queuing rule), so spare capacity
must exist before a burst arrives. Interactive backpressure

    IBP = B / N,   N = interactive + mixed instances (starting ones included)

is held in the band [Θ - δ, Θ + δ]; 1 - Θ is the over-provisioned share.

**B, in instances of occupancy** (`occupancy`). Chiron's B counts instances running
interactive requests. Its router packs them, so in a large fleet that count is the
interactive load in instances, rounded up per instance. In a fleet of a few instances
the rounding is the whole signal: 3 short requests on an instance with room for 32 make
B = 1, and at Θ 0.3 any trickle holds ceil(1 / 0.3) = 4 instances (measured: the bench
kept 4-6 instances up through minutes of trickle). So B here is the same quantity
without the rounding: each instance's interactive in-flight over its latency room,
summed, plus the interactive requests the gateway holds for lack of room over the mean
room. The room is the largest batch known to meet the ITL SLO (the local autoscaler's,
`latency_room.py`): the cap once it was halved for latency, so such an instance
counts fuller; above the cap when the cap fell because a larger batch did not pay in
throughput, so the requests that cap holds back are not read as demand for another
instance while the instances could take them within their SLO. B is demand,
not a count of instances: it exceeds N when instances are overfull or requests wait,
which Chiron's count cannot show (it needed a "waiting means N + 1" patch that ordered
an instance per tick during a cold start). A level, not an increment: recounting the
same waiting requests on every tick of a cold start asks for the same N again.

**Desired count.** Out of the band, N' = ceil(B / Θ): the fewest instances with
IBP <= Θ, the band's centre, so the next small swing does not cross an edge again.
Above the band this adds at least one instance (B/N > Θ + δ ⇒ B/Θ > N). Below it, it
removes down to that count; if the count is still below Θ - δ (small B: 0.25 busy of 1
at Θ 0.7) it equals N and the answer is hold. Steady B therefore reaches a fixed point
in at most one action: N' gives IBP <= Θ <= Θ + δ, and a second tick returns N' again
whether N' is in the band or below it. A floor (N' = floor(B / Θ)) would flap: B 1 at
Θ 0.7 gives N' 1, IBP 1 > Θ + δ, then 2, IBP 0.5 < Θ - δ, then 1... Stabilization
windows, keep-alive and min/max replicas apply on top, in the composed policy.
Below the band while any instance is still starting, hold: B counts ready instances only,
so a pause right after a scale-up reads as calm before the new instances can serve.

**From zero** IBP is undefined; waiting requests start one instance, the least that
serves them, and IBP takes over once it runs.

**Roles.** `split_roles` makes floor(Θ · N) instances interactive and the rest mixed:
mixed instances are Chiron's over-provisioned capacity (interactive bursts land there;
batch requests use it meanwhile), and rounding favours mixed because a mixed instance
serves interactive requests too, while an interactive one refuses batch. With Θ < 1
at least one instance is mixed (a lone instance is mixed).

**Auto Θ** (`auto_theta`): Chiron sets Θ to 1 / (tail arrival spike over one model-load
interval); we derive the spike from measured burstiness and time-to-ready T. With
per-interval arrival counts (interval Δ, about a request's service time) of mean μ and
coefficient of variation c, a cold start spans k = max(1, T / Δ) intervals. Treating
intervals as independent normal draws, the load that the headroom must absorb before
the new instance is ready is the largest of k intervals; its p-th percentile is
μ · (1 + c · z_k) with z_k = Φ⁻¹(p^(1/k)). So

    Θ = clamp(1 / (1 + c · Φ⁻¹(p^(1/k))), lo, hi),   default p = 0.99, [0.3, 0.95]

decreasing in c (burstier → more headroom) and in T (a longer cold start is a longer
exposure). Chiron's example (tail spike 3x the mean → Θ 1/3) is c · z_k = 2.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

Action = Literal["scale_up", "scale_down", "hold"]
_EPS = 1e-9  # 21 / 0.7 is 30.000000000000004 in floats: ceil must still say 30


@dataclass(frozen=True)
class InteractiveBand:
    theta: float  # target IBP: the busy share of interactive + mixed instances
    delta: float  # half-width of the dead band around theta (hysteresis)

    def __post_init__(self) -> None:
        if not 0 < self.theta <= 1 or self.delta < 0:
            raise ValueError(f"need 0 < theta <= 1 and delta >= 0, got {self}")


@dataclass(frozen=True)
class InteractiveObservation:
    interactive: int  # interactive-role instances, ready or starting
    mixed: int  # mixed-role instances, ready or starting
    busy: float  # B: interactive occupancy in instances, waiting requests included
    queued: int = 0  # interactive requests waiting for room anywhere (in B already)
    starting: int = 0  # of the instances, those not ready yet (shown in the reason)


@dataclass(frozen=True)
class RoleSplit:
    interactive: int
    mixed: int

    @property
    def total(self) -> int:
        return self.interactive + self.mixed


@dataclass(frozen=True)
class InteractiveDecision:
    desired: int  # interactive + mixed instances wanted
    roles: RoleSplit  # how `desired` splits into roles
    ibp: float | None  # interactive backpressure; None with no instances
    action: Action
    reason: str


@dataclass(frozen=True)
class ThetaEstimate:
    theta: float  # the over-provisioning target to use
    cv: float | None  # coefficient of variation of per-interval arrivals
    spike: float | None  # tail peak-to-mean load over one cold start: 1 + c · z_k
    intervals: float  # k: intervals per cold start
    reason: str


def interactive_backpressure(busy: float, instances: int) -> float | None:
    """IBP = busy / instances; None when there are no instances."""
    return busy / instances if instances > 0 else None


def occupancy(slots: Iterable[tuple[int, int]], queued: int, default_cap: int) -> float:
    """B in instances: `slots` holds (interactive in flight, latency room) per ready
    interactive or mixed instance; waiting requests count over the mean room, or over
    `default_cap` (the engine's configured cap) while no instance reports one."""
    pairs = [(max(0, used), max(1, cap)) for used, cap in slots]
    held = sum(used / cap for used, cap in pairs)
    mean_cap = statistics.fmean(cap for _, cap in pairs) if pairs else max(1, default_cap)
    return held + max(0, queued) / mean_cap


def split_roles(total: int, theta: float) -> RoleSplit:
    """floor(Θ · total) interactive, the rest mixed (see the module docstring)."""
    total = max(0, total)
    interactive = min(total, math.floor(theta * total + _EPS))
    return RoleSplit(interactive=interactive, mixed=total - interactive)


def decide_interactive(obs: InteractiveObservation, band: InteractiveBand) -> InteractiveDecision:
    """Interactive + mixed instances that hold IBP in [Θ - δ, Θ + δ]."""
    n = max(0, obs.interactive) + max(0, obs.mixed)
    busy = max(0.0, obs.busy)
    lo, hi = band.theta - band.delta, band.theta + band.delta
    target = _ceil(busy / band.theta)
    ibp = interactive_backpressure(busy, n)
    waiting = f"{obs.queued} interactive requests waiting for room"
    edges = f"band [{lo:.2f}, {hi:.2f}]"

    if n == 0:
        if busy <= 0 and obs.queued <= 0:
            return _decision(0, band, None, "hold", "no instances and no interactive demand")
        return _decision(1, band, None, "scale_up", f"no instances, {waiting}: start 1")
    assert ibp is not None
    counted = f"B {busy:.2f} of {n}"
    if obs.queued > 0:
        counted += f", {waiting}"
    if obs.starting > 0:
        counted += f", {obs.starting} starting"
    state = f"IBP {ibp:.2f} ({counted})"
    if ibp > hi + _EPS:
        why = f"{state} above {edges}: scale up to {target} so IBP <= Θ {band.theta:.2f}"
        return _decision(target, band, ibp, "scale_up", why)
    if ibp < lo - _EPS and target < n and obs.starting > 0:
        why = f"{state} below {edges}, but no scale-down while instances start: they serve soon"
        return _decision(n, band, ibp, "hold", why)
    if ibp < lo - _EPS and target < n:
        why = f"{state} below {edges}: scale down to {target}, the fewest with IBP <= Θ"
        return _decision(target, band, ibp, "scale_down", why)
    if ibp < lo - _EPS:
        why = f"{state} below {edges}, but {n} is already the fewest with IBP <= Θ"
        return _decision(n, band, ibp, "hold", why)
    return _decision(n, band, ibp, "hold", f"{state} within {edges}")


def auto_theta(
    arrivals: Sequence[float],
    interval_s: float,
    time_to_ready_s: float,
    percentile: float = 0.99,
    bounds: tuple[float, float] = (0.3, 0.95),
    fallback: float = 0.7,
) -> ThetaEstimate:
    """Θ from arrival burstiness and cold-start time (formula in the module docstring).

    `arrivals` are interactive arrivals per `interval_s`, oldest first; `fallback` (within
    `bounds`) is used until there are at least two intervals with any arrival.
    """
    if interval_s <= 0 or not 0 < percentile < 1 or not 0 < bounds[0] <= bounds[1] <= 1:
        raise ValueError("need interval_s > 0, 0 < percentile < 1, 0 < lo <= hi <= 1")
    lo, hi = bounds
    k = max(1.0, time_to_ready_s / interval_s)
    mean = statistics.fmean(arrivals) if arrivals else 0.0
    if len(arrivals) < 2 or mean <= 0:
        theta = min(max(fallback, lo), hi)
        why = f"too little arrival history ({len(arrivals)} intervals): fallback Θ {theta:.2f}"
        return ThetaEstimate(theta, None, None, k, why)
    cv = statistics.stdev(arrivals) / mean
    z = statistics.NormalDist().inv_cdf(percentile ** (1 / k))
    spike = 1 + cv * z
    raw = 1 / spike
    theta = min(max(raw, lo), hi)
    clamped = "" if theta == raw else f", clamped from {raw:.2f} to [{lo:.2f}, {hi:.2f}]"
    why = (
        f"arrival CV {cv:.2f} over {len(arrivals)} intervals of {interval_s:g}s; a cold start "
        f"of {time_to_ready_s:g}s spans {k:.1f} intervals; p{percentile * 100:g} spike "
        f"{spike:.2f}x the mean: Θ = 1/spike = {theta:.2f}{clamped}"
    )
    return ThetaEstimate(theta, cv, spike, k, why)


def _ceil(x: float) -> int:
    return max(0, math.ceil(x - _EPS))


def _decision(
    desired: int, band: InteractiveBand, ibp: float | None, action: Action, reason: str
) -> InteractiveDecision:
    return InteractiveDecision(desired, split_roles(desired, band.theta), ibp, action, reason)
