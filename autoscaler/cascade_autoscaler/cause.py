"""Why a tick recommends what it does, as one value of a closed set.

The recommendation's `reason` is a sentence for people (status, events); dashboards and
alerts need a label that takes few, documented values (docs/observability.md). The cause
is what decided the count, in order of precedence: a forced scale from zero, a paused
autoscaler, behavior (a rate policy or a bound moved the count; a stabilization window
held it), no change, then which demand moved it: interactive backpressure (the IBP band),
batch backpressure (Algorithm 2's deadlines), or the keep-alive ending at zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from cascade_autoscaler.behavior import Outcome, Reason


class Cause(StrEnum):
    STEADY = "Steady"
    INTERACTIVE_BACKPRESSURE = "InteractiveBackpressure"
    INTERACTIVE_IDLE = "InteractiveIdle"
    BATCH_BACKPRESSURE = "BatchBackpressure"
    BATCH_DRAINED = "BatchDrained"
    KEEP_ALIVE_EXPIRED = "KeepAliveExpired"
    SCALE_FROM_ZERO = "ScaleFromZero"
    # The HPA's own reasons, verbatim, where behavior decided.
    SCALE_UP_STABILIZED = Reason.SCALE_UP_STABILIZED.value
    SCALE_DOWN_STABILIZED = Reason.SCALE_DOWN_STABILIZED.value
    SCALE_UP_LIMIT = Reason.SCALE_UP_LIMIT.value
    SCALE_DOWN_LIMIT = Reason.SCALE_DOWN_LIMIT.value
    TOO_MANY_REPLICAS = Reason.TOO_MANY_REPLICAS.value
    TOO_FEW_REPLICAS = Reason.TOO_FEW_REPLICAS.value
    SCALING_DISABLED = Reason.SCALING_DISABLED.value


@dataclass(frozen=True)
class Moves:
    """What each demand asked for against what runs now, and what the tick settled on."""

    current: int  # spec.replicas before the tick
    replicas: int  # the recommendation after behavior, bounds and scale from zero
    interactive: int  # interactive + mixed wanted minus interactive + mixed running
    batch: int  # batch instances wanted minus batch running
    to_zero: bool  # keep-alive ended: the raw count went to 0 for idleness
    from_zero: bool  # 1 forced past behavior because a request waits at 0


def cause_of(moves: Moves, outcome: Outcome) -> Cause:
    """The one cause of this tick's count (see the module docstring for the order)."""
    if moves.from_zero:
        return Cause.SCALE_FROM_ZERO
    if not outcome.active:
        return Cause.SCALING_DISABLED
    if outcome.limited:
        return Cause(outcome.limit.value)
    if outcome.stabilization is not Reason.READY_FOR_NEW_SCALE:
        return Cause(outcome.stabilization.value)
    if moves.replicas == moves.current:
        return Cause.STEADY
    if moves.replicas > moves.current:
        if moves.batch > 0 and moves.interactive <= 0:
            return Cause.BATCH_BACKPRESSURE
        return Cause.INTERACTIVE_BACKPRESSURE
    if moves.to_zero:
        return Cause.KEEP_ALIVE_EXPIRED
    if moves.batch < 0 and moves.interactive >= 0:
        return Cause.BATCH_DRAINED
    return Cause.INTERACTIVE_IDLE
