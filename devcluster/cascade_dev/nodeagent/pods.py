"""The pod worker: one pod's lifecycle on its simulated node, as a resumable state machine.

`sync(pod)` runs from the work queue whenever the pod changed, a process exited, a
probe flipped, or a timer it asked for (back-off, grace deadline) came due; it never
sleeps. Each call drains process/probe notifications, makes sure the sandbox exists
(fabric address, volumes), advances the containers (init containers in order to
completion, then the app containers, restarts with back-off) and patches the status if
it moved. Deleted or vanished pods go to `teardown`. A worker created where a previous
agent left checkpoints re-adopts the live processes instead of starting them again.
"""

from __future__ import annotations

import functools
import logging
import signal
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cascade_dev.fabric import Fabric, PodNet

from . import lifecycle, runner
from .containers import Run
from .events import EventRecorder
from .kube import TRANSIENT, Kube
from .podstart import HostEnv, start_container
from .podstatus import CONTAINER_CREATING, POD_INITIALIZING, changed, compute_status
from .procwatch import ExitWatcher
from .runner import read_record
from .sandbox import ensure_sandbox
from .teardown import terminate
from .timeutil import now, parse_time
from .workqueue import WorkQueue

log = logging.getLogger(__name__)

RETRY_S = 5.0
RECORD = ".run.json"
TERMINAL = ("Succeeded", "Failed")


@dataclass
class AgentContext:
    """What every pod worker shares."""

    kube: Kube
    fabric: Fabric
    events: EventRecorder
    exits: ExitWatcher
    queue: WorkQueue
    pods_dir: Path
    logs_dir: Path
    host: HostEnv


