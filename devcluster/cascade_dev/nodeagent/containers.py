"""One container of a pod: what the agent knows about it across restarts.

`Run` holds the current process, restart count, back-off step and last termination;
the pod worker drives it through `started` and `finish` (exit -> restart with back-off
or done), `checkpoint`/`restore` carry it over an agent restart, and `view` is what the
status computation sees. No I/O beyond the checkpoint file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from .lifecycle import CRASH_LOOP, next_backoff, should_restart
from .podstatus import CONTAINER_CREATING, ContainerView, Terminated
from .probes import ContainerProbes
from .runner import Proc, Record, write_record
from .timeutil import now, parse_time, rfc3339


@dataclass
class Run:
    name: str
    init: bool
    spec: dict[str, Any] = field(default_factory=dict)
    proc: Proc | None = None
    pid: int | None = None  # of the latest process, for containerID
    started_at: datetime | None = None
    ran_before: bool = False
    image_id: str = ""
    restart_count: int = 0
    backoff_step: int = 0
    retry_at: float | None = None  # monotonic time of the next start attempt
    terminated: Terminated | None = None  # finished for good (no restart coming)
    last_terminated: Terminated | None = None
    waiting_reason: str = CONTAINER_CREATING
    waiting_message: str | None = None
    probes: ContainerProbes | None = None
    kill_deadline: float | None = None  # SIGKILL after this (liveness restart)
    confine_pending: bool = False  # to go under the node's CPU quota when first Ready
    last_event: str = ""

    @property
    def image(self) -> str:
        return str(self.spec.get("image", ""))

    @property
    def field_path(self) -> str:
        return f"spec.{'initContainers' if self.init else 'containers'}{{{self.name}}}"

    @property
    def succeeded(self) -> bool:
        return self.terminated is not None and self.terminated.exit_code == 0

    def exited(
        self,
        code: int | None,
        finished: datetime,
        *,
        policy: str | None,
        mono: float,
        pod_label: str,
        record: Path,
    ) -> float | None:
        """The process ended with `code` (None: unknown, it was not our child). Checkpoint
        it and apply the restart `policy` (None: the pod is stopping, no restart); returns
        the back-off delay when a restart is scheduled."""
        unknown = code is None
        term = Terminated(
            137 if code is None else code,
            finished,
            self.started_at,
            f"cascade://{self.pid}",
            reason="ContainerStatusUnknown" if unknown else None,
            message="exited while no node agent was its parent" if unknown else None,
        )
        self.checkpoint(record, 0, term)
        restart = policy is not None and should_restart(policy, term.exit_code, init=self.init)
        return self.finish(term, restart=restart, mono=mono, pod_label=pod_label)

    def finish(
        self, term: Terminated, *, restart: bool, mono: float, pod_label: str
    ) -> float | None:
        """Record an exit. With `restart`, schedule the next run after the crash back-off
        (CrashLoopBackOff meanwhile) and return the delay; else the container is done."""
        if self.probes:
            self.probes.stop()
        self.proc, self.probes, self.kill_deadline = None, None, None
        if not restart:
            self.terminated = term
            return None
        started = term.started_at
        ran_for = (term.finished_at - started).total_seconds() if started else 0.0
        delay, self.backoff_step = next_backoff(self.backoff_step, ran_for)
        self.last_terminated, self.terminated = term, None
        self.retry_at = mono + delay
        self.waiting_reason = CRASH_LOOP
        self.waiting_message = (
            f"back-off {int(delay)}s restarting failed container={self.name} pod={pod_label}"
        )
        return delay

    def started(self, proc: Proc, image_id: str, at: datetime) -> None:
        """A new process runs this container."""
        if self.ran_before:
            self.restart_count += 1
        self.ran_before, self.proc, self.pid, self.image_id = True, proc, proc.pid, image_id
        self.started_at, self.terminated, self.retry_at = at, None, None
        self.waiting_reason, self.waiting_message, self.last_event = CONTAINER_CREATING, None, ""

    def restore(self, rec: Record) -> None:
        """Counters and identity from a previous agent's checkpoint."""
        self.pid, self.ran_before, self.image_id = rec.pid, True, rec.image_id
        self.restart_count, self.backoff_step = rec.restart_count, rec.backoff_step
        self.started_at = parse_time(rec.started_at)

    def checkpoint(self, path: Path, ticks: int, term: Terminated | None = None) -> None:
        """Write the record a future agent re-adopts from."""
        if self.pid is None:
            return
        write_record(
            path,
            Record(
                self.pid,
                ticks,
                rfc3339(self.started_at or now()),
                self.restart_count,
                self.backoff_step,
                self.image_id,
                term.exit_code if term else None,
                rfc3339(term.finished_at) if term else None,
            ),
        )

    def view(self) -> ContainerView:
        running = self.proc is not None
        probes = self.probes
        return ContainerView(
            name=self.name,
            image=self.image,
            image_id=self.image_id if (running or self.terminated) else "",
            container_id=f"cascade://{self.pid}"
            if self.pid and (running or self.terminated)
            else None,
            running_since=self.started_at if running else None,
            terminated=None if running else self.terminated,
            waiting_reason=self.waiting_reason,
            waiting_message=self.waiting_message,
            last_terminated=self.last_terminated,
            restart_count=self.restart_count,
            ready=self.succeeded if self.init else running and (probes.ready if probes else True),
            started=running and (probes.started if probes else True),
        )
