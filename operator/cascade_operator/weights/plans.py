"""ScalePlan objects: the typed view the lifecycle reads, the manifest it creates, and
the status of the plan's execution pipelines.

Plan names are derived, not counted: `<md>-g<generation>-<hash of digest and targets>`
(a `-N` suffix only when a finished plan already has the name). An operator killed
between deciding and creating re-derives the same name after a restart and gets an
AlreadyExists instead of a second plan. The repair attempt travels as a label, so the
number of tries per target is rebuilt from the API too.

A running plan's `status.pipelines` follow its `spec.executionPipelines`, which the
workers form and dissolve themselves (worker: serving/live.py); the operator only
watches each head's status, tick by tick (`pipelines`): Planned until the head reports
heading a pipeline with its engine serving (Serving, with the head's measured times),
Dissolved once the head stops heading it after serving, or every member holds every
block while it heads none (it will not form), or the plan ends (`dissolved`). A state
never goes back, and a head whose status is unread changes nothing.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cascade_api import constants as c
from cascade_api.scaleplan import (
    PipelineState,
    PipelineStatus,
    PlanPhase,
    ScalePlanSpec,
    ScalePlanStatus,
)
from cascade_operator.builders import labels, owner_reference
from cascade_operator.observed import MdRef, parse_time
from cascade_operator.weights.workers import WorkerView
from cascade_protocol.status import EnginePhase

Manifest = dict[str, Any]

COMPONENT_PLAN = "scaleplan"
ATTEMPT_LABEL = f"{c.GROUP}/attempt"
ACTIVE = (PlanPhase.PENDING, PlanPhase.RUNNING)
MAX_NAME = 253


@dataclass(frozen=True)
class PlanView:
    name: str
    spec: ScalePlanSpec
    status: ScalePlanStatus
    created: datetime | None = None
    attempt: int = 1  # 1 for a first plan, n + 1 for the n-th repair of its targets
    # When this operator last wrote the status (the controller's memory; None after a
    # restart). Only the write throttle uses it.
    last_patch: datetime | None = None

    @property
    def active(self) -> bool:
        return self.status.phase in ACTIVE

    @classmethod
    def of(cls, body: Manifest, last_patch: datetime | None = None) -> PlanView:
        meta = body.get("metadata") or {}
        raw_attempt = (meta.get("labels") or {}).get(ATTEMPT_LABEL, "1")
        return cls(
            name=meta["name"],
            spec=ScalePlanSpec.model_validate(body.get("spec") or {}),
            status=ScalePlanStatus.model_validate(body.get("status") or {}),
            created=parse_time(meta.get("creationTimestamp")),
            attempt=int(raw_attempt) if str(raw_attempt).isdigit() else 1,
            last_patch=last_patch,
        )


def plan_name(
    md: str, generation: int, digest: str, targets: Collection[str], taken: Collection[str]
) -> str:
    """The deterministic name of a plan for these targets (see the module docstring)."""
    key = "\n".join([digest, *sorted(targets)]).encode()
    tail = f"-g{generation}-{hashlib.sha256(key).hexdigest()[:8]}"
    base = md[: MAX_NAME - len(tail) - 4] + tail
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def plan_manifest(ref: MdRef, name: str, spec: ScalePlanSpec, attempt: int) -> Manifest:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.SP_KIND,
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": labels(ref.name, COMPONENT_PLAN) | {ATTEMPT_LABEL: str(attempt)},
            "ownerReferences": [owner_reference(ref)],
        },
        "spec": spec.to_api(),
    }


def plan_selector(md: str) -> str:
    """Label selector of a deployment's ScalePlans (for the I/O layer's list)."""
    return f"{c.LABEL_DEPLOYMENT}={md},{c.LABEL_COMPONENT}={COMPONENT_PLAN}"


def by_age(plans: Sequence[PlanView]) -> list[PlanView]:
    """Oldest first; plans without a timestamp (not yet read back) sort by name, last."""
    return sorted(plans, key=lambda p: (p.created is None, p.created or datetime.min, p.name))


def pipelines(
    spec: ScalePlanSpec,
    status: ScalePlanStatus,
    workers: Mapping[str, WorkerView],
    complete: Collection[str],
) -> list[PipelineStatus]:
    """Each of the plan's execution pipelines as its head reports it now, from what
    `status` says already (see the module docstring); `complete`: targets holding every
    block (a source, maybe a pipeline's last stage, holds them all along)."""
    start = status.start_time.timestamp() if status.start_time else None
    held = set(complete) | {s.pod for s in spec.sources}
    out = []
    for i, pipeline in enumerate(spec.execution_pipelines):
        head = pipeline.stages[0].pod
        known = status.pipelines[i] if i < len(status.pipelines) else None
        prev = known if known is not None and known.head == head else PipelineStatus(head=head)
        done = all(s.pod in held for s in pipeline.stages)
        out.append(_pipeline(prev, workers.get(head), done, start))
    return out


def _pipeline(
    prev: PipelineStatus, head: WorkerView | None, done: bool, start: float | None
) -> PipelineStatus:
    if prev.state == PipelineState.DISSOLVED or head is None or head.phase is None:
        return prev
    if head.heads_pipeline and head.engine == EnginePhase.SERVING:
        return _measured(prev.model_copy(update={"state": PipelineState.SERVING}), head, start)
    if head.heads_pipeline:  # forming (engine starting) or switching to local: as it was
        return prev
    if prev.state == PipelineState.SERVING or done:
        return prev.model_copy(update={"state": PipelineState.DISSOLVED})
    return prev


def _measured(p: PipelineStatus, head: WorkerView, start: float | None) -> PipelineStatus:
    """`p` with the head's wall times: after the plan's start, and serving less covered."""
    covered, serving = head.covered_at, head.serving_at

    def since(at: float | None, before: float | None) -> float | None:
        return round(at - start, 3) if at is not None and start is not None else before

    delay = round(serving - covered, 3) if serving is not None and covered is not None else None
    return p.model_copy(
        update={
            "covered_seconds": since(covered, p.covered_seconds),
            "serving_seconds": since(serving, p.serving_seconds),
            "serving_delay_seconds": p.serving_delay_seconds if delay is None else delay,
        }
    )


def dissolved(pipelines: Sequence[PipelineStatus]) -> list[PipelineStatus]:
    """The pipelines of a plan that ended: none serves on its behalf any more."""
    return [p.model_copy(update={"state": PipelineState.DISSOLVED}) for p in pipelines]


def with_pipelines(status: ScalePlanStatus, found: list[PipelineStatus]) -> ScalePlanStatus:
    """`status` with these pipelines and their summary (the Pipelines printer column)."""
    counts = Counter(PipelineState(p.state) for p in found)
    order = (PipelineState.SERVING, PipelineState.PLANNED, PipelineState.DISSOLVED)
    summary = ", ".join(f"{counts[s]} {s.value.lower()}" for s in order if counts[s])
    return status.model_copy(update={"pipelines": found, "pipeline_summary": summary})
