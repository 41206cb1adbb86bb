"""A worker as the weight-moving decisions see it: its pod plus its GET /v1/status.

The pool (pool.py) and the ScalePlan lifecycle (lifecycle.py) need a few facts per
worker: is the pod alive and where, what it holds (model digest, blocks), what it is
doing (loading, transferring, serving, heading an execution pipeline) and whether it
keeps a host copy. The pod comes from the API server (parsed once, as observed.PodView),
the rest from the worker's control API as a typed `WorkerStatus`; `WorkerView.of` joins
them. A worker whose status could not be read (`phase=None`) is alive for Kubernetes but
neither a source nor a target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from cascade_api import constants as c
from cascade_operator.observed import PodView
from cascade_protocol.materialize import MaterializationInfo
from cascade_protocol.status import EnginePhase, ServingMode, StartupInfo, WorkerPhase, WorkerStatus


@dataclass(frozen=True)
class WorkerView:
    name: str
    node: str | None  # spec.nodeName; None while unscheduled
    ip: str | None  # status.podIP; control and data addresses derive from it
    created: datetime | None  # creationTimestamp: tells a fresh pod from a reused name
    alive: bool  # running, not terminating, not failed: may take part in a plan
    host_copy: bool = False  # a host-copy pod: holds and sends, never serves
    # Not running yet (unscheduled, pulling, no IP): soon a target, so planning may wait.
    starting: bool = False
    # From GET /v1/status; phase None when it could not be read.
    phase: WorkerPhase | None = None
    engine: EnginePhase = EnginePhase.OFF
    model_digest: str | None = None
    blocks_loaded: int = 0
    blocks_total: int = 0
    bytes_received: int = 0
    store_bytes: int = 0  # bytes of the blocks it holds
    # The last transfer's report: complete flag and the blocks it still missed.
    transfer_complete: bool | None = None
    missing: tuple[int, ...] = ()
    # Seconds from the last transfer's common start until this pod, as a target, held
    # every block (the worker's own clock): the measured side of a plan's prediction.
    transfer_s: float | None = None
    error: str | None = None
    failures: int = 0  # its jobs failed or refused in a row
    failed_at: float | None = None  # the last one's wall clock (the worker's)
    mode: ServingMode | None = None  # how it serves now; None: status unread
    # While its engine heads an execution pipeline (live scale-ups): heads_pipeline, and
    # the wall times (its own clock) its members' blocks covered the model and it took
    # its first request.
    heads_pipeline: bool = False
    covered_at: float | None = None
    serving_at: float | None = None
    startup: StartupInfo | None = None  # its start-up stages so far
    # Wall clocks (its own): its control API started listening; the running (else last)
    # transfer's first bytes landed here. A plan's start delay is measured with them.
    listening_at: float | None = None
    first_byte_at: float | None = None
    # What its engine start did with materialized state (None: not reported, or off).
    materialization: MaterializationInfo | None = None

    @property
    def has_model(self) -> bool:
        """Holds every block of its model, whatever it is doing (a copy that exists)."""
        return (
            self.alive
            and self.phase not in (None, WorkerPhase.FAILED)
            and self.blocks_total > 0
            and self.blocks_loaded >= self.blocks_total
        )

    @property
    def complete(self) -> bool:
        """Holds every block and runs no job: a source a new plan may use now."""
        return self.has_model and self.phase == WorkerPhase.READY

    @property
    def serving(self) -> bool:
        return EnginePhase(self.engine).on

    @property
    def needs_weights(self) -> bool:
        """Holds no complete model and does nothing about it: a plan's target."""
        idle = self.phase in (WorkerPhase.IDLE, WorkerPhase.FAILED)
        return self.alive and idle and not self.serving

    @property
    def busy(self) -> bool:
        """Running a job (packing or a transfer); a new job would get a 409."""
        return self.phase is not None and WorkerPhase(self.phase).busy

    def holds(self, digest: str | None) -> bool:
        return self.has_model and self.model_digest == digest

    def control_address(self) -> str:
        return f"{self.ip}:{c.WORKER_PORT}"

    def data_address(self) -> str:
        return f"{self.ip}:{c.DATA_PORT}"

    @classmethod
    def of(cls, pod: PodView, status: WorkerStatus | None) -> WorkerView:
        """A pod as observed and its worker's status (None: not running or no answer)."""
        view = cls(
            name=pod.name,
            node=pod.node,
            ip=pod.ip,
            created=pod.created,
            alive=pod.running,
            host_copy=pod.host_copy,
            starting=pod.starting,
        )
        return view.with_status(status) if status is not None else view

    def with_status(self, status: WorkerStatus) -> WorkerView:
        """This view with the worker's status folded in."""
        last, pipeline = status.last_transfer, status.pipeline
        return replace(
            self,
            phase=status.phase,
            engine=status.engine,
            model_digest=status.model_digest,
            blocks_loaded=status.blocks_loaded,
            blocks_total=status.blocks_total,
            bytes_received=status.bytes_received,
            store_bytes=status.store_bytes,
            transfer_complete=last.complete if last else None,
            missing=tuple(last.missing) if last else (),
            transfer_s=last.target_seconds if last else None,
            error=status.error,
            failures=status.failures,
            failed_at=status.failed_at,
            mode=status.mode,
            heads_pipeline=status.mode == ServingMode.HEAD and pipeline is not None,
            covered_at=pipeline.covered_at if pipeline else None,
            serving_at=pipeline.serving_at if pipeline else None,
            startup=status.startup,
            listening_at=status.startup.listening_at if status.startup else None,
            first_byte_at=status.first_byte_at,
            materialization=status.materialization,
        )


def job_failures(workers: Sequence[WorkerView], model_uri: str | None) -> dict[str, str]:
    """pod -> why its worker's last job failed, with the model it was given and how many
    times in a row: what `Degraded` says (a refused load included)."""
    model = f"model {model_uri}; " if model_uri else ""
    return {
        w.name: f"{w.error} ({model}{w.failures} failure(s) in a row)"
        for w in workers
        if w.phase == WorkerPhase.FAILED and w.error is not None
    }
