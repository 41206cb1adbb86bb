"""Small pure steps around the ScalePlan lifecycle that the controller needs between
gathering and applying: when a storage load must wait, when to poll fast, and how the
lifecycle's `Planned` condition and current plan merge into the deployment's status.

Workers' progress makes no API events (it lives in their control APIs), so while any
weight moves the controller polls every second or so (`in_motion`); at rest it relies on
watch events and the slow resync. Pure: `now` passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from cascade_api.base import Condition, set_condition
from cascade_api.modeldeployment import ModelDeploymentStatus
from cascade_operator.builders import START_ANNOTATION, START_STORAGE
from cascade_operator.plan_objects import PlanView
from cascade_operator.scaleplans import PlanDecision
from cascade_operator.workers import WorkerView

Manifest = dict[str, Any]

# How long a pod told to load from storage at start may stay unreachable before the
# lifecycle may pick another pod to load (a pod that never comes up must not block).
STORAGE_START_GRACE_S = 120.0


def storage_start_pending(
    pods: Sequence[Manifest], workers: Sequence[WorkerView], now: datetime
) -> bool:
    """A pod created to load from storage (the first instance) is not reachable yet:
    its load is as good as under way, so the lifecycle must not order a second one."""
    seen = {w.name: w for w in workers}
    for pod in pods:
        meta = pod.get("metadata") or {}
        if (meta.get("annotations") or {}).get(START_ANNOTATION) != START_STORAGE:
            continue
        w = seen.get(meta.get("name", ""))
        if w is None or meta.get("deletionTimestamp") or w.phase is not None:
            continue
        if not (w.alive or w.starting):
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


def merge_plan_status(
    status: Manifest, previous: Manifest, decision: PlanDecision, now: datetime
) -> Manifest:
    """`status` (reconcile's) with the Planned condition and currentPlan merged in. A
    currentPlan that ended is cleared with an explicit null (the status is merge-patched)."""
    typed = ModelDeploymentStatus.model_validate(status)
    conditions: list[Condition] = list(typed.conditions)
    if decision.condition is not None:
        conditions = set_condition(conditions, decision.condition, now)
    out = typed.model_copy(
        update={"conditions": conditions, "current_plan": decision.current_plan}
    ).to_api()
    if decision.current_plan is None and previous.get("currentPlan"):
        out["currentPlan"] = None
    return out
