"""The one place a ModelDeployment's status is assembled.

A reconcile has two deciders (instances.py for pods and the gateway, the weights
lifecycle for plans); each contributes facts, and `assemble` merges them once into a
typed status: counts and instances from the pods (blocks held and serving mode from
each worker's own status), `Available`/`Progressing`/`Degraded` from conditions.py, `Planned` and
`currentPlan` from the lifecycle, `materialization` from the profile Job and each
worker's report (materialization_status.py). Transition events are computed here, once,
over every condition (events.transition_events), with the materialization Events told on
the same stored-status transitions. Pure: `now` passed in; the same facts give the same
status, so a repeated reconcile writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cascade_api.base import Condition, set_condition
from cascade_api.materialization import InstanceMaterialization
from cascade_api.modeldeployment import (
    HostCopyStatus,
    InstanceDevice,
    InstanceMode,
    InstanceStartup,
    InstanceStatus,
    ModelDeploymentStatus,
)
from cascade_api.scaling import AutoscalerStatus
from cascade_operator.conditions import available, degraded, instance_phase, progressing
from cascade_operator.events import EventNote, transition_events
from cascade_operator.materialization import JobShown
from cascade_operator.materialization_status import (
    instance_materialization,
    job_events,
    refused_events,
    summarize,
)
from cascade_operator.observed import GatewayView, PodView
from cascade_operator.spec import ParsedSpec
from cascade_protocol.materialize import MaterializationInfo
from cascade_protocol.status import ServingMode, StartupInfo

Manifest = dict[str, Any]


@dataclass(frozen=True)
class PlanState:
    """What the weight-moving lifecycle contributes to the deployment's status."""

    planned: Condition | None  # the Planned condition (None: leave it as it is)
    current_plan: str | None  # the ScalePlan in flight


@dataclass(frozen=True)
class ScalingShown:
    """What the autoscaler contributes: status.autoscaler and its HPA-style conditions."""

    status: AutoscalerStatus
    conditions: list[Condition]
    removed: frozenset[str] = frozenset()  # condition types that no longer apply


@dataclass(frozen=True)
class StatusInput:
    previous: ModelDeploymentStatus  # as stored
    generation: int
    parsed: ParsedSpec
    pods: Sequence[PodView]
    gateway: GatewayView
    selector: str  # the /scale subresource's label selector
    endpoint: str  # the gateway's in-cluster URL
    # pod -> blocks its worker holds (GET /v1/status); a pod whose worker did not
    # answer this tick is absent and keeps the figure last written.
    blocks: Mapping[str, int] = field(default_factory=dict)
    # pod -> how its worker serves (GET /v1/status mode); a pod whose worker did not
    # answer this tick is absent and shows no mode.
    modes: Mapping[str, ServingMode] = field(default_factory=dict)
    host_copies: Sequence[HostCopyStatus] = ()  # one per host-copy pod
    # pod -> its worker's start-up report (absent: did not answer; the last one stays)
    startups: Mapping[str, StartupInfo] = field(default_factory=dict)
    # pod -> what its worker's start did with materialized state (absent: the last stays)
    materializations: Mapping[str, MaterializationInfo] = field(default_factory=dict)
    # The profile Job as decided and observed; None: leave status.materialization's Job
    # side as it is (invalid spec).
    materialization: JobShown | None = None
    # pod -> why its worker's last job failed (a refused load or transfer); Degraded says it
    failures: Mapping[str, str] = field(default_factory=dict)
    refused: str | None = None  # the API server's refusals of this reconcile (refusals.py)
    plans: PlanState | None = None  # None: the lifecycle did not run (invalid spec)
    scaling: ScalingShown | None = None  # None: leave status.autoscaler as it is


@dataclass(frozen=True)
class StatusUpdate:
    status: ModelDeploymentStatus
    events: list[EventNote]

    def patch(self, previous: ModelDeploymentStatus) -> Manifest | None:
        """The merge patch from the stored status to this one (None: nothing changed).
        A field that became empty is sent as an explicit null, or the merge keeps it;
        inside objects too (a merge patch merges them: status.materialization.job)."""
        old = previous.to_api()
        new = self.status.to_api()
        if new == old:
            return None
        return _with_nulls(old, new)


