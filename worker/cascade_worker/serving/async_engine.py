"""AsyncEngine: an EngineCore behind an asyncio API, with admission control and metrics.

`generate(request)` (or `submit` then iterate, when the caller must know about
admission before it answers, as the HTTP handler does) yields a request's chunks as the
engine thread (engine_thread.py) produces them. Admission refuses with `NotServing`
while draining or stopped, `WaitingQueueFull` when the waiting queue is at its limit (the
gateway holds the real queues; a worker's own queue stays short so queue wait shows up
where routing can act on it), and `RequestRejected` when the core refuses the request.
Every admitted request ends with exactly one final chunk: the engine's, MIGRATE (a
drain hands it back for the gateway to resume elsewhere; migration.py says when),
ABORT (the engine stopped), or ERROR when the engine failed; a caller never waits
forever.

All state here is touched on the event loop only; the thread reports through callbacks
scheduled on the loop. TTFT/ITL use the time a step ended on the engine thread, so a
busy loop does not inflate them. With a local autoscaler attached (batch_control.py)
every step and token also goes into its window, and `set_max_batch` changes the
engine's cap between two steps.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Callable
from typing import TypeVar

from cascade_protocol.generate import FinishReason, GenerateChunk, GenerateRequest
from cascade_protocol.load import LoadReport
from cascade_worker.engine.core import EngineCore, EngineStats, RequestRejected
from cascade_worker.serving.engine_thread import EngineThread, settle
from cascade_worker.serving.errors import NotServing, WaitingQueueFull
from cascade_worker.serving.liveness import Liveness
from cascade_worker.serving.local_autoscaler import LocalAutoscaler
from cascade_worker.serving.metrics import LoadNow, ServingMetrics, TokenRate
from cascade_worker.serving.migration import drain_requests, handed_back
from cascade_worker.serving.stream import InFlight, RequestStream

log = logging.getLogger(__name__)


STOP_TIMEOUT_S = 30.0  # longest a step may keep stop() waiting (a long prefill)
T = TypeVar("T")


class AsyncEngine:
    def __init__(
        self, core: EngineCore, *, queue_limit: int = 0, metrics: ServingMetrics | None = None
    ) -> None:
        self.core = core
        self.queue_limit = queue_limit  # most requests waiting (not running); 0 = no limit
        self.draining = False  # admission closed; in-flight requests finish
        self.stopped = False
        self.error: str | None = None  # why the engine thread died, if it did
        # Why the core cannot serve although its thread runs (a pipeline head whose stage
        # died): checked whenever admission or health is read, so nothing polls.
        self.health: Callable[[], str | None] | None = None
        self.last_failure: str | None = None  # the last failed step, for status
        # Hand back (MIGRATE) instead of failing the requests of a step that failed: a
        # pipeline head whose stage died; the gateway resumes them on another instance.
        self.hand_back_failures = False
        self._thread: EngineThread | None = None
        self._stats = EngineStats(
            waiting=0, running=0, max_batch=1, kv_cache_usage=0.0, max_model_len=0
        )
        self.engine_max_batch = 0  # the core's own max batch, read at start
        self.autoscaler: LocalAutoscaler | None = None  # fed by every step when attached
        self.liveness = Liveness()  # steps taken; stalled while busy and no step ends
        self._requests = InFlight(metrics, self._tell_core)
        self._admitting: dict[str, asyncio.Future[None]] = {}

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        thread = EngineThread(
            self.core, loop, on_step=self._on_step, on_failure=self._on_failure,
            on_exit=self._on_exit,
        )  # fmt: skip
        thread.start()
        try:
            self._stats = await thread.call(lambda core: core.stats())
        except BaseException:
            thread.stop()
            raise
        self._thread = thread
        self.engine_max_batch = self._stats.max_batch
        self._requests.rate = TokenRate(since=time.monotonic())

    # -- load ---------------------------------------------------------------------

    @property
    def accepting(self) -> bool:
        return self._thread is not None and not (self.draining or self.stopped or self.failure)

    @property
    def failure(self) -> str | None:
        """Why the engine cannot serve: its thread died, it stalled, or its health check
        says so."""
        if self.error:
            return self.error
        stalled = self.liveness.stall(time.monotonic(), busy=bool(self._requests))
        return stalled or (self.health() if self.health is not None else None)

    @property
    def in_flight(self) -> int:
        return len(self._requests)

    @property
    def waiting(self) -> int:
        """Queued, not running: what the core says, or what cannot fit in the batch yet
        (requests admitted since the last step are not in the core's count)."""
        n = len(self._requests)
        return min(max(self._stats.waiting, n - self._stats.max_batch, 0), n)

    @property
    def running(self) -> int:
        return min(self._stats.running, len(self._requests))

    @property
    def max_batch(self) -> int:
        return self._stats.max_batch

    @property
    def max_model_len(self) -> int:
        return self._stats.max_model_len

    def load_now(self) -> LoadNow:
        judged = self.autoscaler.last if self.autoscaler is not None else None
        return LoadNow(
            serving=self.accepting, waiting=self.waiting, running=self.running,
            max_batch=self._stats.max_batch, kv_cache_usage=self._stats.kv_cache_usage,
            tokens_per_s=self._requests.rate.rate(time.monotonic()),
            engine_max_batch=self.engine_max_batch,
            batch_room=self.autoscaler.latency_room if self.autoscaler is not None else 0,
            latency_backpressure=judged.lbp if judged else None,
            throughput_backpressure=judged.tbp if judged else None,
            backpressure=judged.backpressure if judged else None,
        )  # fmt: skip

    def load_report(self, *, instance: str, model: str, ready: bool) -> LoadReport:
        now = self.load_now()
        return LoadReport(
            instance=instance, model=model, ready=ready and self.accepting,
            draining=self.draining, waiting=now.waiting, running=now.running,
            max_batch=now.max_batch, engine_max_batch=now.engine_max_batch,
            batch_room=now.batch_room, kv_cache_usage=now.kv_cache_usage,
            tokens_per_s=now.tokens_per_s, max_model_len=self._stats.max_model_len,
            max_token_bytes=self._stats.max_token_bytes, engine_steps=self.liveness.steps,
            latency_backpressure=now.latency_backpressure,
            throughput_backpressure=now.throughput_backpressure,
            backpressure=now.backpressure,
        )  # fmt: skip

    async def call(self, fn: Callable[[EngineCore], T]) -> T:
        """Run `fn(core)` on the engine thread between steps (a mode switch); its result."""
        if self._thread is None or self.stopped:
            raise NotServing(self.why_not_serving())
        return await self._thread.call(fn)

    def set_max_batch(self, n: int) -> bool:
        """Bound the core's running batch to `n` from its next step (local batch control);
        False when no engine thread runs. Load reports show it once the thread applied it."""
        if self._thread is None or self.stopped:
            return False

        def apply(core: EngineCore) -> int:
            core.set_max_batch(n)
            return core.stats().max_batch

        self._thread.call(apply).add_done_callback(self._applied)
        return True

    def attach(self, autoscaler: LocalAutoscaler | None) -> None:
        """Feed every step and decode token into `autoscaler`'s window (None: stop)."""
        self.autoscaler = autoscaler
        self._requests.window = autoscaler.window if autoscaler is not None else None

    # -- requests -------------------------------------------------------------------

    async def generate(self, request: GenerateRequest) -> AsyncGenerator[GenerateChunk, None]:
        stream = await self.submit(request)
        async for chunk in stream:
            yield chunk

    async def submit(self, request: GenerateRequest) -> RequestStream:
        """Admit `request` (NotServing, WaitingQueueFull, RequestRejected) and return its stream.
        Its text is tokenized on a worker thread first, not between the engine's steps
        (a long prompt took seconds there), and admission checked again after."""
        rid = request.request_id
        self._admissible(rid)
        request = await asyncio.to_thread(self.core.tokenize, request)
        self._admissible(rid)
        assert self._thread is not None  # _admissible: a thread runs
        stream = self._requests.open(rid, request.request_class, request.params.max_tokens)
        self.liveness.admitted(time.monotonic())
        added = self._admitting[rid] = self._thread.add(request)
        try:
            await added
        except asyncio.CancelledError:
            stream.abort()  # queued behind the add: the core drops it again
            raise
        except BaseException:
            self._requests.forget(rid)
            raise
        finally:
            self._admitting.pop(rid, None)
        return stream

    def _admissible(self, rid: str) -> None:
        if self._thread is None or not self.accepting:
            raise NotServing(self.why_not_serving())
        if rid in self._requests:
            raise RequestRejected(f"request_id {rid!r} is already in flight", "request_id")
        if self.queue_limit and self.waiting >= self.queue_limit:
            raise WaitingQueueFull(f"{self.waiting} requests waiting (limit {self.queue_limit})")

    def why_not_serving(self) -> str:
        failure = self.failure
        if failure:
            return failure
        if self.stopped:
            return "engine stopped"
        if self.draining:
            return "engine draining"
        return "engine not started" if self._thread is None else "engine serving"

    # -- drain and stop -------------------------------------------------------------

    async def drain(self, timeout_s: float) -> int:
        """Stop admitting and let in-flight requests finish; hand back (MIGRATE) what
        cannot before the deadline (migration.py). Returns how many were handed back."""
        self.draining = True
        return await drain_requests(self._requests, timeout_s)

    def hand_back(self, keep: int, why: str) -> int:
        """Hand back (MIGRATE) all but `keep` in-flight requests, those with the fewest
        tokens generated here first (least to recompute where the gateway resumes them)."""
        streams = sorted(self._requests.streams(), key=lambda s: s.tokens_here)
        going = [s.request_id for s in streams[: max(0, len(streams) - keep)]]
        self._requests.migrate(going, why)
        return len(going)

    def hand_back_queued(self, why: str) -> int:
        """Hand back (MIGRATE) every request that has not produced a token yet."""
        going = [s.request_id for s in self._requests.streams() if s.first_token_at is None]
        self._requests.migrate(going, why)
        return len(going)

    async def stop(self) -> None:
        """End the engine thread (after its current step); unfinished requests ABORT."""
        self.draining = True
        if self._thread is not None and not self.stopped:
            self._thread.stop()
            if not await asyncio.to_thread(self._thread.join, STOP_TIMEOUT_S):
                log.warning("engine thread still in a step after %.0fs; leaving it", STOP_TIMEOUT_S)
        self.stopped = True
        self._requests.end_all(FinishReason.ABORT, "aborted: engine stopped")

    # -- engine thread callbacks, run on the loop -------------------------------------

    def _on_step(self, chunks: list[GenerateChunk], stats: EngineStats, at: float) -> None:
        self._stats = stats
        self.liveness.stepped(at)
        if self.hand_back_failures:
            chunks = [
                handed_back(c) if c.finish_reason == FinishReason.ERROR else c for c in chunks
            ]
        if self.autoscaler is not None:  # those that finished in the step ran in it too
            ran = max(stats.running, sum(1 for c in chunks if c.token_ids))
            self.autoscaler.window.step(
                ran, stats.waiting, stats.max_batch, stats.step_s, stats.prefill_tokens
            )
        self._requests.deliver(chunks, at)

    def _applied(self, done: asyncio.Future[int]) -> None:
        if done.cancelled():
            return
        if (exc := done.exception()) is not None:
            log.warning("setting the max batch failed: %s", exc)
        else:
            self._stats = self._stats.model_copy(update={"max_batch": done.result()})

    def _on_failure(self, request_ids: list[str], why: str) -> None:
        self.last_failure = why
        if self.hand_back_failures:
            self._requests.migrate(request_ids, f"migrate: {why}")
        else:
            self._requests.end(request_ids, FinishReason.ERROR, why)

    def _on_exit(self, error: str | None) -> None:
        self.stopped = True
        self.error = error
        for added in self._admitting.values():
            settle(added, None, NotServing(error or "engine stopped"))
        if error:
            self._requests.end_all(FinishReason.ERROR, error)

    def _tell_core(self, request_id: str) -> None:
        if self._thread is not None:
            self._thread.abort(request_id)
