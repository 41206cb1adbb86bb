"""One server-sent-events response, started lazily, kept alive while it is silent.

A streaming request can wait long before its first token: queued behind others, held
while the deployment scales up from zero, retried, in a long prefill. Proxies and load
balancers cut connections idle for 30-60 s, so while the stream is open a heartbeat
task sends an SSE comment (``: keep-alive``, which SSE clients skip) whenever
``interval`` seconds pass without a write. The response (status 200 and headers) is
started by the first write, chunk or keep-alive, so a request answered within the
first interval still gets a proper status code for an early failure.

Writes are serialized by a lock, so a keep-alive never lands inside a chunk, and
``stop`` ends the heartbeat between writes: after it, ``started`` is final and the
caller may still choose a plain JSON error response if nothing was sent.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

KEEPALIVE = b": keep-alive\n\n"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class ClientGone(Exception):
    """The client closed its connection; nothing more can be sent."""

    def __init__(self, response: web.StreamResponse | None = None) -> None:
        super().__init__("client closed the connection")
        # The stream already started, if any: the one aiohttp must finish, not a new one.
        self.response = response


class EventStream:
    def __init__(self, request: web.Request, interval: float) -> None:
        self.request = request
        self.interval = interval
        self.response: web.StreamResponse | None = None
        self._lock = asyncio.Lock()
        self._loop = asyncio.get_running_loop()
        self._last = self._loop.time()
        self._heartbeat: asyncio.Task[None] | None = None

    @property
    def started(self) -> bool:
        return self.response is not None

    def start(self) -> None:
        """Begin the keep-alive heartbeat (the response itself starts on first write)."""
        self._heartbeat = asyncio.create_task(self._beat())

    async def send(self, data: bytes) -> None:
        """Write ``data``, starting the response first if need be; ClientGone if closed."""
        async with self._lock:
            try:
                if self.response is None:
                    self.response = web.StreamResponse(headers=SSE_HEADERS)
                    await self.response.prepare(self.request)
                await self.response.write(data)
            except ConnectionError as exc:  # aiohttp's ClientConnectionResetError too
                raise ClientGone(self.response) from exc
            self._last = self._loop.time()

    async def stop(self) -> None:
        """End the heartbeat between two writes (idempotent)."""
        task, self._heartbeat = self._heartbeat, None
        if task is None:
            return
        try:
            async with self._lock:  # not in the middle of a keep-alive write
                task.cancel()
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _beat(self) -> None:
        while True:
            idle = self._loop.time() - self._last
            if idle >= self.interval:
                await self.send(KEEPALIVE)
            else:
                await asyncio.sleep(self.interval - idle)
