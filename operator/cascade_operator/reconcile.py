"""The operator's decision: from one observation of a ModelDeployment to the actions
that converge it (pods to create and delete, gateway objects to ensure, the new status,
events worth telling the user). Pure: no API calls, `now` passed in.

Pod names are deterministic (`<md>-<index>`, lowest free index first), so an operator
killed between a create and its status patch re-derives the same actions after a
restart and a repeated create is a harmless AlreadyExists: never a duplicate pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from cascade_api.invariants import Violation, violations
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_operator import builders
from cascade_operator.conditions import compute_status
from cascade_operator.config import OperatorConfig
from cascade_operator.view import Observed, PodView

Manifest = dict[str, Any]


@dataclass(frozen=True)
class EventNote:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class Decision:
    create_pods: list[Manifest] = field(default_factory=list)
    delete_pods: list[str] = field(default_factory=list)
    # Gateway objects to create or update (empty when they exist and the spec is unchanged).
    gateway: list[Manifest] = field(default_factory=list)
    status: Manifest = field(default_factory=dict)
    events: list[EventNote] = field(default_factory=list)


def parse_spec(raw: Manifest) -> tuple[ModelDeploymentSpec | None, list[Violation]]:
    """The typed spec, or None with violations that name the offending fields."""
    try:
        spec = ModelDeploymentSpec.model_validate(raw)
    except ValidationError as err:
        found = []
        for e in err.errors():
            path = ".".join(["spec", *(to_camel(str(p)) for p in e["loc"])])
            found.append(Violation(path, f"{path}: {e['msg']}"))
        return None, found
    return spec, violations(spec)


def free_indices(pods: list[PodView], count: int) -> list[int]:
    """The `count` lowest ordinals no existing pod (even a terminating one) uses."""
    used = {p.index for p in pods}
    out: list[int] = []
    i = 0
    while len(out) < count:
        if i not in used:
            out.append(i)
        i += 1
    return out


def scale_down_victims(
    pods: list[PodView], count: int, protected: frozenset[str] = frozenset()
) -> list[PodView]:
    """Give up the least useful instances first: unplaced, then loading, then serving,
    host-copy holders last; the highest ordinal first within each group."""
    ranked = sorted(
        pods, key=lambda p: (p.name in protected, p.node is not None, p.ready, -p.index)
    )
    return ranked[:count]


def start_modes(healthy: list[PodView], count: int) -> list[str]:
    """How each of `count` new pods gets its weights: when no healthy pod exists (nothing
    can hold the model), the first loads it from storage; every other new pod awaits a
    ScalePlan that streams the weights from a holder."""
    first = builders.START_AWAIT if healthy else builders.START_STORAGE
    return [first, *[builders.START_AWAIT] * (count - 1)][:count]


def decide(obs: Observed, cfg: OperatorConfig, now: datetime) -> Decision:
    spec, problems = parse_spec(obs.spec)
    accepted = spec if not problems else None
    create: list[Manifest] = []
    delete: list[str] = []
    gateway: list[Manifest] = []
    events: list[EventNote] = []
    if accepted is not None:
        alive = [p for p in obs.pods if not p.terminating]
        failed = [p for p in alive if p.failed]
        healthy = [p for p in alive if not p.failed]
        delete = [p.name for p in failed]
        missing = accepted.replicas - len(healthy)
        if missing > 0:
            indices = free_indices(obs.pods, missing)
            modes = start_modes(healthy, missing)
            create = [
                builders.worker_pod(obs.ref, accepted, i, cfg, start)
                for i, start in zip(indices, modes, strict=True)
            ]
        elif missing < 0:
            victims = scale_down_victims(healthy, -missing, obs.protected)
            delete += [p.name for p in victims]
        spec_changed = (obs.status or {}).get("observedGeneration") != obs.generation
        if spec_changed or not obs.gateway.deployment_exists:
            gateway += builders.gateway_access(obs.ref)
            gateway.append(builders.gateway_deployment(obs.ref, accepted, cfg))
        if spec_changed or not obs.gateway.service_exists:
            gateway.append(builders.gateway_service(obs.ref))
        events += _scale_events(create, delete, failed)
    status = compute_status(
        obs,
        accepted,
        problems,
        builders.worker_selector(obs.ref.name),
        builders.gateway_endpoint(obs.ref),
        now,
    )
    events += _transition_events(obs.status or {}, status.to_api())
    return Decision(create, delete, gateway, status.to_api(), events)


def _scale_events(
    create: list[Manifest], delete: list[str], failed: list[PodView]
) -> list[EventNote]:
    out = []
    if create:
        names = ", ".join(m["metadata"]["name"] for m in create)
        out.append(EventNote("Normal", "ScalingUp", f"creating worker pods {names}"))
    if failed:
        names = ", ".join(p.name for p in failed)
        out.append(EventNote("Warning", "ReplacingInstances", f"replacing failed pods {names}"))
    healthy_deletes = [n for n in delete if n not in {p.name for p in failed}]
    if healthy_deletes:
        out.append(
            EventNote("Normal", "ScalingDown", "deleting worker pods " + ", ".join(healthy_deletes))
        )
    return out


def _transition_events(old: Manifest, new: Manifest) -> list[EventNote]:
    """One event per condition whose status or reason changed; Warning for bad news:
    availability lost, degradation, an instance that cannot be placed."""
    before = {c["type"]: c for c in old.get("conditions") or []}
    out = []
    for cond in new.get("conditions") or []:
        prev = before.get(cond["type"])
        if prev and (prev.get("status"), prev.get("reason")) == (cond["status"], cond["reason"]):
            continue
        lost = cond["type"] == "Available" and prev is not None and prev.get("status") == "True"
        bad = (
            (lost and cond["status"] == "False")
            or (cond["type"] == "Degraded" and cond["status"] == "True")
            or cond["reason"] == "Unschedulable"
        )
        message = f"{cond['type']}={cond['status']}: {cond['message']}"
        out.append(EventNote("Warning" if bad else "Normal", cond["reason"], message))
    return out
