"""One UCX connection: typed control frames plus zero-copy, chunked buffer transfers.

Everything on a connection travels on one UCX tag, so messages match in the order they
were sent: a protocol sends a frame announcing a buffer, then the buffer's chunks, then
the next frame, and the peer posts receives in that same order. Both sides must cut a
buffer into the same chunks (protocols carry the chunk size in the announcing frame).

Chunking is what lets a forwarder relay chunk i downstream while chunk i+1 is still
arriving: `send_buffer` takes a `ready(i)` coroutine that waits until chunk i may go, and
`recv_into` reports each landed chunk through `on_chunk(i)`. Up to `depth` chunk
messages are in flight per call, so the wire never idles between chunks.

Errors: any UCX failure becomes `TransportError` (peer gone, reset, cancelled); a bad
frame is `FrameError`. After either, or after a timeout, the endpoint is closed: a
half-received message would otherwise corrupt the next exchange.

Buffers of abandoned operations are pinned: cancelling the Python side of a UCX request
(a timeout, a killed task) does not retract the request at once, and UCX would write
into (or read from) freed memory if the buffer died with the coroutine.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, TypeVar

import numpy as np

from cascade_worker.transport.buffers import DEFAULT_CHUNK_BYTES, byte_view, chunk_ranges
from cascade_worker.transport.env import ucx
from cascade_worker.transport.frames import HEADER_BYTES, FrameCodec, FrameError

log = logging.getLogger(__name__)

F = TypeVar("F")
T = TypeVar("T")
DEFAULT_DEPTH = 4
# A frame's payload follows its header at once; waiting longer means a broken peer.
DEFAULT_PAYLOAD_TIMEOUT_S = 10.0


# How long a buffer of an abandoned request stays alive: UCX retracts the request when its
# endpoint is aborted, within a few progress rounds; this is generous on purpose.
PIN_SECONDS = 60.0


class TransportError(ConnectionError):
    """The connection failed (peer died, reset, closed, timed out)."""


class _Pins:
    """Keeps buffers of abandoned UCX requests alive until UCX can no longer touch them."""

    def __init__(self) -> None:
        self._held: deque[tuple[float, object]] = deque()

    def hold(self, buffer: object) -> None:
        now = time.monotonic()
        while self._held and self._held[0][0] < now:
            self._held.popleft()
        self._held.append((now + PIN_SECONDS, buffer))

    def __len__(self) -> int:
        return len(self._held)


PINNED = _Pins()


class Endpoint(Generic[F]):
    """A connected peer. Not safe for two concurrent conversations: one user at a time."""

    def __init__(
        self,
        ep: Any,
        codec: FrameCodec[F],
        peer: str = "",
        *,
        payload_timeout_s: float = DEFAULT_PAYLOAD_TIMEOUT_S,
    ) -> None:
        self._ep = ep  # ucxx._lib_async.Endpoint
        self.codec = codec
        self.peer = peer
        self.payload_timeout_s = payload_timeout_s
        self._closed = False
        self.bytes_sent = 0
        self.bytes_received = 0
        # Per-connection protocol bookkeeping (e.g. "this peer has introduced itself").
        self.state: dict[str, object] = {}
        # Largest frame accepted before the first one has been received; None: the
        # codec's. Servers set it: a connection's first frame is its introduction (and
        # proof of the deployment's token), so a stranger cannot make us allocate more.
        self.first_frame_bytes: int | None = None
        self.frames_received = 0

    @property
    def closed(self) -> bool:
        return self._closed or bool(self._ep.closed)

    async def _io(
        self, coro: Coroutine[Any, Any, T], timeout: float | None = None, *, buffer: object
    ) -> T:
        """Run one UCX operation on `buffer`; failures close the endpoint and raise
        TransportError. If it does not finish (error, timeout, cancel), `buffer` is pinned."""
        if self._closed:  # closed here; a peer-closed endpoint may still hold messages
            coro.close()
            raise TransportError(f"endpoint to {self.peer or '?'} is closed")
        finished = False
        try:
            if timeout is None:
                result = await coro
            else:
                result = await asyncio.wait_for(coro, timeout)
            finished = True
            return result
        except TimeoutError as exc:
            self.abort()
            raise TransportError(f"timed out talking to {self.peer or '?'}") from exc
        except ucx().exceptions.UCXMessageTruncatedError as exc:
            # The peer sent a bigger message than the protocol allows here.
            self.abort()
            raise FrameError(f"unexpected oversize message from {self.peer or '?'}") from exc
        except ucx().exceptions.UCXError as exc:
            self.abort()
            raise TransportError(f"{type(exc).__name__} with {self.peer or '?'}: {exc}") from exc
        finally:
            if not finished:
                PINNED.hold(buffer)

    async def send_frame(self, frame: F, timeout: float | None = None) -> None:
        """Send `frame`; past `timeout` (each part) the endpoint is closed: TransportError."""
        for part in self.codec.encode(frame):
            await self._send(np.frombuffer(part, dtype=np.uint8), timeout)

    async def send_raw(self, data: bytes) -> None:
        """Send arbitrary bytes as one message (tests and diagnostics only)."""
        await self._send(np.frombuffer(data, dtype=np.uint8))

    async def _send(self, array: np.ndarray, timeout: float | None = None) -> None:
        await self._io(self._ep.send(array), timeout, buffer=array)

    async def recv_frame(self, timeout: float | None = None) -> F:
        """Next frame; FrameError (and the endpoint closed) if it is malformed."""
        header = np.zeros(HEADER_BYTES, dtype=np.uint8)
        await self._io(self._ep.recv(header), timeout, buffer=header)
        try:
            length = self.codec.payload_length(header.tobytes())
            first = self.first_frame_bytes if self.frames_received == 0 else None
            if first is not None and length > first:
                raise FrameError(f"a first frame of {length} bytes; at most {first} before it")
            payload = np.empty(length, dtype=np.uint8)
            await self._io(self._ep.recv(payload), self.payload_timeout_s, buffer=payload)
            frame = self.codec.decode(payload.tobytes())
            self.frames_received += 1
            return frame
        except FrameError:
            self.abort()
            raise

    async def send_buffer(
        self,
        array: Any,
        *,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        ready: Callable[[int], Awaitable[None]] | None = None,
        depth: int = DEFAULT_DEPTH,
    ) -> int:
        """Send `array` as chunk messages without copying; `ready(i)` gates chunk i."""
        view = byte_view(array)
        sent = await self._pipeline(view, chunk_bytes, depth, ready, None, send=True)
        self.bytes_sent += sent
        return sent

    async def recv_into(
        self,
        array: Any,
        *,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        on_chunk: Callable[[int], None] | None = None,
        depth: int = DEFAULT_DEPTH,
        timeout: float | None = None,
    ) -> int:
        """Receive straight into the preallocated `array`; on_chunk(i) after chunk i lands.

        `timeout` bounds the wait for each chunk (a stalled peer), not the whole buffer.
        """
        view = byte_view(array, writable=True)
        got = await self._pipeline(view, chunk_bytes, depth, None, on_chunk, timeout=timeout)
        self.bytes_received += got
        return got

    async def _pipeline(
        self,
        view: Any,
        chunk_bytes: int,
        depth: int,
        ready: Callable[[int], Awaitable[None]] | None,
        on_chunk: Callable[[int], None] | None,
        *,
        send: bool = False,
        timeout: float | None = None,
    ) -> int:
        ranges = chunk_ranges(len(view), chunk_bytes)  # lazy: a peer picks chunk_bytes
        op = self._ep.send if send else self._ep.recv
        inflight: deque[tuple[int, asyncio.Task[Any]]] = deque()
        chunks: dict[int, Any] = {}
        done = 0

        async def finish_oldest() -> None:
            nonlocal done
            index, task = inflight.popleft()
            await self._io(_join(task), timeout, buffer=chunks.pop(index))
            done += ranges[index][1] - ranges[index][0]
            if on_chunk is not None:
                on_chunk(index)

        try:
            for index, (start, stop) in enumerate(ranges):
                if ready is not None:
                    await ready(index)
                if self.closed:
                    raise TransportError(f"endpoint to {self.peer or '?'} is closed")
                # Tasks start in creation order, so UCX sees the chunks posted in order.
                chunks[index] = view[start:stop]
                inflight.append((index, asyncio.ensure_future(op(chunks[index]))))
                await asyncio.sleep(0)
                while len(inflight) >= depth or (inflight and inflight[0][1].done()):
                    await finish_oldest()
            while inflight:
                await finish_oldest()
        finally:
            for index, task in inflight:
                task.cancel()
                PINNED.hold(chunks[index])
            if inflight:
                self.abort()
        return done

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                await self._ep.close()
            except Exception:  # closing a dead endpoint may raise; it is closed either way
                log.debug("closing endpoint to %s", self.peer, exc_info=True)

    def abort(self) -> None:
        """Close at once without flushing (after errors)."""
        if not self._closed:
            self._closed = True
            try:
                self._ep.abort()
            except Exception:
                log.debug("aborting endpoint to %s", self.peer, exc_info=True)


async def _join(task: asyncio.Task[T]) -> T:
    return await task
