"""The worker's serving state: which engine serves now, how it starts and how it stops.

One worker holds one model (control_state.py) and runs at most one engine on it. An
engine starts from the held complete store (a serve control request, or at start-up
with --serve-on-start) through the injected factory, on a thread because building one
copies weights to the device; it stops by draining (admission closed, in-flight
requests finish or are aborted at a deadline), on a drain request or at shutdown.

Readiness: once serving is wanted (--serve-on-start, or a serve request was accepted),
/readyz is 200 only while an engine takes requests, so Kubernetes and the gateway send
traffic only where the inference port serves. A worker that was never asked to serve
(it only moves weights) stays ready as before: the operator and the transfer tests
wait for that.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from cascade_worker.config import WorkerConfig
from cascade_worker.control_models import RequestError
from cascade_worker.control_state import WorkerState
from cascade_worker.engine.protocol import LoadReport
from cascade_worker.serving.async_engine import AsyncEngine
from cascade_worker.serving.factory import EngineFactory, EngineOptions, default_engine_factory
from cascade_worker.serving.metrics import LoadNow, ServingMetrics

if TYPE_CHECKING:
    from cascade_worker.blocks.store import BlockStore

log = logging.getLogger(__name__)


class Serving:
    def __init__(
        self,
        config: WorkerConfig,
        state: WorkerState,
        metrics: ServingMetrics,
        factory: EngineFactory = default_engine_factory,
    ) -> None:
        self.config = config
        self.state = state
        self.metrics = metrics
        self.factory = factory
        self.engine: AsyncEngine | None = None
        self.layers: tuple[int, int] | None = None  # what the engine runs
        self.starting = False
        self.wanted = config.serve_on_start  # readiness waits for an engine
        self.error: str | None = None  # why the last start failed
        metrics.read_load_from(self.load_now)

    def options(
        self, max_batch: int | None = None, max_model_len: int | None = None
    ) -> EngineOptions:
        """Engine options: a request's values over the worker's flags."""
        return EngineOptions(
            max_batch=max_batch or self.config.max_batch,
            max_model_len=max_model_len or self.config.max_model_len,
            device=self.config.device or None,
            dtype=None if self.config.dtype in ("", "auto") else self.config.dtype,
        )

    def claim(self) -> BlockStore:
        """Reserve the start of an engine (409 if one runs or starts); the store to use."""
        if self.starting:
            raise RequestError(409, "an engine is starting already")
        if self.engine is not None and not self.engine.stopped:
            raise RequestError(409, "an engine serves already; drain it first")
        store = self.state.begin_serving()
        self.starting, self.wanted, self.error = True, True, None
        return store

    async def start(self, store: BlockStore, options: EngineOptions) -> bool:
        """Build and start the engine (after `claim`); failures land in status."""
        try:
            core = await asyncio.to_thread(self.factory, store, options)
            engine = AsyncEngine(core, queue_limit=self.config.queue_limit, metrics=self.metrics)
            await engine.start()
        except Exception as exc:
            log.exception("engine start failed")
            self.error = f"engine start failed: {exc}"
            self.state.serving = False
            return False
        finally:
            self.starting = False
        self.engine = engine
        self.layers = (0, store.manifest.num_layers)
        log.info("serving: max_batch=%d max_model_len=%d", engine.max_batch, engine.max_model_len)
        return True

    async def drain(self, timeout_s: float | None = None) -> bool:
        """Stop admitting, let in-flight requests finish (abort past the deadline), stop."""
        engine = self.engine
        if engine is None:
            return True
        timeout = self.config.request_drain_seconds if timeout_s is None else timeout_s
        log.info("draining: %d request(s) in flight, deadline %.1fs", engine.in_flight, timeout)
        clean = await engine.drain(timeout)
        await engine.stop()
        if self.engine is engine:
            self.engine = None
            self.layers = None
            self.state.serving = False
        log.info("drained (%s)", "clean" if clean else "aborted stragglers")
        return clean

    @property
    def phase(self) -> str:
        engine = self.engine
        if self.starting:
            return "starting"
        if engine is not None and engine.error:
            return "failed"
        if engine is not None and engine.accepting:
            return "serving"
        if engine is not None:
            return "draining"
        return "failed" if self.error else "off"

    def not_ready_reason(self) -> str | None:
        """Readiness gate (health.py): None while serving or never asked to serve."""
        if not self.wanted or self.phase == "serving":
            return None
        engine = self.engine
        error = (engine.error if engine is not None else None) or self.error
        return f"engine {self.phase}" + (f": {error}" if error else "")

    def load_now(self) -> LoadNow:
        return self.engine.load_now() if self.engine is not None else LoadNow()

    def load_report(self, *, ready: bool) -> LoadReport:
        config = self.config
        instance = config.pod_name
        model = config.served_name or config.deployment or config.model_uri
        if self.engine is None:
            return LoadReport(instance=instance, model=model, ready=False)
        report = self.engine.load_report(instance=instance, model=model, ready=ready)
        return report.model_copy(update={"layers": self.layers})

    def status(self) -> dict[str, Any]:
        engine = self.engine
        return {
            "serving": self.phase == "serving",
            "draining": self.phase == "draining",
            "engine": self.phase,
            "engine_error": (engine.error or engine.last_failure if engine else None) or self.error,
            "max_batch": engine.max_batch if engine else 0,
            "max_model_len": engine.max_model_len if engine else 0,
            "running": engine.running if engine else 0,
            "waiting": engine.waiting if engine else 0,
            "layers": list(self.layers) if self.layers else None,
        }
