"""Events the operator tells the user, and the one rule for condition transitions.

Deciders return `EventNote`s for what they do (pods created, plans dispatched, host
copies moved); the status assembler adds one note per condition whose status or reason
changed, by `transition_events`. That rule lives only here, so a transition is told
once, whichever half of the operator set the condition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cascade_api.base import Condition, ConditionStatus, ConditionType

# Conditions whose good-news transitions are not worth an event: the weight-moving
# lifecycle tells its steps with ScalePlan events already.
QUIET_WHEN_OK = frozenset({ConditionType.PLANNED})
# Conditions never told by transition: the autoscaler's HPA-style conditions move with
# load; like the HPA, the autoscaler tells each rescale instead (SuccessfulRescale).
QUIET = frozenset(
    {ConditionType.ABLE_TO_SCALE, ConditionType.SCALING_ACTIVE, ConditionType.SCALING_LIMITED}
)


@dataclass(frozen=True)
class EventNote:
    type: str  # Normal | Warning
    reason: str
    message: str


def is_bad_news(old: Condition | None, new: Condition) -> bool:
    """Availability lost, degradation, an instance that cannot be placed, no plan."""
    false, true = ConditionStatus.FALSE, ConditionStatus.TRUE
    lost = new.type == ConditionType.AVAILABLE and old is not None and old.status == true
    return (
        (lost and new.status == false)
        or (new.type == ConditionType.DEGRADED and new.status == true)
        or (new.type == ConditionType.PLANNED and new.status == false)
        or new.reason == "Unschedulable"
    )


def transition_events(old: Sequence[Condition], new: Sequence[Condition]) -> list[EventNote]:
    """One event per condition whose status or reason changed; Warning for bad news."""
    before = {c.type: c for c in old}
    out = []
    for cond in new:
        prev = before.get(cond.type)
        if cond.type in QUIET or (
            prev is not None and (prev.status, prev.reason) == (cond.status, cond.reason)
        ):
            continue
        bad = is_bad_news(prev, cond)
        if not bad and cond.type in QUIET_WHEN_OK:
            continue
        message = f"{cond.type}={cond.status}: {cond.message}"
        out.append(EventNote("Warning" if bad else "Normal", cond.reason, message))
    return out
