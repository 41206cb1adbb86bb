"""The local autoscaler's clock: a short fixed tick on the event loop (--adaptive-batch).

Every `tick_s` (--adaptive-batch-tick-seconds, default 0.5 s) it asks the
`LocalAutoscaler` (local_autoscaler.py) to judge the window the engine's steps filled
since the last judged tick, and hands a changed cap to the engine thread
(`AsyncEngine.set_max_batch`, applied between two steps). The engine's configured max
batch is the upper bound and the starting point; the judged window's backpressure shows
in /v1/load and the cascade_worker_*backpressure gauges. The tick is fixed rather than
on every change of the running set: a window needs enough decode tokens to judge, and
a thin one just keeps accumulating.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from cascade_autoscaler.batch_size import BatchLimits
from cascade_worker.config import WorkerConfig
from cascade_worker.serving.async_engine import AsyncEngine
from cascade_worker.serving.local_autoscaler import ItlSlos, LocalAutoscaler, Tick

log = logging.getLogger(__name__)


class BatchControl:
    """Runs one `LocalAutoscaler` against one engine until stopped or the engine stops."""

    def __init__(
        self,
        engine: AsyncEngine,
        autoscaler: LocalAutoscaler,
        tick_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.autoscaler = autoscaler
        self.tick_s = tick_s
        self.clock = clock
        self.applied = autoscaler.max_batch  # the cap last handed to the engine
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def for_engine(cls, engine: AsyncEngine, config: WorkerConfig) -> BatchControl:
        """Bounds [1, the started engine's max batch]; SLOs and tick from the flags."""
        limits = BatchLimits(
            engine_max=max(1, engine.engine_max_batch),
            default_itl_slo_s=config.interactive_itl_slo_ms / 1000,
        )
        slos = ItlSlos(config.interactive_itl_slo_ms / 1000, config.batch_itl_slo_ms / 1000)
        return cls(
            engine,
            LocalAutoscaler(limits, slos, time.monotonic()),
            config.adaptive_batch_tick_seconds,
        )

    def start(self) -> None:
        self.autoscaler.window.restart(self.clock(), self.applied)
        self.engine.attach(self.autoscaler)
        self._task = asyncio.create_task(self._run(), name="cascade-batch-control")
        slos = self.autoscaler.slos
        log.info(
            "local autoscaler on: max batch 1..%d, tick %.2fs, ITL SLOs %.0f/%.0f ms "
            "(interactive/batch)", self.applied, self.tick_s,
            slos.interactive_s * 1000, slos.batch_s * 1000,
        )  # fmt: skip

    @property
    def active(self) -> bool:
        """True while the tick task runs."""
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def tick(self) -> Tick:
        """One tick: judge the window, apply a changed cap."""
        tick = self.autoscaler.tick(self.clock())
        decision = tick.decision
        if decision is None:
            return tick
        log.debug("batch control: %s", decision.reason)
        if decision.max_batch != self.applied and self.engine.set_max_batch(decision.max_batch):
            log.info("max batch %d -> %d: %s", self.applied, decision.max_batch, decision.reason)
            self.applied = decision.max_batch
        return tick

    async def _run(self) -> None:
        while not self.engine.stopped:
            await asyncio.sleep(self.tick_s)
            try:
                self.tick()
            except Exception:  # a bug here must not take serving down: log, keep ticking
                log.exception("local autoscaler tick failed")
