"""Admitted requests as the event loop sees them: chunk queues and latency clocks.

The engine thread's results are delivered on the loop (async_engine.py) into one
queue per request; the HTTP handler reads it. Whoever stops reading early (the client
went away, the handler was cancelled) calls `abort`, which tells the engine to drop
the request, so a vanished client never keeps a batch slot.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable

from cascade_protocol.generate import FinishReason, GenerateChunk, RequestClass
from cascade_worker.serving.local_autoscaler import BatchWindow
from cascade_worker.serving.metrics import ServingMetrics, TokenRate


class RequestStream:
    def __init__(
        self,
        request_id: str,
        submitted: float,
        abort: Callable[[str], None],
        request_class: RequestClass = RequestClass.INTERACTIVE,
    ) -> None:
        self.request_id = request_id
        self.request_class = request_class  # whose ITL SLO its tokens answer to
        self.submitted = submitted  # monotonic admission time: TTFT counts from here
        self.last_token_at: float | None = None  # for ITL; None until the first token
        self.prompt_tokens = 0
        self.completion_tokens = 0
        # The final chunk is queued (or the consumer gave up): the engine is done with it.
        self.finished = False
        self._queue: asyncio.Queue[GenerateChunk] = asyncio.Queue()
        self._abort = abort

    def put(self, chunk: GenerateChunk) -> None:
        """Queue a chunk (loop thread); anything after the final chunk is dropped."""
        if self.finished:
            return
        self.prompt_tokens = chunk.prompt_tokens or self.prompt_tokens
        self.completion_tokens = chunk.completion_tokens or self.completion_tokens
        self._queue.put_nowait(chunk)
        if chunk.finish_reason is not None:
            self.finished = True

    async def get(self) -> GenerateChunk:
        return await self._queue.get()

    def ready(self) -> list[GenerateChunk]:
        """The chunks queued now, without waiting (several steps may have run)."""
        out = []
        while not self._queue.empty():
            out.append(self._queue.get_nowait())
        return out

    def abort(self) -> None:
        """The consumer stops reading: the engine drops the request (no-op once finished)."""
        if not self.finished:
            self.finished = True
            self._abort(self.request_id)

    async def __aiter__(self) -> AsyncGenerator[GenerateChunk, None]:
        """Chunks up to and including the final one; leaving early aborts the request."""
        try:
            while True:
                chunk = await self.get()
                yield chunk
                if chunk.finish_reason is not None:
                    return
        finally:
            self.abort()


class InFlight:
    """The admitted requests the engine is not done with, and their latency accounting.

    Lives on the loop. Every request leaves exactly once, through the engine's final
    chunk (`deliver`), a local end (`end`: ERROR after an engine failure, ABORT at a
    drain deadline) or its consumer leaving (`abort`); each leaving is counted once by
    finish reason. `tell_core` forwards an abort to the engine thread.
    """

    def __init__(self, metrics: ServingMetrics | None, tell_core: Callable[[str], None]) -> None:
        self.metrics = metrics
        self.rate = TokenRate()
        self.window: BatchWindow | None = None  # the local autoscaler's, when it runs
        self.idle = asyncio.Event()  # set while nothing is in flight (drain waits on it)
        self.idle.set()
        self._tell_core = tell_core
        self._streams: dict[str, RequestStream] = {}

    def __len__(self) -> int:
        return len(self._streams)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._streams

    def open(
        self, request_id: str, request_class: RequestClass = RequestClass.INTERACTIVE
    ) -> RequestStream:
        stream = RequestStream(request_id, time.monotonic(), self.abort, request_class)
        self._streams[request_id] = stream
        self.idle.clear()
        return stream

    def forget(self, request_id: str) -> None:
        """The engine never took it (admission failed): gone, not counted."""
        self._streams.pop(request_id, None)
        if not self._streams:
            self.idle.set()

    def deliver(self, chunks: list[GenerateChunk], at: float) -> None:
        """One step's chunks, `at` the monotonic time the step ended."""
        for chunk in chunks:
            stream = self._streams.get(chunk.request_id)
            if stream is None:  # aborted or failed meanwhile
                continue
            if chunk.token_ids:
                self._observe_tokens(stream, len(chunk.token_ids), at)
            stream.put(chunk)
            if chunk.finish_reason is not None:
                self._left(stream, chunk.finish_reason)

    def end(self, request_ids: list[str], reason: FinishReason, error: str) -> None:
        """Finish requests here, not in the engine: one final chunk saying why."""
        for rid in request_ids:
            stream = self._streams.get(rid)
            if stream is None:
                continue
            final = GenerateChunk(
                request_id=rid, finish_reason=reason, error=error,
                prompt_tokens=stream.prompt_tokens, completion_tokens=stream.completion_tokens,
            )  # fmt: skip
            stream.put(final)
            self._left(stream, reason)

    def end_all(self, reason: FinishReason, error: str, *, tell_core: bool = False) -> None:
        ids = list(self._streams)
        if tell_core:
            for rid in ids:
                self._tell_core(rid)
        self.end(ids, reason, error)

    def abort(self, request_id: str) -> None:
        """A consumer left early: free its slot in the engine."""
        stream = self._streams.get(request_id)
        if stream is not None:
            self._tell_core(request_id)
            self._left(stream, FinishReason.ABORT)

    def _observe_tokens(self, stream: RequestStream, n: int, at: float) -> None:
        self.rate.add(at, n)
        if self.window is not None:
            last = stream.last_token_at
            self.window.token(n, None if last is None else at - last, stream.request_class)
        if self.metrics is not None:
            self.metrics.generated.inc(n)
            if stream.last_token_at is None:
                self.metrics.ttft.observe(at - stream.submitted)
            else:
                self.metrics.itl.observe((at - stream.last_token_at) / n)
        stream.last_token_at = at

    def _left(self, stream: RequestStream, reason: FinishReason) -> None:
        if self._streams.pop(stream.request_id, None) is None:
            return
        if self.metrics is not None:
            self.metrics.finished.labels(finish_reason=str(reason)).inc()
            self.metrics.prompt.inc(stream.prompt_tokens)
        if not self._streams:
            self.idle.set()
