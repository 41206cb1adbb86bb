"""The concurrency-target baseline, Knative/KServe KPA style, simplified: a pure tick.

Every tick (2 s, the operator's autoscaler period) the bench reads the gateway's
`GET /v1/load` and counts the concurrency it holds: requests in flight to a backend
plus requests queued (held ones included), over both classes. Then

    want    = ceil(concurrency / target)          target: requests per instance
    desired = max(want over the last window_s)    scale down only as the window forgets
    desired = clamp(desired, minReplicas, maxReplicas)

What Knative's KPA does that this does not: it averages concurrency over a 60 s stable
and a 6 s panic window (here: the latest reading, so scaling up is immediate, like the
KPA in panic mode all the time), limits scale-up and scale-down rates, and waits out a
scale-to-zero grace period (minReplicas >= 1 here, so no scale to zero). Taking the
maximum desired count over the window is the KPA's scale-down delay: a burst keeps its
instances for `window_s` after it ends. This makes the baseline quicker to react than
the real KPA, i.e. a stronger baseline, never a weaker one. A fresh state counts the
count it finds as wanted at its first tick (as the HPA's behavior records the current
size first), so the baseline does not drop its initial instances in its first second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class KpaConfig:
    target: float  # concurrency per instance (Knative: containerConcurrency x utilization)
    min_replicas: int
    max_replicas: int
    window_s: float = 60.0  # scale-down stabilization: max of the wants over this window

    def __post_init__(self) -> None:
        if not self.target > 0:
            raise ValueError(f"KPA target concurrency must be > 0, got {self.target}")
        if not 0 <= self.min_replicas <= self.max_replicas:
            raise ValueError("KPA bounds need 0 <= minReplicas <= maxReplicas")
        if self.window_s < 0:
            raise ValueError("KPA window must be >= 0 s")


@dataclass(frozen=True)
class KpaState:
    wants: tuple[tuple[float, int], ...] = ()  # (time, ceil(concurrency / target)) per tick
    fresh: bool = True  # no tick yet: the current count counts as wanted at the first tick


@dataclass(frozen=True)
class KpaDecision:
    replicas: int  # desired count
    write: bool  # differs from the current count
    reason: str


def want(concurrency: float, target: float) -> int:
    """Instances for `concurrency` requests at `target` each (a tiny epsilon so that
    exactly k x target asks for k, not k + 1, after float division)."""
    if concurrency <= 0:
        return 0
    return math.ceil(concurrency / target - 1e-9)


def decide(
    cfg: KpaConfig, state: KpaState, now: float, concurrency: float, current: int
) -> tuple[KpaDecision, KpaState]:
    """One tick: the count to write (if any) and the state for the next tick."""
    now_want = want(concurrency, cfg.target)
    seed = ((now, current),) if state.fresh else ()
    kept = seed + tuple((t, w) for t, w in state.wants if t > now - cfg.window_s)
    wants = (*kept, (now, now_want))
    highest = max(w for _, w in wants)
    desired = min(max(highest, cfg.min_replicas), cfg.max_replicas)
    why = f"concurrency {concurrency:g} / target {cfg.target:g} -> {now_want}"
    if highest > now_want:
        why += f", {highest} within {cfg.window_s:g} s"
    if desired != highest:
        why += f", bounded to [{cfg.min_replicas}, {cfg.max_replicas}]"
    why += f": {current} -> {desired}"
    return KpaDecision(desired, desired != current, why), KpaState(wants, fresh=False)
