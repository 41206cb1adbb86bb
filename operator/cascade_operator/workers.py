"""A worker as the weight-moving decisions see it: its pod plus its GET /v1/status.

The pool (pool.py) and the ScalePlan lifecycle (scaleplans.py) need a few facts per
worker: is the pod alive and where, what it holds (model digest, blocks), what it is
doing (loading, transferring, serving) and whether it keeps a host copy. The pod comes
from the API server, the rest from the worker's control API; the I/O layer fetches
both, `WorkerView.of` turns them into this view. A worker whose status could not be
read (`status=None`) is alive for Kubernetes but neither a source nor a target.

The host-copy flag is a pod annotation the operator writes (`cascade.dev/host-copy`),
so which pods keep host copies is rebuilt from the API after an operator restart.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from cascade_api import constants as c

Body = dict[str, Any]

HOST_COPY_ANNOTATION = f"{c.GROUP}/host-copy"

# GET /v1/status `phase` values (cascade_worker.control_state.Phase).
IDLE, LOADING, TRANSFERRING, READY, FAILED = "idle", "loading", "transferring", "ready", "failed"
# GET /v1/status `engine` values that mean an engine runs or is coming up.
ENGINE_ON = frozenset({"starting", "serving"})


@dataclass(frozen=True)
class WorkerView:
    name: str
    node: str | None  # spec.nodeName; None while unscheduled
    ip: str | None  # status.podIP; control and data addresses derive from it
    created: datetime | None  # creationTimestamp: tells a fresh pod from a reused name
    alive: bool  # running, not terminating, not failed: may take part in a plan
    host_copy: bool = False  # designated to keep a host copy (annotation)
    # Not running yet (unscheduled, pulling, no IP): soon a target, so planning may wait.
    starting: bool = False
    # From GET /v1/status; phase None when it could not be read.
    phase: str | None = None
    engine: str = "off"
    model_digest: str | None = None
    blocks_loaded: int = 0
    blocks_total: int = 0
    bytes_received: int = 0
    # The last transfer's report: complete flag and the blocks it still missed.
    transfer_complete: bool | None = None
    missing: tuple[int, ...] = ()
    # Seconds from the last transfer's common start until this pod, as a target, held
    # every block (the worker's own clock): the measured side of a plan's prediction.
    transfer_s: float | None = None
    error: str | None = None

    @property
    def has_model(self) -> bool:
        """Holds every block of its model, whatever it is doing (a copy that exists)."""
        return (
            self.alive
            and self.phase not in (None, FAILED)
            and self.blocks_total > 0
            and self.blocks_loaded >= self.blocks_total
        )

    @property
    def complete(self) -> bool:
        """Holds every block and runs no job: a source a new plan may use now."""
        return self.has_model and self.phase == READY

    @property
    def serving(self) -> bool:
        return self.engine in ENGINE_ON

    @property
    def needs_weights(self) -> bool:
        """Holds no complete model and does nothing about it: a plan's target."""
        return self.alive and self.phase in (IDLE, FAILED) and not self.serving

    @property
    def busy(self) -> bool:
        """Running a job (packing or a transfer); a new job would get a 409."""
        return self.phase in (LOADING, TRANSFERRING)

    def holds(self, digest: str | None) -> bool:
        return self.has_model and self.model_digest == digest

    def control_address(self) -> str:
        return f"{self.ip}:{c.WORKER_PORT}"

    def data_address(self) -> str:
        return f"{self.ip}:{c.DATA_PORT}"

    @classmethod
    def of(cls, pod: Body, status: Body | None) -> WorkerView:
        """A pod object (as the API returns it) and its worker's status JSON (or None)."""
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        pod_status = pod.get("status") or {}
        annotations = meta.get("annotations") or {}
        waiting = [
            ((cs.get("state") or {}).get("waiting") or {}).get("reason")
            for cs in pod_status.get("containerStatuses") or []
        ]
        deleting = meta.get("deletionTimestamp") is not None
        alive = (
            not deleting
            and pod_status.get("phase") == "Running"
            and "CrashLoopBackOff" not in waiting
        )
        pending = pod_status.get("phase") in (None, "Pending")
        view = cls(
            name=meta["name"],
            node=spec.get("nodeName"),
            ip=pod_status.get("podIP"),
            created=parse_time(meta.get("creationTimestamp")),
            alive=alive and bool(pod_status.get("podIP")),
            host_copy=annotations.get(HOST_COPY_ANNOTATION) == "true",
            starting=not deleting and (pending or (alive and not pod_status.get("podIP"))),
        )
        return view.with_status(status) if status is not None else view

    def with_status(self, status: Body) -> WorkerView:
        """This view with the worker's GET /v1/status JSON folded in."""
        last = status.get("last_transfer") or {}
        return replace(
            self,
            phase=str(status.get("phase") or IDLE),
            engine=str(status.get("engine") or "off"),
            model_digest=status.get("model_digest"),
            blocks_loaded=int(status.get("blocks_loaded") or 0),
            blocks_total=int(status.get("blocks_total") or 0),
            bytes_received=int(status.get("bytes_received") or 0),
            transfer_complete=last.get("complete") if last else None,
            missing=tuple(int(b) for b in last.get("missing") or ()),
            transfer_s=_target_seconds(last),
            error=status.get("error"),
        )


def _target_seconds(last: Body) -> float | None:
    seconds = last.get("complete_s")
    if last.get("role") != "target" or not last.get("complete") or seconds is None:
        return None
    return float(seconds)


def parse_time(raw: Any) -> datetime | None:
    if isinstance(raw, datetime):
        return raw
    if not raw:
        return None
    return datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
