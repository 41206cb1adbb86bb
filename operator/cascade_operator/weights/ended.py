"""Which ScalePlans a tick ended: the ones its status writes took to a final phase.

Counted from what this operator wrote (a plan seen active, patched to Completed, Failed
or Cancelled), so each end is counted once per operator process; a plan that ended while
no operator ran is not counted (its object still says so).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from cascade_api.scaleplan import PlanPhase, ScalePlanStatus
from cascade_operator.weights.lifecycle import StatusPatch
from cascade_operator.weights.plans import PlanView
from cascade_planner.calibrate import HopSample, sample


@dataclass(frozen=True)
class PlanEnd:
    """A ScalePlan that reached a final phase (counted once)."""

    strategy: str
    outcome: str  # Completed | Failed | Cancelled
    predicted_s: float | None  # spec.predictedCompletionSeconds
    measured_s: float | None  # status.measuredCompletionSeconds (Completed only)
    hop: HopSample | None = None  # Completed and measured: a per-hop cost sample


def plan_ends(
    views: Sequence[PlanView], patches: Sequence[StatusPatch], unwritten: Collection[str] = ()
) -> list[PlanEnd]:
    """The plans active before this tick whose written status is final."""
    active = {v.name: v for v in views if v.active}
    ends = []
    for patch in patches:
        view = active.get(patch.plan)
        if view is None or patch.plan in unwritten:
            continue
        status = ScalePlanStatus.model_validate(patch.status)
        if status.phase in (PlanPhase.PENDING, PlanPhase.RUNNING):
            continue
        ends.append(
            PlanEnd(
                strategy=str(view.spec.strategy),
                outcome=str(status.phase),
                predicted_s=view.spec.predicted_completion_seconds,
                measured_s=status.measured_completion_seconds,
                hop=sample(view.spec, status) if status.phase == PlanPhase.COMPLETED else None,
            )
        )
    return ends
