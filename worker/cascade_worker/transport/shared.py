"""One listener per port for a process's whole life, lent to one user at a time.

A worker takes part in many transfers (and pipeline roles) over its life, each on the
same fixed port. Closing a ucxx listener only drops a reference: the port is freed
when the last one is collected, which with the notifier thread (worker processes) can
come after the next user already tried to bind it ("Address already in use"), and a
connection reaching the half-closed listener crashes inside ucxx ("KeyError: 'cb_func'").
So the port is bound once and lent: connections go to the current user's handler; a
user's close drops its connections and keeps the port for the next one.

    port = SharedServer(CODEC, host, 18515, name="data")
    lease = await port.lend(node.handle).start()     # as a Server would
    ...
    await lease.close()                              # the port stays bound
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from cascade_worker.transport.endpoint import Endpoint, TransportError
from cascade_worker.transport.frames import FrameCodec
from cascade_worker.transport.server import Handler, Server

F = TypeVar("F")


class SharedServer(Generic[F]):
    """A listener whose connections go to whoever holds the lease now."""

    def __init__(
        self,
        codec: FrameCodec[F],
        host: str,
        port: int,
        *,
        name: str,
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        self.server: Server[F] = Server(
            self._dispatch, codec, host, port, name=name, on_refused=on_refused
        )
        self._holder: Lease[F] | None = None

    async def _dispatch(self, ep: Endpoint[F]) -> None:
        holder = self._holder
        if holder is None:  # between users: the peer retries or reports the refusal
            self.server.refuse("nothing is served on this port now")
            raise TransportError(f"{self.server.name}: nothing is served on this port now")
        await holder.handler(ep)

    def lend(self, handler: Handler[F]) -> Lease[F]:
        return Lease(self, handler)

    async def close(self) -> None:
        """Unbind the port (the process is ending)."""
        self._holder = None
        await self.server.close()


class Lease(Generic[F]):
    """A user's turn on a SharedServer, with a Server's start/address/close."""

    def __init__(self, shared: SharedServer[F], handler: Handler[F]) -> None:
        self.shared = shared
        self.handler = handler

    async def start(self) -> Lease[F]:
        shared = self.shared
        if shared._holder is not None and shared._holder is not self:
            raise RuntimeError(f"{shared.server.name}: the port is lent to another user")
        shared._holder = self
        if not shared.server.listening:
            await shared.server.start()
        return self

    @property
    def address(self) -> str:
        return self.shared.server.address

    @property
    def port(self) -> int:
        return self.shared.server.port

    async def close(self) -> None:
        """Give the port back: this user's connections end, the port stays bound."""
        if self.shared._holder is self:
            self.shared._holder = None
            await self.shared.server.drop_connections()


def own_or_lent(
    listener: SharedServer[F] | None,
    handler: Handler[F],
    codec: FrameCodec[F],
    host: str,
    port: int,
    name: str,
) -> Server[F] | Lease[F]:
    """`listener`'s port lent to `handler` (a process's long-lived port), else a Server
    of its own on host:port (library use, tests)."""
    if listener is not None:
        return listener.lend(handler)
    return Server(handler, codec, host, port, name=name)
