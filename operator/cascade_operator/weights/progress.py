"""A running ScalePlan's status from its targets' worker statuses, and when to write it.

Three small steps, each a pure function of the plan, what the workers report and `now`:

- `aggregate`: per-target progress (blocks and bytes received, complete, when), the
  totals the printer columns show, and the execution pipelines' states (plans.pipelines).
  A target that completed stays complete even if its pod goes away later: the status is
  a record of the transfer.
- `outcome`: what each target is doing (waiting for its order, receiving, complete,
  failed, gone), and from that the plan's next phase with a reason.
- `should_patch`: the throttle. Workers receive blocks many times a second; the plan's
  status is written when the phase, a target's completion or a pipeline changes, when
  progress moved by at least `progress_step` of all blocks, or when `patch_interval_s`
  passed since the last write with anything changed. Never once per block.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from cascade_api.base import Condition, ConditionStatus, set_condition
from cascade_api.scaleplan import PlanPhase, ScalePlanSpec, ScalePlanStatus, TargetProgress
from cascade_operator.weights.plans import dissolved, pipelines, with_pipelines
from cascade_operator.weights.start_delay import with_start_delay
from cascade_operator.weights.workers import WorkerView
from cascade_protocol.status import WorkerPhase

SUCCEEDED = "Succeeded"  # the plan's condition: Unknown while running, then True or False


@dataclass(frozen=True)
class PlanPolicy:
    """Knobs of the ScalePlan lifecycle; the defaults suit the local cluster and real ones."""

    progress_step: float = 0.10  # write status when progress moved by this share of all blocks
    patch_interval_s: float = 10.0  # ... or this long after the last write, if anything moved
    # A target that still shows no transfer this long after dispatch lost its order.
    dispatch_grace_s: float = 30.0
    # A plan running longer than max(floor, factor x predicted) has failed (a stuck peer).
    timeout_floor_s: float = 300.0
    timeout_factor: float = 4.0
    max_repairs: int = 3  # repair plans per target before the pod is replaced
    # What waiting for a running plan costs beyond the predictions: its end is seen at
    # the next poll (about a second) before the plan from all holders starts
    # (followup.py weighs this against a follow-up plan now).
    notice_s: float = 1.0
    history: int = 10  # finished plans kept per deployment (like revisionHistoryLimit)


class Outcome(StrEnum):
    WAITING = "Waiting"  # dispatched; the worker has not started (or its status is unread)
    RECEIVING = "Receiving"
    COMPLETE = "Complete"
    FAILED = "Failed"  # the transfer ended without every block, or the order was lost
    GONE = "Gone"  # the pod is deleted, terminating or failed


@dataclass(frozen=True)
class Verdict:
    phase: PlanPhase
    reason: str
    message: str
    stuck: tuple[str, ...] = ()  # targets still receiving when the plan timed out


def aggregate(
    spec: ScalePlanSpec,
    prev: ScalePlanStatus,
    workers: dict[str, WorkerView],
    now: datetime,
) -> ScalePlanStatus:
    before = {t.pod: t for t in prev.targets}
    targets = [_target(spec, before.get(pod), workers.get(pod), now) for pod in spec.targets]
    done = sum(t.complete for t in targets)
    measured = [t.transfer_seconds for t in targets if t.transfer_seconds is not None]
    complete = {t.pod for t in targets if t.complete}
    found = pipelines(spec, prev, workers, complete)
    timed = with_start_delay(spec, prev, workers)
    return with_pipelines(timed, found).model_copy(
        update={
            "target_count": len(spec.targets),
            "progress": f"{done}/{len(spec.targets)}",
            "targets": targets,
            "bytes_moved": sum(t.bytes_received for t in targets),
            "measured_completion_seconds": (
                max(measured) if targets and len(measured) == len(targets) else None
            ),
        }
    )


def _target(
    spec: ScalePlanSpec, prev: TargetProgress | None, w: WorkerView | None, now: datetime
) -> TargetProgress:
    prev = prev or TargetProgress(pod=w.name if w else "")
    if prev.complete and prev.transfer_seconds is None and w and w.transfer_s is not None:
        # It held every block while still forwarding (a chain hop, an NVLink leader):
        # its worker reports the measurement when its transfer ends.
        return prev.model_copy(update={"transfer_seconds": w.transfer_s})
    if prev.complete or w is None or w.phase is None:
        return prev
    total = len(spec.blocks)
    if w.holds(spec.model_digest):
        return TargetProgress(
            pod=w.name,
            blocks_received=total,
            bytes_received=sum(b.bytes for b in spec.blocks),
            complete=True,
            first_complete_time=now,
            transfer_seconds=w.transfer_s,
        )
    ours = w.phase in (WorkerPhase.TRANSFERRING, WorkerPhase.FAILED) and w.model_digest in (
        None,
        spec.model_digest,
    )
    return TargetProgress(
        pod=w.name,
        blocks_received=min(w.blocks_loaded, total) if ours else 0,
        bytes_received=w.bytes_received if ours else 0,
    )


def outcome(
    pod: str,
    spec: ScalePlanSpec,
    status: ScalePlanStatus,
    w: WorkerView | None,
    now: datetime,
    policy: PlanPolicy,
) -> Outcome:
    if any(t.pod == pod and t.complete for t in status.targets):
        return Outcome.COMPLETE
    if w is None or not w.alive:
        return Outcome.GONE
    if w.holds(spec.model_digest):
        return Outcome.COMPLETE
    if w.phase is None or w.phase == WorkerPhase.TRANSFERRING:
        return Outcome.RECEIVING if w.phase else Outcome.WAITING
    if w.phase == WorkerPhase.FAILED:
        return Outcome.FAILED
    started = status.start_time or now
    lost = now - started > timedelta(seconds=policy.dispatch_grace_s)
    return Outcome.FAILED if lost else Outcome.WAITING


def verdict(
    spec: ScalePlanSpec,
    status: ScalePlanStatus,
    workers: dict[str, WorkerView],
    now: datetime,
    policy: PlanPolicy,
    lent: Collection[str] = (),
) -> Verdict:
    """The next phase of a dispatched (Running) plan. `lent`: pods that send in another
    active plan (a target of this one that completed may be a follow-up's source)."""
    seen = {p: outcome(p, spec, status, workers.get(p), now, policy) for p in spec.targets}
    by = {o: sorted(p for p, s in seen.items() if s == o) for o in Outcome}
    if by[Outcome.GONE]:
        gone = ", ".join(by[Outcome.GONE])
        return Verdict(PlanPhase.CANCELLED, "TargetsGone", f"targets gone: {gone}")
    # Targets that hold every block but still forward it (chain hops, NVLink leaders):
    # the plan ends when their transfers do, so their measured times are in the record.
    forwarding = [
        p
        for p in by[Outcome.COMPLETE]
        if (w := workers.get(p)) and w.phase == WorkerPhase.TRANSFERRING and p not in lent
    ]
    if len(by[Outcome.COMPLETE]) == len(spec.targets) and not forwarding:
        return Verdict(PlanPhase.COMPLETED, "AllTargetsComplete", _done(spec, status, now))
    active = by[Outcome.RECEIVING] + by[Outcome.WAITING] + forwarding
    if active and now - (status.start_time or now) > timedelta(seconds=timeout(spec, policy)):
        message = f"running longer than {timeout(spec, policy):.0f}s; stuck: {', '.join(active)}"
        return Verdict(PlanPhase.FAILED, "Timeout", message, tuple(active))
    if by[Outcome.FAILED] and not active:
        detail = "; ".join(_failure(workers.get(p), p) for p in by[Outcome.FAILED])
        return Verdict(PlanPhase.FAILED, "TargetsFailed", detail)
    return Verdict(PlanPhase.RUNNING, "Transferring", f"{status.progress} targets complete")


def timeout(spec: ScalePlanSpec, policy: PlanPolicy) -> float:
    predicted = spec.predicted_completion_seconds or 0.0
    return max(policy.timeout_floor_s, policy.timeout_factor * predicted)


def _failure(w: WorkerView | None, pod: str) -> str:
    if w is None:
        return f"{pod}: gone"
    if w.missing:
        return f"{pod}: missing blocks {list(w.missing)}"
    return f"{pod}: {w.error or 'no transfer started'}"


def _done(spec: ScalePlanSpec, status: ScalePlanStatus, now: datetime) -> str:
    took = (now - status.start_time).total_seconds() if status.start_time else 0.0
    measured = status.measured_completion_seconds
    head = f"{len(spec.targets)} target(s) hold all {len(spec.blocks)} blocks"
    head += f" {took:.3g}s after dispatch"
    tail = f"; transfer {measured:.3g}s" if measured is not None else ""
    predicted = spec.predicted_completion_seconds
    tail += f" (predicted {predicted:.3g}s)" if predicted is not None else ""
    return head + tail


def blocks_done(status: ScalePlanStatus) -> int:
    return sum(t.blocks_received for t in status.targets)


def should_patch(
    old: ScalePlanStatus,
    new: ScalePlanStatus,
    spec: ScalePlanSpec,
    last_patch: datetime | None,
    now: datetime,
    policy: PlanPolicy,
) -> bool:
    """Whether `new` is worth a write over the stored `old` (see the module docstring).

    `last_patch` is when this operator last wrote the plan's status (kept in memory by
    the controller; None after a restart, which costs at most one extra write)."""
    if new == old:
        return False
    if new.phase != old.phase or new.progress != old.progress or new.pipelines != old.pipelines:
        return True
    if [t.pod for t in new.targets] != [t.pod for t in old.targets]:
        return True
    if (new.first_byte_time, new.target_answered_time) != (
        old.first_byte_time,
        old.target_answered_time,
    ):
        return True
    whole = max(1, len(spec.blocks) * len(spec.targets))
    if abs(blocks_done(new) - blocks_done(old)) / whole >= policy.progress_step:
        return True
    return last_patch is None or now - last_patch >= timedelta(seconds=policy.patch_interval_s)


def with_condition(
    status: ScalePlanStatus, reason: str, message: str, now: datetime, ok: bool | None = None
) -> ScalePlanStatus:
    """`status` with its Succeeded condition set (Unknown, True or False)."""
    flag = ConditionStatus.UNKNOWN if ok is None else ConditionStatus(str(ok))
    cond = Condition(type=SUCCEEDED, status=flag, reason=reason, message=message)
    return status.model_copy(update={"conditions": set_condition(status.conditions, cond, now)})


def ended(
    status: ScalePlanStatus, phase: PlanPhase, reason: str, message: str, now: datetime
) -> ScalePlanStatus:
    """The final status: phase, completion time, Succeeded True (Completed) or False,
    every execution pipeline Dissolved."""
    final = with_pipelines(status, dissolved(status.pipelines))
    final = final.model_copy(update={"phase": phase, "completion_time": now})
    return with_condition(final, reason, message, now, phase == PlanPhase.COMPLETED)


def shape(spec: ScalePlanSpec) -> str:
    """One line about a plan for events and conditions."""
    predicted = spec.predicted_completion_seconds
    tail = f", predicted {predicted:.3g}s" if predicted is not None else ""
    return (
        f"{spec.strategy} from {len(spec.sources)} source(s) to {len(spec.targets)} "
        f"target(s), {len(spec.blocks)} blocks{tail}"
    )
