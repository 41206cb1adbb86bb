"""What one pod worker holds across syncs, and the inbox other threads report into.

The steps that advance a pod (`sandbox`, `podstart`, `teardown`) read and change this
state; the worker in `pods` sequences them. Keeping the state below the steps lets each
step depend on it alone, never on the worker that calls it. Process exits (exit-watcher
thread) and probe verdicts (probe threads) land in a locked inbox and are applied only
by `drain`, on the sync thread, so the state is never changed by two threads at once.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from cascade_dev.fabric import PodNet

from . import lifecycle
from .containers import Run
from .context import AgentContext
from .timeutil import now, parse_time

log = logging.getLogger(__name__)

RECORD = ".run.json"
TERMINAL = ("Succeeded", "Failed")


class PodState:
    """One pod on its node: the Pod object last seen, its sandbox, its containers."""

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

    # -- the inbox (other threads) --------------------------------------------------------

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

    # -- helpers the steps share ----------------------------------------------------------

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
