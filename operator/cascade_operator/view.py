"""Typed, read-only views of what the operator observes in the API.

Raw API objects are big nested dicts; the decision logic needs a handful of facts
from each. Parsing them here keeps `reconcile` readable and testable with tiny inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cascade_api import constants as c

Body = dict[str, Any]


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
    blocks_loaded: int = 0

    @property
    def failed(self) -> bool:
        return self.phase in ("Failed", "Succeeded") or self.crash_looping

    @classmethod
    def of(cls, body: Body) -> PodView:
        meta, spec, status = body["metadata"], body.get("spec", {}), body.get("status") or {}
        conds = {cond["type"]: cond for cond in status.get("conditions") or []}
        scheduled = conds.get("PodScheduled", {})
        waiting = [
            (cs.get("state") or {}).get("waiting") or {}
            for cs in status.get("containerStatuses") or []
        ]
        annotations = meta.get("annotations") or {}
        return cls(
            name=meta["name"],
            index=_index(meta["name"], annotations),
            node=spec.get("nodeName"),
            phase=status.get("phase") or "Pending",
            ready=conds.get("Ready", {}).get("status") == "True",
            terminating=meta.get("deletionTimestamp") is not None,
            crash_looping=any(w.get("reason") == "CrashLoopBackOff" for w in waiting),
            unschedulable=scheduled.get("message") or "unschedulable"
            if scheduled.get("reason") == "Unschedulable"
            else None,
            blocks_loaded=int(annotations.get(f"{c.GROUP}/blocks-loaded", "0") or 0),
        )


def _index(name: str, annotations: dict[str, str]) -> int:
    raw = annotations.get(f"{c.GROUP}/instance-index") or name.rsplit("-", 1)[-1]
    try:
        return int(raw)
    except ValueError:
        return -1


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
    """Everything one reconcile looks at, gathered by the handler before deciding."""

    ref: MdRef
    generation: int
    spec: Body
    status: Body
    pods: list[PodView] = field(default_factory=list)
    gateway: GatewayView = field(default_factory=GatewayView)
    # Pods that hold a host copy of the weights (pool.PoolDecision.protected()):
    # scale-down gives them up last.
    protected: frozenset[str] = frozenset()
