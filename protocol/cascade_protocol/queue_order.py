"""Which queued request the gateway serves first: on time before late (shared rule).

Within a request class the queue is first come, first served while every waiting request
can still meet its time-to-first-token SLO. Once one cannot (it has waited until `margin`
before its deadline: arrival + the class's TTFT SLO), serving it first no longer saves
its SLO but spends capacity that would save a request behind it; under a backlog, plain
FIFO makes every request wait out the backlog and miss (measured: after a burst met one
instance, the gateway held 60-131 interactive requests for 20 s after the scale-up, and
84 % of that half-minute's arrivals missed their TTFT SLO; `cascade bench autoscale`
run 13). So late requests step behind the on-time ones, still first come first served
among themselves, and are served as soon as no on-time request waits: none is dropped,
their wait only grows. This is the adaptive-LIFO idea of overloaded RPC servers, kept
FIFO where FIFO is right (no backlog, no reordering at all).

The margin is the time a placed request still needs before its first token (prefill
behind the running batch): a request placed with less left than that misses anyway.

The gateway (`cascade_gateway.policy.service_order`) and the simulator's queues
(`cascade_sim.gateway`) apply this one rule.
"""

from __future__ import annotations

from cascade_api.modeldeployment import QueueOrder

__all__ = ["LATE_MARGIN_FRACTION", "QueueOrder", "late_at"]


LATE_MARGIN_FRACTION = 0.1  # of the class's TTFT SLO: the time a placed request still needs


def late_at(arrived: float, ttft_slo_s: float) -> float:
    """When a request that arrived at `arrived` stops being on time."""
    return arrived + ttft_slo_s * (1 - LATE_MARGIN_FRACTION)
