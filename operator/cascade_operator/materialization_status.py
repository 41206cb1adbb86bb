"""status.materialization and its Events: the profile Job's outcome and what instances did.

Each worker reports what its start did with materialized state (restored, profiled,
refused); `status.instances[].materialization` shows it per pod and
`status.materialization` sums it up beside the profile Job's phase. Events are told on
transitions of the stored status, so a restarted operator tells nothing twice: the
Job's Succeeded (`Materialized`) or Failed (`MaterializationFailed`) once per Job, and a
refused artifact (`MaterializationRefused`) once per (pod, artifact). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from cascade_api.materialization import (
    InstanceMaterialization,
    MaterializationPhase,
    MaterializationState,
    MaterializationStatus,
)
from cascade_api.modeldeployment import InstancePhase, InstanceStatus
from cascade_operator.events import EventNote
from cascade_operator.materialization import JobShown
from cascade_operator.observed import PodView
from cascade_protocol.materialize import MaterializationInfo

# Event messages are kept short enough for any API server (a refusal lists key diffs).
MAX_MESSAGE = 1000


def instance_materialization(info: MaterializationInfo) -> InstanceMaterialization:
    return InstanceMaterialization(
        state=info.state,
        key=info.key,
        artifact=info.artifact,
        saved_seconds=round(info.saved_s, 2) if info.saved_s is not None else None,
        reason=info.reason,
    )


def summarize(
    shown: JobShown,
    pods: Sequence[PodView],
    instances: Sequence[InstanceStatus],
    previous: MaterializationStatus | None,
) -> MaterializationStatus:
    """The Job's phase and the instances' reports: counts of restored and refused, the
    mean seconds saved by a restore, and the key the newest reporting instance needed."""
    live = [
        i
        for i in instances
        if i.materialization is not None
        and i.phase not in (InstancePhase.TERMINATING, InstancePhase.FAILED)
    ]
    reports = [i.materialization for i in live if i.materialization is not None]
    restored = [r for r in reports if r.state == MaterializationState.RESTORED]
    saved = [r.saved_seconds for r in restored if r.saved_seconds is not None]
    created = {p.name: p.created.timestamp() for p in pods if p.created is not None}
    newest = max(live, key=lambda i: (created.get(i.pod, 0.0), i.pod), default=None)
    key = newest.materialization.key if newest and newest.materialization else None
    return MaterializationStatus(
        enabled=shown.enabled,
        job=shown.job,
        phase=shown.phase,
        key=key or (previous.key if previous else None),
        restored=len(restored),
        refused=sum(r.state == MaterializationState.REFUSED for r in reports),
        saved_seconds=round(sum(saved) / len(saved), 2) if saved else None,
    )


def job_events(
    before: MaterializationStatus | None, now: MaterializationStatus, shown: JobShown
) -> list[EventNote]:
    """`Materialized` or `MaterializationFailed` when a Job reaches that phase."""
    if now.job is None or now.phase not in (
        MaterializationPhase.SUCCEEDED,
        MaterializationPhase.FAILED,
    ):
        return []
    if before is not None and (before.job, before.phase) == (now.job, now.phase):
        return []
    if now.phase == MaterializationPhase.SUCCEEDED:
        text = f"profile Job {now.job} recorded the start-up state; new instances restore it"
        return [EventNote("Normal", "Materialized", text)]
    why = f": {shown.message}" if shown.message else ""
    text = f"profile Job {now.job} failed{why}; instances profile at start (delete it to retry)"
    return [EventNote("Warning", "MaterializationFailed", text[:MAX_MESSAGE])]


def refused_events(
    before: Sequence[InstanceStatus], now: Sequence[InstanceStatus]
) -> list[EventNote]:
    """One `MaterializationRefused` per pod and artifact: told when a pod's report turns
    to refused, or names another artifact than the refusal already stored."""
    told = {
        (i.pod, i.materialization.artifact)
        for i in before
        if i.materialization is not None and i.materialization.state == MaterializationState.REFUSED
    }
    out = []
    for inst in now:
        report = inst.materialization
        if report is None or report.state != MaterializationState.REFUSED:
            continue
        if (inst.pod, report.artifact) in told:
            continue
        artifact = report.artifact or "(none)"
        text = f"{inst.pod} refused materialized artifact {artifact}: {report.reason or '-'}"
        out.append(EventNote("Warning", "MaterializationRefused", text[:MAX_MESSAGE]))
    return out
