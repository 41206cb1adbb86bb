"""Hung backends: which ones hold streams they make no progress on, and cutting them.

A worker that stops (SIGSTOP, a hung device call, a frozen VM) keeps its TCP
connections: its kernel still ACKs, so neither keep-alive nor the dead-peer timeout of
upstream.py fires, and the requests on it wait for as long as it hangs while other
backends have room. A backend makes progress when a chunk arrives on any of its
streams, a stream to it opens, or its load report's `engine_steps` moves (a long
prefill streams nothing for a while, but its steps end). One that has streams and has
made no progress for the bound is stalled: the gateway stops routing to it and cuts its
streams, which resume elsewhere through dispatch's usual path (prompt plus the tokens
delivered, so greedy outputs are unchanged). Only while some other backend is routable
and not stalled itself: with nowhere to go, waiting is all a request can do.

`stalled` is pure (time passed in); `Cut` is the handle dispatch holds per stream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass

import aiohttp


@dataclass(frozen=True)
class Liveness:
    """One backend as the stall check sees it."""

    url: str
    streams: int  # open generate streams from this gateway
    progress_at: float  # monotonic time of its last progress (above)
    routable: bool


def stalled(backends: Sequence[Liveness], now: float, bound_s: float) -> list[str]:
    """URLs of the backends with streams and no progress for `bound_s` (0: never), while
    another backend is routable and not stalled."""
    if bound_s <= 0:
        return []
    stuck = {b.url for b in backends if b.streams and now - b.progress_at >= bound_s}
    healthy = any(b.routable and b.url not in stuck for b in backends)
    return sorted(stuck) if healthy else []


class Cut:
    """One open stream, which the stall watch may close with a reason: before the
    worker's response headers (a hung engine never admits it) by expiring the wait for
    them, after by closing the response, so the pending read fails either way."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._opening: asyncio.Timeout | None = None
        self._response: aiohttp.ClientResponse | None = None

    async def open(self, pending: Awaitable[aiohttp.ClientResponse]) -> aiohttp.ClientResponse:
        """The response of `pending`; TimeoutError if cut before its headers came."""
        try:
            async with asyncio.timeout(None) as self._opening:
                if self.reason is not None:
                    raise TimeoutError
                response = await pending
        finally:
            self._opening = None  # a wait that ended is never rescheduled
        self._response = response
        return response

    def cut(self, reason: str) -> None:
        self.reason = reason
        if self._opening is not None:
            self._opening.reschedule(asyncio.get_running_loop().time())
        elif self._response is not None:
            self._response.close()
