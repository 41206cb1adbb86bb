"""What the worker holds and is doing: one model store, at most one job at a time.

The control handlers (jobs.py) change this state; GET /v1/status (its half of the
shared `WorkerStatus`) and /metrics read it. A worker does one thing at a time (pack a
checkpoint, or take part in a transfer), so `claim` refuses a second job with a
conflict instead of queueing it: the caller (the operator, a peer) knows better whether
to retry. While an engine serves from the held store (serving/service.py), jobs that
would replace that store are refused too: drain first. No I/O here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cascade_protocol.status import LoadReport, TransferReport, WorkerPhase, WorkerStatus
from cascade_worker.control.errors import RequestError

if TYPE_CHECKING:
    from cascade_worker.blocks.store import BlockStore
    from cascade_worker.multicast.runner import MulticastNode


@dataclass
class WorkerState:
    store: BlockStore | None = None
    job: WorkerPhase | None = None  # LOADING or TRANSFERRING while a job runs
    error: str | None = None  # why the last job failed
    failures: int = 0  # jobs failed or refused in a row; a success resets it
    failed_at: float | None = None  # wall clock of the last
    node: MulticastNode | None = None  # the running transfer's node
    last_transfer: TransferReport | None = None
    last_load: LoadReport | None = None  # the last successful load from storage
    bytes_received_total: int = 0
    # When the last transfer's first bytes landed here as a target (wall clock); the
    # running transfer's node knows its own (`first_byte_at`).
    last_first_byte: float | None = None
    serving: bool = False  # an engine runs (or starts) on `store`

    def claim(self, job: WorkerPhase, *, keeps_store: bool = False) -> None:
        """Start `job`, or RequestError(409) if another one runs or it would take the
        store from a serving engine (`keeps_store`: it only reads it, e.g. sending)."""
        if self.job is not None:
            raise RequestError(409, f"worker is busy ({self.job}); try again when it is done")
        if self.serving and not keeps_store:
            raise RequestError(409, f"worker is serving; drain it before {job}")
        self.job = job
        self.error = None

    def begin_serving(self) -> BlockStore:
        """The complete store an engine may serve from; 409 while a job may replace it.
        A transfer that only reads the store (sending, or relaying once it holds every
        block) does not stop an engine: the store it fills is the one kept after it."""
        node = self.node
        if node is not None and node.store is not None and node.store.complete():
            self.serving = True
            return node.store
        if self.job is not None:
            raise RequestError(409, f"worker is busy ({self.job}); serve when it is done")
        store = self.held_model()
        self.serving = True
        return store

    def unclaim(self) -> None:
        """Give back a claimed job that never started (its request was refused)."""
        self.job = None
        self.node = None

    def release(self, error: str | None = None) -> None:
        """The job ended: failed with `error`, else succeeded (the failure count resets)."""
        self.job = None
        self.node = None
        self.error = error
        if error is None:
            self.failures, self.failed_at = 0, None
        else:
            self.failures, self.failed_at = self.failures + 1, time.time()

    def refuse(self, error: str) -> None:
        """A job refused before it started (its input cannot work): reported as a failed
        job, so status says why and the operator backs off instead of asking again."""
        if self.job is None:
            self.release(error)

    def current_store(self) -> BlockStore | None:
        """The store being filled by a running transfer, else the one held."""
        if self.node is not None and self.node.store is not None:
            return self.node.store
        return self.store

    @property
    def phase(self) -> WorkerPhase:
        if self.job is not None:
            return self.job
        if self.store is not None and self.store.complete():
            return WorkerPhase.READY
        if self.error is not None or self.store is not None:
            return WorkerPhase.FAILED
        return WorkerPhase.IDLE

    @property
    def blocks_loaded(self) -> int:
        store = self.current_store()
        return len(store.held()) if store is not None else 0

    @property
    def store_bytes(self) -> int:
        store = self.current_store()
        return store.held_bytes() if store is not None else 0

    @property
    def bytes_received(self) -> int:
        """Bytes of the running transfer so far, else of the last one."""
        if self.node is not None and not self.node.role.is_source:
            store = self.current_store()
            if store is None:
                return 0
            return sum(store.manifest.blocks[i].nbytes for i in store.held())
        return self.last_transfer.bytes_received if self.last_transfer else 0

    @property
    def first_byte_at(self) -> float | None:
        """Wall clock the running (else the last) transfer's first bytes landed here."""
        if self.node is not None and not self.node.role.is_source:
            return self.node.first_byte_at
        return self.last_first_byte

    def held_model(self) -> BlockStore:
        """The complete store, or RequestError(409) saying why there is none."""
        if self.store is None or not self.store.complete():
            raise RequestError(409, f"worker holds no complete model (phase {self.phase})")
        return self.store

    def status(self, status: WorkerStatus) -> WorkerStatus:
        """`status` (the worker's identity) with what the store holds and the job does."""
        store = self.current_store()
        return status.model_copy(
            update={
                "phase": self.phase,
                "model_digest": store.manifest.digest if store is not None else None,
                "blocks_loaded": self.blocks_loaded,
                "blocks_total": store.num_blocks if store is not None else 0,
                "store_bytes": self.store_bytes,
                "bytes_received": self.bytes_received,
                "error": self.error,
                "failures": self.failures,
                "failed_at": self.failed_at,
                "last_transfer": self.last_transfer,
                "first_byte_at": self.first_byte_at,
                "last_load": self.last_load,
            }
        )
