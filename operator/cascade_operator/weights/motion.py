"""Two small pure steps around the ScalePlan lifecycle: when a storage load must wait,
and when to poll fast.

Workers' progress makes no API events (it lives in their control APIs), so while any
weight moves the controller polls every second or so (`in_motion`); at rest it relies on
watch events and the slow resync. Pure: `now` passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from cascade_operator.observed import START_STORAGE, PodView
from cascade_operator.weights.lifecycle import PlanDecision
from cascade_operator.weights.plans import PlanView
from cascade_operator.weights.workers import WorkerView

# How long a pod told to load from storage at start may stay unreachable before the
# lifecycle may pick another pod to load (a pod that never comes up must not block).
STORAGE_START_GRACE_S = 120.0


def storage_start_pending(
    pods: Sequence[PodView], workers: Sequence[WorkerView], now: datetime
) -> bool:
    """A pod created to load from storage (the first instance) is not reachable yet:
    its load is as good as under way, so the lifecycle must not order a second one."""
    seen = {w.name: w for w in workers}
    for pod in pods:
        if pod.start != START_STORAGE or pod.terminating:
            continue
        w = seen.get(pod.name)
        if w is None or w.phase is not None or not (w.alive or w.starting):
            continue
        if w.created is None or now - w.created < timedelta(seconds=STORAGE_START_GRACE_S):
            return True
    return False


def in_motion(
    workers: Sequence[WorkerView], plans: Sequence[PlanView], decision: PlanDecision
) -> bool:
    """Something moves that only polling sees: poll again soon."""
    if decision.create or decision.transfers or decision.serve or decision.load:
        return True
    if any(p.active for p in plans):
        return True
    return any(
        w.starting
        or w.busy
        or w.engine == "starting"
        or (w.alive and w.phase is None)
        or w.needs_weights
        for w in workers
    )
