"""`cascade top`'s snapshot: what one frame shows, built from the objects the API returns.

Pure (dicts and `now` in, frozen dataclasses out) so the renderer and the tests need no
cluster; `top_fetch` does the reading. A malformed object becomes a row with its error
instead of stopping the whole view: a live view must keep drawing through the odd
half-written status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from cascade_api import constants as c
from cascade_api.modeldeployment import InstanceMode, ModelDeploymentSpec, ModelDeploymentStatus
from cascade_api.scaleplan import PlanPhase, ScalePlanSpec, ScalePlanStatus
from cascade_api.scaling import AutoscalerOwner
from cascade_protocol.gateway_load import GatewayLoad
from cascade_protocol.roles import InstanceRole

IN_FLIGHT = (PlanPhase.PENDING, PlanPhase.RUNNING)
MODES = (*(m.value for m in InstanceMode), "unknown")  # display order
ROLES = tuple(r.value for r in InstanceRole)
CLASSES = ("interactive", "batch")

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class ClassView:
    """One request class at the gateway (sums over gateway pods; latencies the worst)."""

    queued: int = 0
    in_flight: int = 0
    ttft_p50_s: float | None = None
    ttft_p99_s: float | None = None


@dataclass(frozen=True)
class GatewayView:
    classes: dict[str, ClassView] = field(default_factory=dict)
    backends_ready: int = 0
    backends_total: int = 0
    error: str = ""  # "" when at least one gateway pod answered


@dataclass(frozen=True)
class DeploymentView:
    namespace: str
    name: str
    spec_replicas: int = 0
    ready: int = 0
    loading: int = 0
    roles: dict[str, tuple[int, int]] = field(default_factory=dict)  # role -> (ready, pods)
    modes: dict[str, int] = field(default_factory=dict)  # serving mode -> instances
    autoscaler: str = ""  # who owns spec.replicas and its last reason, one phrase
    gateway: GatewayView = field(default_factory=GatewayView)
    error: str = ""


@dataclass(frozen=True)
class TargetView:
    pod: str
    bytes_received: int
    bytes_total: int
    blocks_received: int
    blocks_total: int
    complete: bool
    predicted_s: float | None
    measured_s: float | None

    @property
    def fraction(self) -> float:
        """Share received: by bytes where the plan knows them, else by blocks."""
        if self.complete:
            return 1.0
        if self.bytes_total:
            return min(1.0, self.bytes_received / self.bytes_total)
        return min(1.0, self.blocks_received / self.blocks_total) if self.blocks_total else 0.0


@dataclass(frozen=True)
class PlanView:
    namespace: str
    name: str
    deployment: str
    phase: str
    strategy: str
    targets: list[TargetView]
    elapsed_s: float | None  # since dispatch (to the end once over)
    predicted_s: float | None
    measured_s: float | None
    created: str = ""  # creationTimestamp: RFC 3339 strings sort by time
    error: str = ""

    @property
    def in_flight(self) -> bool:
        return self.phase in IN_FLIGHT


@dataclass(frozen=True)
class Snapshot:
    taken_at: datetime
    scope: str  # a namespace, or "" for all of them
    deployments: list[DeploymentView] = field(default_factory=list)
    plans: list[PlanView] = field(default_factory=list)  # oldest first
    error: str = ""  # the last read failed: the data shown is from before


def build_snapshot(
    scope: str,
    now: datetime,
    mds: Iterable[Obj],
    pods: Iterable[Obj],
    plans: Iterable[Obj],
    loads: Mapping[tuple[str, str], Sequence[GatewayLoad | str]],
) -> Snapshot:
    """One frame's data. `loads` maps (namespace, deployment) to each gateway pod's
    report, or the error text of a pod that did not answer."""
    workers: dict[tuple[str, str], list[Obj]] = {}
    for pod in pods:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        if labels.get(c.LABEL_COMPONENT) == c.COMPONENT_WORKER and not meta.get(
            "deletionTimestamp"
        ):
            key = (meta.get("namespace", ""), labels.get(c.LABEL_DEPLOYMENT, ""))
            workers.setdefault(key, []).append(pod)
    views = [deployment_view(md, workers, loads) for md in mds]
    views.sort(key=lambda d: (d.namespace, d.name))
    plan_views = [plan_view(p, now) for p in plans]
    plan_views.sort(key=lambda p: (p.created, p.namespace, p.name))
    return Snapshot(taken_at=now, scope=scope, deployments=views, plans=plan_views)


def deployment_view(
    md: Obj,
    workers: Mapping[tuple[str, str], Sequence[Obj]],
    loads: Mapping[tuple[str, str], Sequence[GatewayLoad | str]],
) -> DeploymentView:
    meta = md.get("metadata") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "?")
    try:
        spec = ModelDeploymentSpec.model_validate(md.get("spec") or {})
        status = ModelDeploymentStatus.model_validate(md.get("status") or {})
    except ValidationError as err:
        return DeploymentView(ns, name, error=f"unreadable: {_first_error(err)}")
    phase = {i.pod: i.phase for i in status.instances}
    roles: dict[str, list[int]] = {}
    for pod in workers.get((ns, name), ()):
        pmeta = pod.get("metadata") or {}
        role = InstanceRole.of_label((pmeta.get("labels") or {}).get(c.LABEL_ROLE)).value
        known = phase.get(pmeta.get("name", ""))
        ready = known == "Ready" if known is not None else pod_ready(pod)
        counts = roles.setdefault(role, [0, 0])
        counts[0] += int(ready)
        counts[1] += 1
    modes: dict[str, int] = {}
    for inst in status.instances:
        mode = str(inst.mode) if inst.mode is not None else "unknown"
        modes[mode] = modes.get(mode, 0) + 1
    return DeploymentView(
        namespace=ns,
        name=name,
        spec_replicas=spec.replicas,
        ready=status.ready_replicas,
        loading=status.loading_replicas,
        roles={r: (v[0], v[1]) for r, v in roles.items()},
        modes=modes,
        autoscaler=autoscaler_phrase(status),
        gateway=gateway_view(loads.get((ns, name), ())),
    )


def autoscaler_phrase(status: ModelDeploymentStatus) -> str:
    """'InteractiveBackpressure -> 3'; 'external' when someone else scales (the
    operator's reason then is always the same sentence saying so)."""
    a = status.autoscaler
    if a is None:
        return ""
    if a.owner == AutoscalerOwner.EXTERNAL:
        return "external (kubectl scale, HPA, KEDA)"
    desired = f" -> {a.desired_replicas}" if a.desired_replicas is not None else ""
    return f"{a.reason or '-'}{desired}"


def gateway_view(reports: Sequence[GatewayLoad | str]) -> GatewayView:
    """Several gateway pods add up: queues and backends sum, latencies take the worst."""
    loads = [r for r in reports if isinstance(r, GatewayLoad)]
    errors = [r for r in reports if isinstance(r, str)]
    if not loads:
        return GatewayView(error=errors[0] if errors else "no gateway pod")
    classes: dict[str, ClassView] = {}
    for load in loads:
        for cls, cl in load.classes.items():
            was = classes.get(cls, ClassView())
            classes[cls] = ClassView(
                queued=was.queued + cl.queued,
                in_flight=was.in_flight + cl.in_flight,
                ttft_p50_s=_worst(was.ttft_p50_s, cl.ttft_p50_s),
                ttft_p99_s=_worst(was.ttft_p99_s, cl.ttft_p99_s),
            )
    return GatewayView(
        classes=classes,
        backends_ready=max(x.backends_ready for x in loads),
        backends_total=max(x.backends_total for x in loads),
    )


def plan_view(body: Obj, now: datetime) -> PlanView:
    meta = body.get("metadata") or {}
    ns, name = meta.get("namespace", ""), meta.get("name", "?")
    created = str(meta.get("creationTimestamp") or "")
    try:
        spec = ScalePlanSpec.model_validate(body.get("spec") or {})
        status = ScalePlanStatus.model_validate(body.get("status") or {})
    except ValidationError as err:
        phase = str((body.get("status") or {}).get("phase") or PlanPhase.PENDING)
        return PlanView(ns, name, "?", phase, "?", [], None, None, None, created,
                        error=f"unreadable: {_first_error(err)}")  # fmt: skip
    total_bytes = sum(b.bytes for b in spec.blocks)
    predicted = {p.pod: p.complete_seconds for p in spec.predictions}
    got = {t.pod: t for t in status.targets}
    targets = []
    for pod in spec.targets:
        t = got.get(pod)
        targets.append(
            TargetView(
                pod=pod,
                bytes_received=t.bytes_received if t else 0,
                bytes_total=total_bytes,
                blocks_received=t.blocks_received if t else 0,
                blocks_total=len(spec.blocks),
                complete=bool(t and t.complete),
                predicted_s=predicted.get(pod),
                measured_s=t.transfer_seconds if t else None,
            )
        )
    elapsed = None
    if status.start_time is not None:
        elapsed = max(0.0, ((status.completion_time or now) - status.start_time).total_seconds())
    return PlanView(
        namespace=ns,
        name=name,
        deployment=spec.deployment,
        phase=str(status.phase),
        strategy=str(spec.strategy),
        targets=targets,
        elapsed_s=elapsed,
        predicted_s=spec.predicted_completion_seconds,
        measured_s=status.measured_completion_seconds,
        created=created,
    )


def pod_ready(pod: Obj) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return any(x.get("type") == "Ready" and x.get("status") == "True" for x in conds)


def _worst(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def _first_error(err: ValidationError) -> str:
    first = err.errors()[0]
    return f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}"
