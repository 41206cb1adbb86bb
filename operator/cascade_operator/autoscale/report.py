"""What the autoscaler shows: status.autoscaler and the HPA's three conditions, pure.

`AbleToScale`, `ScalingActive` and `ScalingLimited` mean what they mean on an HPA, so
`kubectl describe` reads the same. With an External owner only `ScalingActive=False`
(`OwnedExternally`) is shown, and the other two are removed: nothing here scales.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cascade_api.base import Condition, ConditionType
from cascade_api.scaling import AutoscalerOwner, AutoscalerStatus, RoleCounts
from cascade_autoscaler.policy_types import Condition as PolicyCondition
from cascade_autoscaler.policy_types import Recommendation
from cascade_operator.conditions import condition
from cascade_operator.events import EventNote
from cascade_operator.status import ScalingShown

OWNED_EXTERNALLY = "OwnedExternally"


@dataclass(frozen=True)
class AutoscaleFacts:
    """What a tick reports: what the status shows, what to tell (the write itself is
    the tick's `Tick.scaled_to`)."""

    shown: ScalingShown
    events: list[EventNote] = field(default_factory=list)
    recommendation: Recommendation | None = None  # this tick's (None: not a Cascade tick)


def external(generation: int) -> AutoscaleFacts:
    message = (
        "spec.replicas is owned externally (kubectl scale, an HPA or KEDA): "
        "spec.scaling.autoscaler is External, or maxReplicas is unset or equals minReplicas"
    )
    return AutoscaleFacts(
        ScalingShown(
            status=AutoscalerStatus(owner=AutoscalerOwner.EXTERNAL, reason=message),
            conditions=[
                condition(
                    ConditionType.SCALING_ACTIVE, False, OWNED_EXTERNALLY, message, generation
                )
            ],
            removed=frozenset({ConditionType.ABLE_TO_SCALE, ConditionType.SCALING_LIMITED}),
        )
    )


def waiting() -> AutoscaleFacts:
    """An autoscaled deployment before its first tick."""
    message = "waiting for the first autoscaler tick"
    return AutoscaleFacts(
        ScalingShown(AutoscalerStatus(owner=AutoscalerOwner.CASCADE, reason=message), [])
    )


def facts(
    rec: Recommendation,
    generation: int,
    *,
    last_scale_time: str | None,
    written: int | None,
    before: int,
) -> AutoscaleFacts:
    def cond(type_: ConditionType, c: PolicyCondition) -> Condition:
        return condition(type_, c.status, str(c.reason), rec.reason, generation)

    roles = rec.roles
    status = AutoscalerStatus(
        owner=AutoscalerOwner.CASCADE,
        desired_replicas=rec.replicas,
        roles=RoleCounts(interactive=roles.interactive, mixed=roles.mixed, batch=roles.batch),
        reason=rec.reason,
        theta=round(rec.theta, 3),
        last_scale_time=last_scale_time,
    )
    events = []
    if written is not None:
        message = f"New size: {written} (was {before}); reason: {rec.reason}"
        events.append(EventNote("Normal", "SuccessfulRescale", message))
    conditions = [
        cond(ConditionType.ABLE_TO_SCALE, rec.able_to_scale),
        cond(ConditionType.SCALING_ACTIVE, rec.scaling_active),
        cond(ConditionType.SCALING_LIMITED, rec.scaling_limited),
    ]
    return AutoscaleFacts(ScalingShown(status, conditions), events, rec)
