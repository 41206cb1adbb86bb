"""The worker's serving state: which engine serves now, how it starts and how it stops.

One worker holds one model (control/state.py) and runs at most one engine on it. An
engine starts from the held complete store (a serve control request, or at start-up
with --serve-on-start) through the injected factory, on a thread because building one
copies weights to the device; it stops by draining (admission closed, in-flight
requests finish or are handed back to the gateway to resume elsewhere, serving/
migration.py), on a drain request or at shutdown.

Pipelines (pipeline.py): instead of an engine, the worker may serve layers [a, b) as a
pipeline stage (`stage`), from whatever blocks it holds; or its engine may be a
pipeline head (`head`): layers [0, a) here, the rest on stages. A head that holds the
whole model switches to local execution between two steps (`switch_to_local`). A head
whose pipeline breaks fails its in-flight requests (the engine does that) and reports
failed: no new requests, readiness 503.

Readiness: once serving is wanted (--serve-on-start, or an accepted serve or stage
request), /readyz is 200 only while an engine takes requests or a stage server listens,
so traffic goes only where the worker does useful work (a stage's load report still says
not ready: it takes no requests). A worker never asked to serve (it only moves weights)
stays ready: the operator and the transfer tests wait for that.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from cascade_protocol.load import LoadReport
from cascade_protocol.status import EnginePhase, WorkerPhase
from cascade_worker.accelerator import on_builder
from cascade_worker.config import WorkerConfig
from cascade_worker.control.errors import RequestError
from cascade_worker.control.state import WorkerState
from cascade_worker.engine.core import EngineCore
from cascade_worker.engine.options import EngineOptions
from cascade_worker.serving.async_engine import AsyncEngine
from cascade_worker.serving.batch_control import BatchControl
from cascade_worker.serving.factory import EngineFactory, default_engine_factory, engine_options
from cascade_worker.serving.metrics import LoadNow, ServingMetrics
from cascade_worker.serving.pipeline import (
    HeadRole,
    StageRole,
    build_head,
    check_blocks,
    local_stage,
    pipeline_listener,
    start_stage_server,
    switch_to_local,
)
from cascade_worker.serving.restore import Restore, restoring
from cascade_worker.timeline import Startup

if TYPE_CHECKING:
    from cascade_worker.blocks.store import BlockStore
    from cascade_worker.pipeline.head import PreparedHead
    from cascade_worker.pipeline.splits import SplitPolicy

Build = Callable[[], tuple[EngineCore, HeadRole | None]]  # an engine (and head role)
log = logging.getLogger(__name__)


class Serving:
    def __init__(
        self,
        config: WorkerConfig,
        state: WorkerState,
        metrics: ServingMetrics,
        factory: EngineFactory = default_engine_factory,
        startup: Startup | None = None,
    ) -> None:
        self.config = config
        self.startup = startup or Startup()  # where the engine's start-up stages go
        self.state = state
        self.metrics = metrics
        self.factory = factory
        self.engine: AsyncEngine | None = None
        self.layers: tuple[int, int] | None = None  # what the engine runs
        self.starting = False
        # Readiness waits for an engine (serve on start, or awaiting streamed weights).
        self.wanted = config.serve_on_start or config.await_weights
        self.error: str | None = None  # why the last start failed
        self.head: HeadRole | None = None  # the engine's pipeline, when it heads one
        self.stage: StageRole | None = None  # serving as a pipeline stage instead
        self.batch: BatchControl | None = None  # the local autoscaler (--adaptive-batch)
        self.restore: Restore | None = None  # the last start's materialized state
        # Bound by the first stage role, kept for the next ones (transport/shared.py).
        self.pipeline_port = pipeline_listener(config.host, config.pipeline_port)
        metrics.read_load_from(self.load_now)

    def options(self, max_batch: int | None = None, max_len: int | None = None) -> EngineOptions:
        """Engine options: a request's values over the worker's flags."""
        return engine_options(self.config, max_batch, max_len)

    def _check_engine_free(self) -> None:
        if self.starting:
            raise RequestError(409, "an engine is starting already")
        if self.engine is not None and not self.engine.stopped:
            raise RequestError(409, "an engine serves already; drain it first")

    def claim(self, layers: tuple[int, int] | None = None) -> BlockStore:
        """Reserve the start of an engine (409 if one runs or starts); the store to use:
        the whole model, or (`layers`, a pipeline part) one holding those layers' blocks.
        A stage this worker serves for another's pipeline may go on beside the engine."""
        self._check_engine_free()
        store = self.state.begin_serving() if layers is None else self._claim_layers(*layers)
        self.starting, self.wanted, self.error = True, True, None
        return store

    def _claim_layers(self, start: int, end: int) -> BlockStore:
        """The held store, complete or still being received, if it has [start, end)."""
        state = self.state
        if state.job == WorkerPhase.LOADING:  # the load replaces the store when done
            raise RequestError(409, f"worker is busy ({state.job}); serve when it is done")
        store = state.current_store()
        if store is None:
            raise RequestError(409, f"worker holds no model (phase {state.phase})")
        check_blocks(store, start, end)
        state.serving = True
        return store

    async def start(self, store: BlockStore, options: EngineOptions) -> bool:
        """Build and start the engine (after `claim`; restoring materialized state offered
        with the store when its key is this start's); failures land in status."""
        self.restore, build = restoring(self.factory, store, options, self.config.materialization)
        return await self._start(store, build, self.restore.read_s if self.restore else 0.0)

    async def start_head(
        self,
        store: BlockStore,
        options: EngineOptions,
        end: int,
        stages: list[str],
        prepared: PreparedHead | None = None,
        splits: SplitPolicy | None = None,
    ) -> bool:
        """Start a pipeline head over layers [0, end) and `stages` (after `claim`), over
        `prepared` (pipeline.prepare_head, made with the same arguments) if given;
        `splits`: its one stage is a cooperating source (pipeline/cooperative.py)."""
        loop = asyncio.get_running_loop()
        return await self._start(
            store, lambda: build_head(store, options, end, stages, loop, prepared, splits)
        )

    async def _start(self, store: BlockStore, build: Build, read_s: float = 0.0) -> bool:
        """`read_s`: choosing and reading a materialized artifact, before `build`."""
        head = None
        began = time.monotonic()
        try:
            core, head = await on_builder(build)
            self.startup.engine(core, time.monotonic() - began, read_s)
            engine = AsyncEngine(core, queue_limit=self.config.queue_limit, metrics=self.metrics)
            engine.health = head.broken if head is not None else None
            engine.hand_back_failures = head is not None
            await engine.start()
            self.startup.ready()
        except Exception as exc:
            log.exception("engine start failed")
            self.error = f"engine start failed: {exc}"
            self.state.serving = False
            if head is not None:
                await asyncio.to_thread(head.close)
            return False
        finally:
            self.starting = False
        self.engine, self.head = engine, head
        self.layers = (0, store.manifest.num_layers)  # a head serves all through its stages
        if self.config.adaptive_batch:
            self.batch = BatchControl.for_engine(engine, self.config)
            self.batch.start()
        log.info("serving: max_batch=%d max_model_len=%d", engine.max_batch, engine.max_model_len)
        return True

    def claim_stage(self, layers: tuple[int, int]) -> BlockStore:
        """Reserve serving `layers` as a pipeline stage (409 if one is served already or
        blocks lack); beside this worker's own engine, if it has one."""
        if self.stage is not None:
            held = list(self.stage.layers)
            raise RequestError(409, f"serving as pipeline stage {held}; drain it first")
        store = self._claim_layers(*layers)
        self.stage, self.wanted, self.error = StageRole(layers), True, None
        return store

    async def start_stage(self, store: BlockStore, options: EngineOptions) -> bool:
        """Listen as the claimed stage on the pipeline port; failures land in status."""
        role = self.stage
        assert role is not None
        try:
            server = await start_stage_server(store, role, options, self.pipeline_port)
        except Exception as exc:
            log.exception("stage start failed")
            self.error = f"stage {list(role.layers)} start failed: {exc}"
            self.stage = None
            self.state.serving = False
            return False
        role.server = server
        log.info("serving layers %s as a pipeline stage on %s", role.layers, server.address)
        return True

    async def switch_to_local(self, store: BlockStore) -> bool:
        """The head leaves its pipeline (after the checks of /v1/control/local): the whole
        model loads on a thread, the engine thread swaps executors between two steps."""
        head, engine = self.head, self.engine
        assert head is not None and engine is not None
        head.switching = True
        try:
            full = await on_builder(lambda: local_stage(store, head))
            await engine.call(lambda core: switch_to_local(core, head, full))
        except Exception as exc:
            log.exception("switch to local execution failed")
            self.error = f"switch to local execution failed: {exc}"
            return False
        finally:
            head.switching = False
        if self.head is head:
            self.head = None
            engine.hand_back_failures = False
        log.info("left the pipeline: running all %d layers here", full.end)
        return True

    async def end_stage(self) -> None:
        """Stop serving as a pipeline stage (its head hands its requests in flight back)."""
        stage = self.stage
        if stage is not None and stage.server is not None:
            self.stage = None
            await stage.server.close()
            self.state.serving = self.engine is not None
            log.info("stopped serving layers %s as a pipeline stage", stage.layers)

    async def drain(self, timeout_s: float | None = None) -> bool:
        """Stop admitting, let in-flight requests finish, stop; those that cannot before
        the deadline are handed back (MIGRATE) to resume on another instance. True when
        none had to be. A stage server stops at once (its head hands its own requests back)."""
        await self.end_stage()
        engine = self.engine
        if engine is None:
            return True
        timeout = self.config.request_drain_seconds if timeout_s is None else timeout_s
        log.info("draining: %d request(s) in flight, deadline %.1fs", engine.in_flight, timeout)
        moved = await engine.drain(timeout)
        if self.batch is not None and self.batch.engine is engine:
            await self.batch.stop()
            self.batch = None
        await engine.stop()
        head = self.head
        if self.engine is engine:
            self.engine = None
            self.head = None
            self.layers = None
            self.state.serving = False
        if head is not None:
            await asyncio.to_thread(head.close)
        log.info("drained (%d request(s) handed back to resume elsewhere)", moved)
        return moved == 0

    @property
    def phase(self) -> EnginePhase:
        engine = self.engine
        if self.starting:
            return EnginePhase.STARTING
        if engine is not None and engine.failure:
            return EnginePhase.FAILED
        if engine is not None and engine.accepting:
            return EnginePhase.SERVING
        if engine is not None:
            return EnginePhase.DRAINING
        return EnginePhase.FAILED if self.error else EnginePhase.OFF

    def not_ready_reason(self) -> str | None:
        """Readiness gate (health.py): None while serving (an engine, or a listening
        stage server) or never asked to serve."""
        if not self.wanted or self.phase == EnginePhase.SERVING:
            return None
        if self.stage is not None:
            return None if self.stage.server is not None else "pipeline stage starting"
        engine = self.engine
        error = (engine.failure if engine is not None else None) or self.error
        if engine is None and not error and not self.starting and self.config.await_weights:
            return "awaiting weights"
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
