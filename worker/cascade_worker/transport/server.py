"""A UCX listener that runs one handler task per incoming connection.

The handler owns its connection for its whole life. Whatever goes wrong inside it stays
inside it: a malformed or unexpected frame (`FrameError`) is logged as an error and that
connection is closed; a peer that vanished (`TransportError`) is logged quietly; any
other exception is logged with its traceback. The listener keeps accepting either way,
so one misbehaving client cannot take a worker's data plane down.

UCX listeners bind every local address; `host` is what the server advertises (in a pod
or network namespace that is the pod IP). Port 0 asks UCX for a free port; a fixed port
still held by a previous process is retried for `bind_timeout_s`.

Bounds against a flood: at most `max_connections` at once (more are closed on arrival,
counted in `refused`), and a connection's first frame (its introduction) may be at most
`first_frame_bytes`, so N strangers announcing large frames cost N small buffers. A TCP
connection that does not finish UCX's handshake within `handshake_timeout_s` is shut
(transport/handshakes.py). Every connection refused (over the bound, or an unfinished
handshake) is counted in `refused` and reported to `on_refused` with the reason.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from cascade_worker.transport.endpoint import DEFAULT_PAYLOAD_TIMEOUT_S, Endpoint, TransportError
from cascade_worker.transport.env import ucx
from cascade_worker.transport.frames import FrameCodec, FrameError
from cascade_worker.transport.handshakes import DEFAULT_HANDSHAKE_TIMEOUT_S, HandshakeWatch

log = logging.getLogger(__name__)

F = TypeVar("F")
Handler = Callable[[Endpoint[F]], Awaitable[None]]
# Far above a plan's connections to its leader (one control and a few data connections
# per participant, up to limits.MAX_PLAN_PODS pods), bounded all the same.
DEFAULT_MAX_CONNECTIONS = 8192
FIRST_FRAME_BYTES = 64 * 1024  # a hello/attach/fetch/feed is well under 1 KiB


class Server(Generic[F]):
    """Accepts connections on host:port and hands each to `handler` as an Endpoint."""

    def __init__(
        self,
        handler: Handler[F],
        codec: FrameCodec[F],
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        name: str = "server",
        payload_timeout_s: float = DEFAULT_PAYLOAD_TIMEOUT_S,
        bind_timeout_s: float = 10.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        first_frame_bytes: int = FIRST_FRAME_BYTES,
        handshake_timeout_s: float | None = DEFAULT_HANDSHAKE_TIMEOUT_S,
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        self._handler = handler
        self.max_connections = max_connections
        self.first_frame_bytes = first_frame_bytes
        self.handshake_timeout_s = handshake_timeout_s
        self.on_refused = on_refused
        self._watch: asyncio.Task[None] | None = None
        self.refused = 0  # connections closed on arrival or unfinished handshakes
        self.bind_timeout_s = bind_timeout_s
        self.codec = codec
        self.host = host
        self._port = port
        self.name = name
        self.payload_timeout_s = payload_timeout_s
        self._listener: Any = None
        self._connections: set[Endpoint[F]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.accepted = 0
        self.rejected = 0  # connections closed for a bad frame

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError("server not started")
        return int(self._listener.port)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> Server[F]:
        """Start listening (must run inside the event loop that will serve)."""
        give_up = time.monotonic() + self.bind_timeout_s
        while self._listener is None:
            try:
                self._listener = ucx().create_listener(self._on_connect, port=self._port)
            except ucx().exceptions.UCXError as exc:  # port still held: "Device is busy"
                if self._port == 0 or time.monotonic() > give_up:
                    raise TransportError(f"cannot listen on port {self._port}: {exc}") from exc
                log.warning("%s: port %d busy (%s); retrying", self.name, self._port, exc)
                await asyncio.sleep(0.5)
        if self.handshake_timeout_s is not None:
            watch = HandshakeWatch(
                self.port,
                self.handshake_timeout_s,
                lambda: self.refuse("a UCX handshake not finished in time"),
            )
            self._watch = asyncio.ensure_future(watch.run())
        log.info("%s listening on %s", self.name, self.address)
        return self

    def refuse(self, why: str) -> None:
        """Count a connection refused before any handler saw it."""
        self.refused += 1
        if self.on_refused is not None:
            self.on_refused(why)

    async def _on_connect(self, ucx_ep: Any) -> None:
        ep = Endpoint(ucx_ep, self.codec, peer="client", payload_timeout_s=self.payload_timeout_s)
        if len(self._connections) >= self.max_connections:
            self.refuse(f"over {self.max_connections} connections open")
            log.warning(
                "%s: %d connections open; refusing another", self.name, self.max_connections
            )
            await ep.close()
            return
        ep.first_frame_bytes = self.first_frame_bytes
        self.accepted += 1
        self._connections.add(ep)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._handler(ep)
        except FrameError as exc:
            self.rejected += 1
            log.error("%s: closing connection after bad frame: %s", self.name, exc)
        except TransportError as exc:
            log.info("%s: connection ended: %s", self.name, exc)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("%s: connection handler failed; closing that connection", self.name)
        finally:
            self._connections.discard(ep)
            if task is not None:
                self._tasks.discard(task)
            await ep.close()

    @property
    def listening(self) -> bool:
        return self._listener is not None

    async def drop_connections(self) -> None:
        """Drop every open connection and wait for their handlers; keep listening."""
        for ep in list(self._connections):
            ep.abort()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)

    async def close(self) -> None:
        """Stop listening and drop every open connection."""
        await self.drop_connections()
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._listener is not None:
            # UCX retires a finished handler one loop turn later; closing before that logs
            # a spurious "handlers still alive" warning.
            for _ in range(100):
                if not self._listener.active_clients:
                    break
                await asyncio.sleep(0.005)
            self._listener.close()
            self._listener = None
