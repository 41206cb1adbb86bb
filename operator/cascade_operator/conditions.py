"""Status of a ModelDeployment computed from what exists: counts, instances, conditions.

Pure: the same observation always yields the same status, and lastTransitionTime only
moves when a condition flips, so re-running a reconcile never churns the object.
"""

from __future__ import annotations

from datetime import datetime

from cascade_api.base import Condition, ConditionStatus, set_condition
from cascade_api.invariants import Violation
from cascade_api.modeldeployment import (
    InstancePhase,
    InstanceStatus,
    ModelDeploymentSpec,
    ModelDeploymentStatus,
)
from cascade_operator.view import Observed, PodView

AVAILABLE, PROGRESSING, DEGRADED = "Available", "Progressing", "Degraded"


def instance_phase(pod: PodView) -> InstancePhase:
    if pod.terminating:
        return InstancePhase.TERMINATING
    if pod.failed:
        return InstancePhase.FAILED
    if pod.ready:
        return InstancePhase.READY
    return InstancePhase.LOADING if pod.phase == "Running" else InstancePhase.PENDING


def _cond(type_: str, ok: bool, reason: str, message: str, generation: int) -> Condition:
    status = ConditionStatus.TRUE if ok else ConditionStatus.FALSE
    return Condition(
        type=type_, status=status, reason=reason, message=message, observed_generation=generation
    )


def _available(
    spec: ModelDeploymentSpec | None, obs: Observed, ready: int
) -> tuple[bool, str, str]:
    if spec is None:
        return ready > 0, "InvalidSpec", f"{ready} instance(s) ready; spec not accepted"
    if spec.replicas == 0:
        return False, "ScaledToZero", "spec.replicas is 0"
    needed = min(spec.replicas, max(1, spec.scaling.min_replicas))
    gateway_ok = obs.gateway.available_replicas > 0
    message = f"{ready}/{spec.replicas} instances ready (need {needed}); gateway " + (
        "ready" if gateway_ok else "not ready"
    )
    if ready >= needed and gateway_ok:
        return True, "MinimumReplicasAvailable", message
    return False, "MinimumReplicasUnavailable", message


def _progressing(spec: ModelDeploymentSpec | None, alive: list[PodView]) -> tuple[bool, str, str]:
    if spec is None:
        return False, "InvalidSpec", "waiting for a valid spec"
    ready = sum(p.ready for p in alive)
    stuck = [p for p in alive if p.unschedulable]
    if stuck:
        return True, "Unschedulable", f"{stuck[0].name}: {stuck[0].unschedulable}"
    if len(alive) < spec.replicas:
        return True, "ScalingUp", f"{len(alive)}/{spec.replicas} instances exist"
    if len(alive) > spec.replicas:
        return True, "ScalingDown", f"{len(alive)}/{spec.replicas} instances exist"
    if ready < spec.replicas:
        return True, "InstancesLoading", f"{ready}/{spec.replicas} instances ready"
    return False, "ReplicasReady", f"all {spec.replicas} instances ready"


def _degraded(problems: list[Violation], alive: list[PodView]) -> tuple[bool, str, str]:
    if problems:
        return True, "InvalidSpec", "; ".join(p.message for p in problems)
    failing = [p.name for p in alive if p.failed]
    if failing:
        return True, "InstancesFailing", "failing instances: " + ", ".join(failing)
    return False, "AsExpected", "no problems"


def compute_status(
    obs: Observed,
    spec: ModelDeploymentSpec | None,
    problems: list[Violation],
    selector: str,
    endpoint: str,
    now: datetime,
) -> ModelDeploymentStatus:
    previous = ModelDeploymentStatus.model_validate(obs.status or {})
    alive = [p for p in obs.pods if not p.terminating]
    ready = sum(p.ready for p in alive)
    loading = sum(1 for p in alive if not p.ready and not p.failed)
    conditions = list(previous.conditions)
    for type_, (ok, reason, message) in (
        (AVAILABLE, _available(spec, obs, ready)),
        (PROGRESSING, _progressing(spec, alive)),
        (DEGRADED, _degraded(problems, alive)),
    ):
        new = _cond(type_, ok, reason, message, obs.generation)
        conditions = set_condition(conditions, new, now)
    instances = [
        InstanceStatus(
            pod=p.name, node=p.node, phase=instance_phase(p), blocks_loaded=p.blocks_loaded
        )
        for p in sorted(obs.pods, key=lambda p: (p.index, p.name))
    ]
    return previous.model_copy(
        update={
            "observed_generation": obs.generation,
            "replicas": len(alive),
            "ready_replicas": ready,
            "loading_replicas": loading,
            "selector": selector,
            "conditions": conditions,
            "instances": instances,
            "endpoint": endpoint,
        }
    )
