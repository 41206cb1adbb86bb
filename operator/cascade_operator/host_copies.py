"""Host-copy pods: `spec.hostCopies` of them per deployment, apart from the instances.

A host copy is the worker process in its host-copy role (`CASCADE_ROLE=host-copy`): it
holds the model's packed blocks in host memory and sends them to plans, and serves
nothing. They are not replicas: `/scale` and the autoscaler never count them, the
gateway never routes to them, and they stay at `replicas: 0`, which is what makes a
scale from zero a network transfer instead of a storage read (BlitzScale §5.3: O(1) host
copies per model, not one per instance).

Placement is the scheduler's: copies of one deployment must land on distinct nodes
(required anti-affinity on the hostname) and preferably on distinct leaf switches. The
pool (weights/pool.py) fills an empty copy from a peer, or from storage when nothing
holds the model. Names are deterministic (`<md>-host-<k>`, lowest free k first) as for
instances, so a restarted operator never makes a duplicate. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cascade_api import constants as c
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_operator.builders import component_selector, process_pod, selector_labels
from cascade_operator.config import OperatorConfig
from cascade_operator.events import EventNote
from cascade_operator.instances import free_indices
from cascade_operator.observed import MdRef, PodView
from cascade_operator.scrape import scrape_annotations

Manifest = dict[str, Any]
HOSTNAME_LABEL = "kubernetes.io/hostname"


def host_copy_name(md: str, index: int) -> str:
    return f"{md}-host-{index}"


def host_copy_selector(md: str) -> str:
    return component_selector(md, c.COMPONENT_HOST_COPY)


def host_copy_pod(
    ref: MdRef, spec: ModelDeploymentSpec, index: int, cfg: OperatorConfig
) -> Manifest:
    role = {"name": "CASCADE_ROLE", "value": "host-copy"}
    pod = process_pod(
        ref, spec, cfg, host_copy_name(ref.name, index), c.COMPONENT_HOST_COPY, [role]
    )
    pod["metadata"]["annotations"] = {
        **(pod["metadata"].get("annotations") or {}),
        f"{c.GROUP}/instance-index": str(index),
        **scrape_annotations(c.WORKER_PORT),
    }
    peers = {"labelSelector": {"matchLabels": selector_labels(ref.name, c.COMPONENT_HOST_COPY)}}
    pod["spec"]["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {**peers, "topologyKey": HOSTNAME_LABEL}
            ],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {**peers, "topologyKey": c.LABEL_LEAF}}
            ],
        }
    }
    return pod


@dataclass(frozen=True)
class HostCopyDecision:
    create: list[Manifest] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    events: list[EventNote] = field(default_factory=list)


def decide_host_copies(
    ref: MdRef, spec: ModelDeploymentSpec, pods: list[PodView], cfg: OperatorConfig
) -> HostCopyDecision:
    """Keep `spec.hostCopies` healthy host-copy pods: replace failed ones, create the
    missing (lowest free index), delete the surplus (highest index first)."""
    alive = [p for p in pods if not p.terminating]
    failed = [p for p in alive if p.failed]
    healthy = sorted((p for p in alive if not p.failed), key=lambda p: p.index)
    want = spec.host_copies
    free = free_indices(pods, max(want - len(healthy), 0))
    create = [host_copy_pod(ref, spec, i, cfg) for i in free]
    surplus = healthy[want:] if len(healthy) > want else []
    events: list[EventNote] = []
    if create:
        names = ", ".join(m["metadata"]["name"] for m in create)
        events.append(EventNote("Normal", "HostCopyCreated", f"creating host-copy pods {names}"))
    if surplus:
        names = ", ".join(p.name for p in surplus)
        events.append(EventNote("Normal", "HostCopyRemoved", f"deleting host-copy pods {names}"))
    return HostCopyDecision(create, [p.name for p in failed + surplus], events)
