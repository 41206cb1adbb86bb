"""The deployment's own conditions, each a pure function of what exists.

`Available`, `Progressing` and `Degraded` follow the Deployment conventions users know;
`Planned` belongs to the weight-moving half (weights.lifecycle). Each function returns a
typed Condition for the given generation; the status assembler (status.py) sets them, so
lastTransitionTime only moves when a condition flips.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cascade_api.base import Condition, ConditionStatus, ConditionType
from cascade_api.invariants import Violation
from cascade_api.modeldeployment import InstancePhase, ModelDeploymentSpec
from cascade_operator.observed import GatewayView, PodView


def condition(
    type_: ConditionType, ok: bool, reason: str, message: str, generation: int
) -> Condition:
    status = ConditionStatus.TRUE if ok else ConditionStatus.FALSE
    return Condition(
        type=type_, status=status, reason=reason, message=message, observed_generation=generation
    )


def instance_phase(pod: PodView) -> InstancePhase:
    if pod.terminating:
        return InstancePhase.TERMINATING
    if pod.failed:
        return InstancePhase.FAILED
    if pod.ready:
        return InstancePhase.READY
    return InstancePhase.LOADING if pod.phase == "Running" else InstancePhase.PENDING


def available(
    spec: ModelDeploymentSpec | None, gateway: GatewayView, ready: int, generation: int
) -> Condition:
    """Enough instances serve (min(replicas, max(1, minReplicas))) and the gateway is up."""
    if spec is None:
        message = f"{ready} instance(s) ready; spec not accepted"
        return condition(ConditionType.AVAILABLE, ready > 0, "InvalidSpec", message, generation)
    if spec.replicas == 0:
        return condition(
            ConditionType.AVAILABLE, False, "ScaledToZero", "spec.replicas is 0", generation
        )
    needed = min(spec.replicas, max(1, spec.scaling.min_replicas))
    gateway_ok = gateway.available_replicas > 0
    message = f"{ready}/{spec.replicas} instances ready (need {needed}); gateway " + (
        "ready" if gateway_ok else "not ready"
    )
    if ready >= needed and gateway_ok:
        return condition(
            ConditionType.AVAILABLE, True, "MinimumReplicasAvailable", message, generation
        )
    return condition(
        ConditionType.AVAILABLE, False, "MinimumReplicasUnavailable", message, generation
    )


def progressing(
    spec: ModelDeploymentSpec | None, alive: Sequence[PodView], generation: int
) -> Condition:
    """True while the instances converge on the spec, with what holds them up."""

    def cond(ok: bool, reason: str, message: str) -> Condition:
        return condition(ConditionType.PROGRESSING, ok, reason, message, generation)

    if spec is None:
        return cond(False, "InvalidSpec", "waiting for a valid spec")
    ready = sum(p.ready for p in alive)
    stuck = [p for p in alive if p.unschedulable]
    if stuck:
        return cond(True, "Unschedulable", f"{stuck[0].name}: {stuck[0].unschedulable}")
    if len(alive) < spec.replicas:
        return cond(True, "ScalingUp", f"{len(alive)}/{spec.replicas} instances exist")
    if len(alive) > spec.replicas:
        return cond(True, "ScalingDown", f"{len(alive)}/{spec.replicas} instances exist")
    if ready < spec.replicas:
        return cond(True, "InstancesLoading", f"{ready}/{spec.replicas} instances ready")
    return cond(False, "ReplicasReady", f"all {spec.replicas} instances ready")


def degraded(
    problems: Sequence[Violation],
    alive: Sequence[PodView],
    generation: int,
    failures: Mapping[str, str] | None = None,
    refused: str | None = None,
) -> Condition:
    """True while the spec is invalid, workers' last jobs failed (a load or transfer:
    `failures`, pod -> its worker's error, e.g. weights refused against
    spec.model.digest), the API server refuses the operator's writes (`refused`, what
    refusals.degraded_message says) or instances fail, naming the field, the error, the
    call or the pods."""
    if problems:
        message = "; ".join(p.message for p in problems)
        return condition(ConditionType.DEGRADED, True, "InvalidSpec", message, generation)
    if failures:
        message = "; ".join(f"{pod}: {why}" for pod, why in sorted(failures.items()))
        return condition(ConditionType.DEGRADED, True, "WorkerJobFailed", message, generation)
    if refused:
        return condition(ConditionType.DEGRADED, True, "APIRefused", refused, generation)
    failing = [p.name for p in alive if p.failed]
    if failing:
        message = "failing instances: " + ", ".join(failing)
        return condition(ConditionType.DEGRADED, True, "InstancesFailing", message, generation)
    return condition(ConditionType.DEGRADED, False, "AsExpected", "no problems", generation)
