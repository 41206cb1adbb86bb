"""Pod status from the agent's view of its containers (pure).

The pod worker turns process facts (pid, start time, exit code, probe results) into
ContainerViews; this module turns those into the pod's status as kubelet would report
it: phase (kubelet's getPhase rules), the four standard conditions with stable
lastTransitionTime, container statuses. `changed` compares with what the API holds so
the worker patches only when something moved. States carry explicit nulls for the
variants that do not apply, because a strategic merge patch would otherwise keep a stale
`running` next to a new `terminated`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .timeutil import rfc3339

CONTAINER_CREATING = "ContainerCreating"
POD_INITIALIZING = "PodInitializing"


@dataclass(frozen=True)
class Terminated:
    """A finished run of a container."""

    exit_code: int
    finished_at: datetime
    started_at: datetime | None = None
    container_id: str | None = None
    reason: str | None = None  # default: Completed for 0, Error otherwise
    message: str | None = None


@dataclass(frozen=True)
class ContainerView:
    """What the API should say about one container. State: running if `running_since`,
    else terminated if `terminated`, else waiting(reason, message)."""

    name: str
    image: str
    image_id: str = ""
    container_id: str | None = None
    running_since: datetime | None = None
    terminated: Terminated | None = None
    waiting_reason: str = CONTAINER_CREATING
    waiting_message: str | None = None
    last_terminated: Terminated | None = None
    restart_count: int = 0
    ready: bool = False
    started: bool = False

    @property
    def state(self) -> str:
        if self.running_since is not None:
            return "running"
        return "terminated" if self.terminated is not None else "waiting"

    @property
    def succeeded(self) -> bool:
        return self.terminated is not None and self.terminated.exit_code == 0


def _terminated(t: Terminated) -> dict[str, Any]:
    return {
        "exitCode": t.exit_code,
        "reason": t.reason or ("Completed" if t.exit_code == 0 else "Error"),
        "message": t.message,
        "startedAt": rfc3339(t.started_at) if t.started_at is not None else None,
        "finishedAt": rfc3339(t.finished_at),
        "containerID": t.container_id,
    }


def container_status(v: ContainerView) -> dict[str, Any]:
    state: dict[str, Any] = {"running": None, "terminated": None, "waiting": None}
    if v.running_since is not None:
        state["running"] = {"startedAt": rfc3339(v.running_since)}
    elif v.terminated is not None:
        state["terminated"] = _terminated(v.terminated)
    else:
        state["waiting"] = {"reason": v.waiting_reason, "message": v.waiting_message}
    last = {"terminated": _terminated(v.last_terminated)} if v.last_terminated else {}
    return {
        "name": v.name,
        "image": v.image,
        "imageID": v.image_id,
        "containerID": v.container_id,
        "ready": v.ready,
        "started": v.started,
        "restartCount": v.restart_count,
        "state": state,
        "lastState": last,
    }


def pod_phase(policy: str, init: Sequence[ContainerView], app: Sequence[ContainerView]) -> str:
    """Kubelet's getPhase: init containers gate Pending; then count app container states
    (a waiting container that ran before counts as stopped)."""
    for v in init:
        if v.succeeded:
            continue
        if v.terminated is not None and policy == "Never":
            return "Failed"
        return "Pending"
    running = waiting = stopped = succeeded = 0
    for v in app:
        if v.state == "running":
            running += 1
        elif v.terminated is not None:
            stopped += 1
            succeeded += v.terminated.exit_code == 0
        elif v.last_terminated is not None:
            stopped += 1
            succeeded += v.last_terminated.exit_code == 0
        else:
            waiting += 1
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if stopped:
        if policy == "Always":
            return "Running"
        if stopped == succeeded:
            return "Succeeded"
        return "Failed" if policy == "Never" else "Running"
    return "Pending"


def _cond(
    ctype: str, ok: bool, reason: str | None = None, message: str | None = None
) -> dict[str, Any]:
    # reason/message always present (null clears a stale one under strategic merge)
    return {
        "type": ctype,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
    }


def pod_conditions(
    pod: Mapping[str, Any],
    phase: str,
    init: Sequence[ContainerView],
    app: Sequence[ContainerView],
    now: datetime,
) -> list[dict[str, Any]]:
    prev = {str(c.get("type")): c for c in ((pod.get("status") or {}).get("conditions") or [])}
    done = phase in ("Succeeded", "Failed")
    incomplete = [v.name for v in init if not v.succeeded]
    unready = [v.name for v in app if not v.ready]
    gates = [
        str(g.get("conditionType")) for g in (pod.get("spec") or {}).get("readinessGates") or []
    ]
    gates_open = [g for g in gates if (prev.get(g) or {}).get("status") != "True"]
    if done:
        initialized = _cond("Initialized", True, "PodCompleted" if incomplete else None)
        containers_ready = _cond("ContainersReady", False, "PodCompleted")
        ready = _cond("Ready", False, "PodCompleted")
    else:
        initialized = _cond(
            "Initialized",
            not incomplete,
            "ContainersNotInitialized" if incomplete else None,
            f"containers with incomplete status: [{' '.join(incomplete)}]" if incomplete else None,
        )
        msg = f"containers with unready status: [{' '.join(unready)}]" if unready else None
        containers_ready = _cond(
            "ContainersReady", not unready, "ContainersNotReady" if unready else None, msg
        )
        if unready:
            ready = _cond("Ready", False, "ContainersNotReady", msg)
        elif gates_open:
            ready = _cond(
                "Ready",
                False,
                "ReadinessGatesNotReady",
                f"corresponding condition of pod readiness gate {gates_open[0]!r} does not exist.",
            )
        else:
            ready = _cond("Ready", True)
    out = [initialized, ready, containers_ready, _cond("PodScheduled", True)]
    for c in out:
        old = prev.get(c["type"])
        same = (
            old is not None and old.get("status") == c["status"] and old.get("lastTransitionTime")
        )
        c["lastProbeTime"] = None
        c["lastTransitionTime"] = old["lastTransitionTime"] if same and old else rfc3339(now)
    return out


def compute_status(
    pod: Mapping[str, Any],
    init: Sequence[ContainerView],
    app: Sequence[ContainerView],
    *,
    pod_ip: str | None,
    host_ip: str,
    now: datetime,
    start_time: datetime,
) -> dict[str, Any]:
    """The status subset the agent owns, ready to send as a strategic merge patch."""
    policy = str((pod.get("spec") or {}).get("restartPolicy") or "Always")
    phase = pod_phase(policy, init, app)
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": pod_conditions(pod, phase, init, app, now),
        "hostIP": host_ip,
        "startTime": rfc3339(start_time),
        "containerStatuses": [container_status(v) for v in app],
    }
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    if init:
        status["initContainerStatuses"] = [container_status(v) for v in init]
    return status


def _norm(x: Any) -> Any:
    """Drop nulls and empty maps so desired and stored status compare equal."""
    if isinstance(x, Mapping):
        out = {k: _norm(v) for k, v in x.items() if v is not None}
        return {k: v for k, v in out.items() if v != {}}
    if isinstance(x, list):
        return [_norm(v) for v in x]
    return x


def changed(desired: Mapping[str, Any], current: Mapping[str, Any] | None) -> bool:
    """Whether patching `desired` would change the stored status `current`."""
    cur = dict(current or {})
    for key, want in desired.items():
        have = cur.get(key)
        if key == "conditions":
            have_by = {c.get("type"): _norm(c) for c in have or []}
            for c in want:
                h = have_by.get(c["type"]) or {}
                if any(h.get(k) != v for k, v in _norm(c).items()):
                    return True
        elif _norm(want) != _norm(have):
            return True
    return False
