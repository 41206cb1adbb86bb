"""A plan's start delay: from its first target answering to its first bytes landing.

Plans start as soon as a target can receive (targets.py, followup.py), so the delay
that matters is the one a target sees: its control API listens (`targetAnsweredTime`,
the earliest of the targets' `startup.listeningAt`) and then waits for the first bytes
(`firstByteTime`, the earliest `firstByteAt` a target reports). Both are the workers'
own clocks, not the operator's: its polling and the API's whole-second timestamps would
hide what is measured. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from cascade_api.scaleplan import ScalePlanSpec, ScalePlanStatus
from cascade_operator.weights.workers import WorkerView
from cascade_protocol.status import WorkerPhase


def with_start_delay(
    spec: ScalePlanSpec, status: ScalePlanStatus, workers: Mapping[str, WorkerView]
) -> ScalePlanStatus:
    """`status` with the two times and the seconds between them, once known. A time
    once recorded only moves earlier. A first byte counts only from a target in this
    plan's transfer (receiving, or holding the plan's model) and after its dispatch:
    a target failed by an earlier plan still reports that plan's first byte."""
    answered = _earliest(
        [status.target_answered_time]
        + [_at(w.listening_at) for p in spec.targets if (w := workers.get(p))]
    )
    dispatched = status.start_time.timestamp() if status.start_time else None
    first = _earliest(
        [status.first_byte_time]
        + [
            _at(w.first_byte_at)
            for p in spec.targets
            if (w := workers.get(p))
            and dispatched is not None
            and w.first_byte_at is not None
            and w.first_byte_at >= dispatched
            and (w.phase == WorkerPhase.TRANSFERRING or w.holds(spec.model_digest))
        ]
    )
    delay = None
    if answered is not None and first is not None:
        delay = round((first - answered).total_seconds(), 3)
    return status.model_copy(
        update={
            "target_answered_time": answered,
            "first_byte_time": first,
            "start_delay_seconds": delay,
        }
    )


def _at(epoch: float | None) -> datetime | None:
    return datetime.fromtimestamp(epoch, UTC) if epoch is not None else None


def _earliest(times: list[datetime | None]) -> datetime | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None
