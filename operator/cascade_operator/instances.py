"""Which worker pods and gateway objects a ModelDeployment needs: from one observation
to the pods to create and delete and the gateway objects to ensure, with an event for
each kind of change. Pure: no API calls. The status is assembled elsewhere (status.py).

Pod names are deterministic (`<md>-<index>`, lowest free index first), so an operator
killed between a create and its status patch re-derives the same actions after a
restart and a repeated create is a harmless AlreadyExists: never a duplicate pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_operator import builders
from cascade_operator.config import OperatorConfig
from cascade_operator.events import EventNote
from cascade_operator.observed import START_AWAIT, START_STORAGE, Observed, PodView

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Decision:
    create_pods: list[Manifest] = field(default_factory=list)
    delete_pods: list[str] = field(default_factory=list)
    # Gateway objects to create or update (empty when they exist and the spec is unchanged).
    gateway: list[Manifest] = field(default_factory=list)
    events: list[EventNote] = field(default_factory=list)


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
    pods: list[PodView], count: int, in_flight: Mapping[str, int] | None = None
) -> list[PodView]:
    """Give up the least useful instances first: unplaced, then loading, then serving
    (the fewest requests in flight first, so the fewest streams must finish or move);
    the highest ordinal first among equals. Host copies are pods of their own."""
    load = in_flight or {}
    ranked = sorted(
        pods,
        key=lambda p: (
            p.node is not None,
            p.ready,
            load.get(p.name, 0),
            -p.index,
        ),
    )
    return ranked[:count]


def start_modes(healthy: bool, count: int, from_peers: bool = True) -> list[str]:
    """How each of `count` new pods gets its weights: when no healthy instance or host
    copy exists (`healthy` false: nothing can hold the model), the first loads it from
    storage; every other new pod awaits a ScalePlan that streams the weights from a
    holder. Without `from_peers` (spec.multicast.fromPeers false) every new pod loads
    from storage, as the first does, and none awaits a plan."""
    if not from_peers:
        return [START_STORAGE] * count
    first = START_AWAIT if healthy else START_STORAGE
    return [first, *[START_AWAIT] * (count - 1)][:count]


def decide(
    obs: Observed, spec: ModelDeploymentSpec | None, cfg: OperatorConfig, has_copy: bool = False
) -> Decision:
    """What to change for the accepted `spec`; nothing at all while the spec is invalid
    (None): the pods of the last accepted spec keep running. `has_copy`: a host-copy pod
    lives (new instances await its weights instead of reading storage)."""
    if spec is None:
        return Decision()
    alive = [p for p in obs.pods if not p.terminating]
    failed = [p for p in alive if p.failed]
    healthy = [p for p in alive if not p.failed]
    create: list[Manifest] = []
    delete = [p.name for p in failed]
    missing = spec.replicas - len(healthy)
    if missing > 0:
        indices = free_indices(obs.pods, missing)
        modes = start_modes(bool(healthy) or has_copy, missing, spec.multicast.from_peers)
        create = [
            builders.worker_pod(obs.ref, spec, i, cfg, start)
            for i, start in zip(indices, modes, strict=True)
        ]
    elif missing < 0:
        victims = scale_down_victims(healthy, -missing, obs.in_flight)
        delete += [p.name for p in victims]
    gateway: list[Manifest] = []
    if obs.spec_changed or not obs.gateway.deployment_exists:
        gateway += builders.gateway_access(obs.ref)
        gateway.append(builders.gateway_deployment(obs.ref, spec, cfg))
    if obs.spec_changed or not obs.gateway.service_exists:
        gateway.append(builders.gateway_service(obs.ref))
    return Decision(create, delete, gateway, _scale_events(create, delete, failed))


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
