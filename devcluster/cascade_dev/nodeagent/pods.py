"""The pod worker: one pod's lifecycle on its simulated node, as a resumable state machine.

`sync(pod)` runs from the work queue whenever the pod changed, a process exited, a
probe flipped, or a timer it asked for (back-off, grace deadline) came due; it never
sleeps. Each call drains process/probe notifications, makes sure the sandbox exists
(fabric address, volumes), advances the containers (init containers in order to
completion, then the app containers, restarts with back-off) and patches the status if
it moved. Deleted or vanished pods go to `teardown`. A worker created where a previous
agent left checkpoints re-adopts the live processes instead of starting them again.

The worker only sequences: what it advances is a `PodState` (`podstate`), and the steps
(`sandbox`, `podstart`, `teardown`) take that state, never the worker, so dependencies
run one way: pods -> steps -> podstate -> context.
"""

from __future__ import annotations

import functools
import logging
import signal
import time
from typing import Any

from . import runner
from .containers import Run
from .context import AgentContext
from .kube import TRANSIENT
from .podstart import start_container
from .podstate import RECORD, TERMINAL, PodState
from .podstatus import CONTAINER_CREATING, POD_INITIALIZING, changed, compute_status
from .runner import read_record
from .sandbox import ensure_sandbox
from .teardown import terminate
from .timeutil import now, parse_time

log = logging.getLogger(__name__)

RETRY_S = 5.0


class PodWorker(PodState):
    """Advances one pod by sequencing the steps over its `PodState`."""

    def __init__(self, uid: str, node: str, ctx: AgentContext, pod: dict[str, Any] | None) -> None:
        super().__init__(uid, node, ctx, pod)
        self._load_runs()

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
            if self.ctx.cpu is not None:  # the quota may be new since it started
                self.ctx.cpu.confine(self.node, self.pod, proc.pid)
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
        # Also against the API's copy: the node lifecycle controller marks every pod of a
        # node whose lease looked stale NotReady (an API-server outage does that to all),
        # and a kubelet puts its own truth back. A stale copy costs one no-op patch.
        stored = self.pod.get("status") or {}
        if changed(status, current) or changed(status, stored):
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
