"""The per-hop start cost the operator plans with, learned from its Completed plans.

The flow model charges `hop_latency_s` once per chain hop and per binomial step
(cascade_planner.calibrate). It starts at the configured value (chart
`planner.hopLatencySeconds`, env CASCADE_HOP_LATENCY_S: what `cascade bench scaleup`
fitted on this fabric) and follows what plans measure: each Completed plan with a hop
in its slowest target's prediction implies a cost `s = (measured - predicted(0)) / hops`
(its own `spec.hopLatencySeconds` undone, so concurrent plans made with other values
count right), bounded to [0, MAX_HOP_LATENCY_S]. The estimate is an exponentially
weighted mean of those samples, each weighted by `(hops / measured)²` (small plans,
where start costs are a large share of the time, count most; calibrate.py says why),
the oldest decaying by `DECAY` per new plan. A sample counts at most twice the current
estimate (or `PULL_FLOOR_S` above it): one plan slowed by its receivers' own start-up
(a pod that began listening a moment before; 3x on the dev cluster) does not double
every later prediction, while a real rise shows within a few plans. The configured value
is a prior as heavy as the first plan. Per operator process: a restart starts from the
configured value.

Chains and binomial plans learn apart: a chain hop's fill is in the model already (one
chunk of store-and-forward), a binomial step has a hand-over the model lacks (on the dev
fabric ~0.02 s per step, ~0 per chain hop). `learn` is pure (tested plan by plan);
`HopLatency` holds one per strategy for the controller, which feeds it the plans each
tick ended and plans inside `planning_with`, so `make_plan` reads the costs as an
ambient input (`current`; 0.0 outside, as in unit tests).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TypedDict

from cascade_api.scaleplan import PlanStrategy
from cascade_planner.calibrate import HopSample, bound

DECAY = 0.8  # per new plan: an EWMA with alpha 0.2 (about the last 5 plans)
PULL_FLOOR_S = 0.01  # one plan's sample counts at most twice the estimate, or this above


@dataclass(frozen=True)
class HopCalibration:
    """The estimate's state: exponentially weighted sums of weight·sample and weight."""

    default_s: float = 0.0  # configured prior
    enabled: bool = True  # False: always the configured value
    weighted: float = 0.0  # Σ decay^age · weight · sample
    weight: float = 0.0  # Σ decay^age · weight (0: no plan seen yet)
    plans: int = 0  # samples taken

    @property
    def seconds(self) -> float:
        if not self.enabled or self.weight <= 0:
            return bound(self.default_s)
        return bound(self.weighted / self.weight)


def learn(cal: HopCalibration, samples: Iterable[HopSample]) -> HopCalibration:
    """`cal` after these Completed plans, in order; plans with no hop are skipped."""
    if not cal.enabled:
        return cal
    for s in samples:
        if not s.usable:
            continue
        w, now = s.weight, cal.seconds
        implied = min(s.implied_s, now + max(now, PULL_FLOOR_S))
        weighted, weight = cal.weighted * DECAY, cal.weight * DECAY
        if cal.weight <= 0:  # the prior weighs as much as the first plan
            weighted, weight = w * now, w
        cal = replace(cal, weighted=weighted + w * implied, weight=weight + w, plans=cal.plans + 1)
    return cal


class StartCosts(TypedDict):
    """PlanRequest's start-cost fields (make_plan passes them as `**current()`)."""

    hop_latency_s: float  # per chain hop
    step_latency_s: float | None  # per binomial step (None: hop_latency_s)


_CURRENT: ContextVar[StartCosts | None] = ContextVar("start_costs", default=None)


class HopLatency:
    """One operator process's calibrations, one per strategy (a chain hop and a binomial
    step cost differently), shared by its reconciles (a lock: they may run in threads)."""

    def __init__(self, chain: HopCalibration, binomial: HopCalibration | None = None) -> None:
        self._cal = {
            PlanStrategy.CHAIN.value: chain,
            PlanStrategy.BINOMIAL.value: binomial or chain,
        }
        self._lock = threading.Lock()

    @classmethod
    def configured(cls, hop_s: float, step_s: float | None, learn: bool) -> HopLatency:
        step = hop_s if step_s is None else step_s
        return cls(HopCalibration(hop_s, learn), HopCalibration(step, learn))

    def state(self, strategy: str) -> HopCalibration:
        return self._cal[str(strategy)]

    def costs(self) -> StartCosts:
        return {
            "hop_latency_s": self.state(PlanStrategy.CHAIN).seconds,
            "step_latency_s": self.state(PlanStrategy.BINOMIAL).seconds,
        }

    def observe(self, samples: Iterable[HopSample | None]) -> None:
        found = [s for s in samples if s is not None and s.strategy in self._cal]
        with self._lock:
            for s in found:
                self._cal[s.strategy] = learn(self._cal[s.strategy], [s])


@contextmanager
def planning_with(costs: StartCosts) -> Iterator[None]:
    """Plans made inside use these start costs."""
    token = _CURRENT.set(costs.copy())  # a copy: the caller keeps its own
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current() -> StartCosts:
    """The start costs plans made now use (make_plan's PlanRequest)."""
    found = _CURRENT.get()
    return found if found is not None else {"hop_latency_s": 0.0, "step_latency_s": None}