class PodWorker:
    def __init__(self, uid: str, node: str, ctx: AgentContext, pod: dict[str, Any] | None) -> None:
        self.uid, self.node, self.ctx = uid, node, ctx
        self.pod: dict[str, Any] = pod or {}
        self.dir = ctx.pods_dir / uid
        self.net: PodNet | None = None
        self.pod_ip: str | None = None
        self.volumes: dict[str, Path] | None = None
        self.runs: dict[str, Run] = {}
        status = self.pod.get("status") or {}
        self.start_time = parse_time(status.get("startTime")) or now()
        self.last_status: dict[str, Any] | None = None
        self.terminal = status.get("phase") in TERMINAL
        self.term_deadline: float | None = None
        self.finished = False
        self.mount_msg = ""  # last FailedMount message, to report each problem once
        self._lock = threading.Lock()
        self._exits: list[tuple[str, int, int | None]] = []
        self._fatal: list[tuple[str, str]] = []
        self._load_runs()

    # -- helpers used by podstart/teardown and other threads ------------------------------

    def on_exit(self, name: str, pid: int, code: int | None) -> None:
        """Process-exit callback (exit-watcher thread)."""
        with self._lock:
            self._exits.append((name, pid, code))
        self.ctx.queue.add(self.uid)

    def on_fatal(self, name: str, kind: str, message: str) -> None:
        """Liveness/startup probe gave up (probe thread)."""
        with self._lock:
            self._fatal.append((name, kind))
        self.ctx.queue.add(self.uid)

    def event(
        self, reason: str, message: str, run: Run | None = None, warning: bool = False
    ) -> None:
        if self.pod:
            path = run.field_path if run else None
            self.ctx.events.emit(
                self.pod, self.node, reason, message, warning=warning, field_path=path
            )

    def record_path(self, run: Run) -> Path:
        return self.dir / f"{run.name}{RECORD}"

    def host_ip(self) -> str:
        return str(self.ctx.fabric.node_ip(self.node)) if self.node else ""

    def detach(self) -> None:
        try:
            self.ctx.fabric.detach_pod(self.uid)
        except Exception:
            log.exception("pod %s: fabric detach failed", self.uid)

    # -- adoption -------------------------------------------------------------------------

    def _load_runs(self) -> None:
        spec = self.pod.get("spec") or {}
        containers = [(c, True) for c in spec.get("initContainers") or []]
        containers += [(c, False) for c in spec.get("containers") or []]
        if not self.pod:  # orphan: only what the checkpoints say
            containers = [
                ({"name": p.name[: -len(RECORD)]}, False) for p in self.dir.glob(f"*{RECORD}")
            ]
        for c, init in containers:
            run = Run(str(c["name"]), init, dict(c))
            if not init and spec.get("initContainers"):
                run.waiting_reason = POD_INITIALIZING
            self.runs[run.name] = run
            rec = read_record(self.record_path(run))
            if rec is None:
                continue
            run.restore(rec)
            if rec.exit_code is not None:  # the previous agent saw it exit
                self._exited(run, rec.exit_code, parse_time(rec.finished_at) or now(), event=False)
                continue
            proc = runner.adopt(rec.pid, rec.start_ticks)
            if proc is None:  # ended while no agent was watching: exit code unknown
                self._exited(run, None, now(), event=False)
                continue
            log.info("pod %s: re-adopted container %s (pid %d)", self.uid, run.name, rec.pid)
            run.proc = proc
            self.ctx.exits.watch(proc, functools.partial(self.on_exit, run.name, rec.pid))

    # -- sync -----------------------------------------------------------------------------

    def sync(self, pod: dict[str, Any] | None) -> float | None:
        """Advance the pod; returns seconds until it wants to be visited again."""
        if pod is not None:
            self.pod = pod
        if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return terminate(self, exists=pod is not None)
        if self.terminal:
            return None
        wakes: list[float] = []
        self.drain()
        if ensure_sandbox(self):
            wakes += self._kills()
            wakes += self._starts()
        else:
            wakes.append(RETRY_S)
        wakes += self._report()
        return min(wakes) if wakes else None

    def drain(self) -> None:
        """Apply the exits and probe verdicts other threads reported."""
        with self._lock:
            exits, self._exits = self._exits, []
            fatal, self._fatal = self._fatal, []
        for name, pid, code in exits:
            run = self.runs.get(name)
            if run is not None and run.proc is not None and run.proc.pid == pid:
                self._exited(run, code, now())
        for name, kind in fatal:
            run = self.runs.get(name)
            if (
                run is None
                or run.proc is None
                or run.kill_deadline is not None
                or self.term_deadline
            ):
                continue
            self.event("Killing", f"Container {name} failed {kind} probe, will be restarted", run)
            run.proc.signal(signal.SIGTERM)
            grace = lifecycle.grace_period({"spec": self.pod.get("spec") or {}})
            run.kill_deadline = time.monotonic() + grace

    def _exited(self, run: Run, code: int | None, finished: datetime, event: bool = True) -> None:
        stopping = self.terminal or self.term_deadline is not None
        m = self.pod.get("metadata") or {}
        delay = run.exited(
            code,
            finished,
            policy=None if stopping else lifecycle.restart_policy(self.pod),
            mono=time.monotonic(),
            pod_label=f"{m.get('name')}_{m.get('namespace')}({self.uid})",
            record=self.record_path(run),
        )
        if delay is not None and event:
            self.event("BackOff", "Back-off restarting failed container", run, warning=True)

    def _kills(self) -> list[float]:
        """SIGKILL containers whose liveness-restart grace period ran out."""
        wakes = []
        t = time.monotonic()
        for run in self.runs.values():
            if run.proc is not None and run.kill_deadline is not None:
                if t >= run.kill_deadline:
                    run.proc.signal(signal.SIGKILL)
                    wakes.append(1.0)
                else:
                    wakes.append(run.kill_deadline - t)
        return wakes

    def _starts(self) -> list[float]:
        for run in (r for r in self.runs.values() if r.init):
            if run.succeeded:
                continue
            if run.proc is not None or run.terminated is not None:
                return []  # running, or failed for good (the pod is Failed)
            return start_container(self, run)
        wakes: list[float] = []
        for run in self.runs.values():
            if not run.init and run.proc is None and run.terminated is None:
                if run.waiting_reason == POD_INITIALIZING:
                    run.waiting_reason = CONTAINER_CREATING
                wakes += start_container(self, run)
        return wakes

    def _report(self) -> list[float]:
        current = self.last_status or self.pod.get("status") or {}
        runs = list(self.runs.values())
        status = compute_status(
            {"spec": self.pod.get("spec") or {}, "status": current},
            [r.view() for r in runs if r.init],
            [r.view() for r in runs if not r.init],
            pod_ip=self.pod_ip,
            host_ip=self.host_ip(),
            now=now(),
            start_time=self.start_time,
        )
        if changed(status, current):
            m = self.pod.get("metadata") or {}
            try:
                self.ctx.kube.patch_pod_status(str(m.get("namespace")), str(m.get("name")), status)
            except TRANSIENT as e:
                log.warning("pod %s: status patch failed: %s", self.uid, e)
                return [2.0]
            self.last_status = status
        if status["phase"] in TERMINAL and all(r.proc is None for r in runs):
            self.terminal = True
            self.detach()
        return []
