"""The global policies a simulation can run, behind one small interface.

- `cascade`: `cascade_autoscaler.policy.decide` as the operator runs it: one call per
  tick with the state kept between ticks, `applied` after each write, roles relabelled
  every tick (owner External: the count is never written and pods keep no role, so all
  are mixed).
- `fixed_max` / `fixed_min`: maxReplicas (spec.replicas when unset) or minReplicas (at
  least 1), from t = 0, all mixed: what a static deployment costs and serves.
- `kpa`: Knative's KPA, simplified: concurrency (in flight + queued) averaged over a
  60 s stable and a 6 s panic window; desired = ceil(average / target), target = 0.7 x
  the engine's max batch (Knative's default 70 % of containerConcurrency); panic when the
  6 s window wants >= 2x the ready instances, then never scale down until 60 s pass
  without panic; scale down at most halves the ready count per tick
  (max-scale-down-rate 2), so with minReplicas 0 an idle minute halves it down to zero;
  a request held at zero asks for 1 (the activator). No scale-to-zero grace period, no
  scale-down delay.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from cascade_autoscaler.policy import applied, decide
from cascade_autoscaler.policy_types import AutoscaleSpec, AutoscaleState, Roles
from cascade_sim.config import Deployment
from cascade_sim.view import View, context

NAMES = ("cascade", "fixed_max", "fixed_min", "kpa", "fixed_local")
# The policies whose instances run the local batch-size controller when
# engine.adaptiveBatch is on (the others run at the engine's max batch, as the bench's
# baselines do): Cascade, and fixed_local, fixed at maxReplicas to see the controller alone.
LOCAL_CONTROL = ("cascade", "fixed_local")


@dataclass(frozen=True)
class Order:
    """A policy's answer for one tick."""

    replicas: int  # instances wanted now (applied only when `write`)
    roles: Roles | None  # role split to label; None: leave every instance mixed
    write: bool  # change the count now
    reason: str


class Policy(Protocol):
    name: str

    def initial(self) -> int:
        """Instances ready at t = 0."""
        ...

    def tick(self, v: View) -> Order: ...

    def applied(self, before: int, after: int, now: float) -> None: ...


class CascadePolicy:
    name = "cascade"

    def __init__(self, spec: AutoscaleSpec, replicas: int) -> None:
        self.spec = spec
        self.start = min(max(replicas, spec.min_replicas), spec.max_replicas)
        self.state = AutoscaleState()

    def initial(self) -> int:
        return self.start

    def tick(self, v: View) -> Order:
        rec, self.state = decide(context(v, self.spec), self.state)
        roles = rec.roles if self.spec.owner == "cascade" else None
        return Order(rec.replicas, roles, rec.write, rec.reason)

    def applied(self, before: int, after: int, now: float) -> None:
        self.state = applied(
            self.state, before=before, after=after, behavior=self.spec.behavior, now=now
        )


class FixedPolicy:
    def __init__(self, name: str, replicas: int) -> None:
        self.name = name
        self.replicas = max(1, replicas)

    def initial(self) -> int:
        return self.replicas

    def tick(self, v: View) -> Order:
        return Order(self.replicas, None, False, f"fixed at {self.replicas}")

    def applied(self, before: int, after: int, now: float) -> None:
        return None


class KpaPolicy:
    name = "kpa"

    def __init__(
        self,
        min_replicas: int,
        max_replicas: int,
        replicas: int,
        target: float,
        stable_s: float = 60.0,
        panic_s: float = 6.0,
    ) -> None:
        if target <= 0:
            raise ValueError("KPA target concurrency must be > 0")
        self.lo, self.hi, self.target = min_replicas, max_replicas, target
        self.start = min(max(replicas, min_replicas), max_replicas)
        self.stable_s, self.panic_s = stable_s, panic_s
        self.samples: deque[tuple[float, int]] = deque()
        self.panic_until = -math.inf

    def initial(self) -> int:
        return self.start

    def _mean(self, now: float, window: float) -> float:
        picked = [c for t, c in self.samples if t > now - window]
        return sum(picked) / len(picked) if picked else 0.0

    def tick(self, v: View) -> Order:
        now, current, ready = v.now, v.replicas, max(1, v.ready)
        self.samples.append((now, v.concurrency))
        while self.samples and self.samples[0][0] <= now - self.stable_s:
            self.samples.popleft()
        stable = self._mean(now, self.stable_s)
        want_stable = math.ceil(stable / self.target - 1e-9)
        want_panic = math.ceil(self._mean(now, self.panic_s) / self.target - 1e-9)
        if want_panic >= 2 * ready:
            self.panic_until = now + self.stable_s
        panic = now < self.panic_until
        desired = max(want_panic, current) if panic else want_stable
        if desired < current:
            desired = max(desired, math.floor(ready / 2.0))
        if current == 0 and (v.queued_interactive or v.queued_batch):
            desired = max(desired, 1)
        desired = min(max(desired, self.lo), self.hi)
        why = (
            f"concurrency {stable:.1f} (60s) / target {self.target:g}"
            + (" (panic)" if panic else "")
            + f": {current} → {desired}"
        )
        return Order(desired, None, desired != current, why)

    def applied(self, before: int, after: int, now: float) -> None:
        return None


def make(name: str, dep: Deployment, kpa_target: float | None = None) -> Policy:
    """The policy called `name` for this deployment."""
    spec = dep.spec
    if name == "cascade":
        return CascadePolicy(spec, dep.replicas)
    if name in ("fixed_max", "fixed_local"):
        return FixedPolicy(name, dep.bounded_max)
    if name == "fixed_min":
        return FixedPolicy(name, spec.min_replicas)
    if name == "kpa":
        target = kpa_target or 0.7 * dep.engine_max_batch
        return KpaPolicy(spec.min_replicas, dep.bounded_max, dep.replicas, target)
    raise ValueError(f"unknown policy {name!r} (one of {', '.join(NAMES)})")