def _with_nulls(old: Manifest, new: Manifest) -> Manifest:
    out = {
        k: _with_nulls(old[k], v) if isinstance(v, dict) and isinstance(old.get(k), dict) else v
        for k, v in new.items()
    }
    return out | {key: None for key in old if key not in new}


def assemble(inp: StatusInput, now: datetime) -> StatusUpdate:
    spec, gen = inp.parsed.accepted, inp.generation
    alive = [p for p in inp.pods if not p.terminating]
    ready = sum(p.ready for p in alive)
    loading = sum(1 for p in alive if not p.ready and not p.failed)
    new = [
        available(spec, inp.gateway, ready, gen),
        progressing(spec, alive, gen),
        degraded(inp.parsed.problems, alive, gen, inp.failures, inp.refused),
    ]
    current_plan = inp.previous.current_plan
    if inp.plans is not None:
        current_plan = inp.plans.current_plan
        if inp.plans.planned is not None:
            new.append(inp.plans.planned)
    autoscaler = inp.previous.autoscaler
    conditions = list(inp.previous.conditions)
    if inp.scaling is not None:
        autoscaler = inp.scaling.status
        new += inp.scaling.conditions
        conditions = [c for c in conditions if c.type not in inp.scaling.removed]
    for cond in new:
        conditions = set_condition(conditions, cond, now)
    instances = _instances(inp)
    before = inp.previous.materialization
    shown = inp.materialization or (
        JobShown(before.enabled, before.job, before.phase) if before else None
    )
    materialization = summarize(shown, inp.pods, instances, before) if shown else None
    status = inp.previous.model_copy(
        update={
            "observed_generation": gen,
            "replicas": len(alive),
            "ready_replicas": ready,
            "loading_replicas": loading,
            "selector": inp.selector,
            "conditions": conditions,
            "instances": instances,
            "host_copies": sorted(inp.host_copies, key=lambda h: h.pod),
            "current_plan": current_plan,
            "endpoint": inp.endpoint,
            "autoscaler": autoscaler,
            "materialization": materialization,
        }
    )
    events = transition_events(inp.previous.conditions, conditions)
    events += refused_events(inp.previous.instances, instances)
    if materialization is not None and inp.materialization is not None:
        events += job_events(before, materialization, inp.materialization)
    return StatusUpdate(status, events)


def _instances(inp: StatusInput) -> list[InstanceStatus]:
    before = {i.pod: i for i in inp.previous.instances}

    def startup(p: PodView) -> InstanceStartup | None:
        info = inp.startups.get(p.name)
        old = before.get(p.name)
        return startup_of(p, info) if info is not None else old.startup if old else None

    def materialized(p: PodView) -> InstanceMaterialization | None:
        info = inp.materializations.get(p.name)
        old = before.get(p.name)
        if info is not None:
            return instance_materialization(info)
        return old.materialization if old else None

    def device(p: PodView) -> InstanceDevice | None:
        info = inp.startups.get(p.name)
        if info is not None and (d := info.device) is not None:
            return InstanceDevice(
                kind=d.kind, name=d.name, memory_bytes=d.memory_bytes, emulated=d.emulated
            )
        old = before.get(p.name)
        return old.device if old else None

    return [
        InstanceStatus(
            pod=p.name,
            node=p.node,
            phase=instance_phase(p),
            blocks_loaded=inp.blocks.get(
                p.name, before[p.name].blocks_loaded if p.name in before else 0
            ),
            mode=InstanceMode(inp.modes[p.name]) if p.name in inp.modes else None,
            startup=startup(p),
            materialization=materialized(p),
            device=device(p),
        )
        for p in sorted(inp.pods, key=lambda p: (p.index, p.name))
    ]


def startup_of(pod: PodView, info: StartupInfo) -> InstanceStartup:
    """The worker's stages, with the scheduling wait before them and the seconds from
    pod creation to ready (the API server's clock against the worker's: one host here,
    NTP-synced hosts elsewhere)."""
    stages = {str(k): v for k, v in info.stages.items()}
    if pod.created is not None and pod.scheduled_at is not None:
        stages = {"scheduled": (pod.scheduled_at - pod.created).total_seconds(), **stages}
    ready = None
    if pod.created is not None and info.ready_at is not None:
        ready = round(info.ready_at - pod.created.timestamp(), 3)
    return InstanceStartup(
        stages=stages,
        weights_from=info.weights_from,
        weights_bytes=info.weights_bytes,
        ready_seconds=ready,
    )
