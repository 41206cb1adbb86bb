"""Typed, read-only views of what the operator observes in the API.

Raw API objects are big nested dicts; the decisions need a handful of facts from each.
Each kind of object is parsed here once (a pod by `PodView.of`, whatever decides about
it), so "failed", "ready" or "placed" mean the same thing to the instance decisions,
the status and the weight-moving half.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cascade_api import constants as c
from cascade_protocol.roles import InstanceRole

Body = dict[str, Any]

# How a worker pod gets its weights (annotation START_ANNOTATION, env CASCADE_SERVE):
# STORAGE loads the checkpoint itself at start (the first instance: no copy exists; every
# instance when spec.multicast.fromPeers is false); AWAIT starts idle and unready, and
# the operator streams it weights along a ScalePlan.
START_ANNOTATION = f"{c.GROUP}/start"
START_STORAGE, START_AWAIT = "storage", "await"


@dataclass(frozen=True)
class MdRef:
    """Identity of a ModelDeployment: enough to name, own and address its objects."""

    name: str
    namespace: str
    uid: str

    @classmethod
    def of(cls, body: Body) -> MdRef:
        meta = body["metadata"]
        return cls(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"])


@dataclass(frozen=True)
class PodView:
    name: str
    index: int  # instance ordinal; names are deterministic so restarts never duplicate
    node: str | None
    phase: str  # Pending | Running | Succeeded | Failed | Unknown
    ready: bool
    terminating: bool
    crash_looping: bool = False
    unschedulable: str | None = None  # the scheduler's message when it cannot place the pod
    ip: str | None = None  # status.podIP; the worker's control and data addresses
    uid: str = ""
    created: datetime | None = None  # creationTimestamp: tells a fresh pod from a reused name
    start: str = ""  # START_STORAGE | START_AWAIT (annotation); "" when not set
    host_copy: bool = False  # a host-copy pod (component label), not an instance
    role: InstanceRole = InstanceRole.MIXED  # label LABEL_ROLE (the autoscaler sets it)
    labelled: bool = False  # the role label exists (else the role is mixed by default)
    ready_since: datetime | None = None  # Ready's lastTransitionTime while ready
    scheduled_at: datetime | None = None  # PodScheduled's lastTransitionTime once placed

    @property
    def failed(self) -> bool:
        return self.phase in ("Failed", "Succeeded") or self.crash_looping

    @property
    def running(self) -> bool:
        """Runs and has an address: its worker may be asked what it holds."""
        return (
            self.phase == "Running" and not self.terminating and not self.failed and bool(self.ip)
        )

    @property
    def starting(self) -> bool:
        """Not running yet (unscheduled, pulling, no IP), and not on its way out."""
        if self.terminating or self.failed:
            return False
        return self.phase == "Pending" or (self.phase == "Running" and not self.ip)

    @classmethod
    def of(cls, body: Body) -> PodView:
        meta, spec, status = body["metadata"], body.get("spec") or {}, body.get("status") or {}
        conds = {cond["type"]: cond for cond in status.get("conditions") or []}
        scheduled = conds.get("PodScheduled", {})
        waiting = [
            (cs.get("state") or {}).get("waiting") or {}
            for cs in status.get("containerStatuses") or []
        ]
        annotations = meta.get("annotations") or {}
        ready = conds.get("Ready", {})
        return cls(
            name=meta["name"],
            index=_index(meta["name"], annotations),
            node=spec.get("nodeName"),
            phase=status.get("phase") or "Pending",
            ready=ready.get("status") == "True",
            terminating=meta.get("deletionTimestamp") is not None,
            crash_looping=any(w.get("reason") == "CrashLoopBackOff" for w in waiting),
            unschedulable=scheduled.get("message") or "unschedulable"
            if scheduled.get("reason") == "Unschedulable"
            else None,
            ip=status.get("podIP") or None,
            uid=str(meta.get("uid") or ""),
            created=parse_time(meta.get("creationTimestamp")),
            start=str(annotations.get(START_ANNOTATION) or ""),
            host_copy=(meta.get("labels") or {}).get(c.LABEL_COMPONENT) == c.COMPONENT_HOST_COPY,
            role=InstanceRole.of_label((meta.get("labels") or {}).get(c.LABEL_ROLE)),
            labelled=c.LABEL_ROLE in (meta.get("labels") or {}),
            scheduled_at=parse_time(scheduled.get("lastTransitionTime"))
            if scheduled.get("status") == "True"
            else None,
            ready_since=parse_time(ready.get("lastTransitionTime"))
            if ready.get("status") == "True"
            else None,
        )


def _index(name: str, annotations: dict[str, str]) -> int:
    raw = annotations.get(f"{c.GROUP}/instance-index") or name.rsplit("-", 1)[-1]
    try:
        return int(raw)
    except ValueError:
        return -1


def parse_time(raw: Any) -> datetime | None:
    if isinstance(raw, datetime):
        return raw
    if not raw:
        return None
    return datetime.fromisoformat(str(raw).replace("Z", "+00:00"))


@dataclass(frozen=True)
class GatewayView:
    deployment_exists: bool = False
    service_exists: bool = False
    available_replicas: int = 0

    @classmethod
    def of(cls, deployment: Body | None, service: Body | None) -> GatewayView:
        status = (deployment or {}).get("status") or {}
        return cls(
            deployment_exists=deployment is not None,
            service_exists=service is not None,
            available_replicas=int(status.get("availableReplicas") or 0),
        )


@dataclass(frozen=True)
class Observed:
    """Everything the instance decisions look at, gathered before deciding."""

    ref: MdRef
    generation: int
    status: Body  # the stored status, as the API returned it
    pods: list[PodView] = field(default_factory=list)
    gateway: GatewayView = field(default_factory=GatewayView)
    # Requests in flight per worker pod, from the gateway (read only when scaling down).
    in_flight: Mapping[str, int] = field(default_factory=dict)

    @property
    def spec_changed(self) -> bool:
        """The spec moved since the status was last written for it."""
        return (self.status or {}).get("observedGeneration") != self.generation
