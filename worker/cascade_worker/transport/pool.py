"""Endpoints opened ahead of a transfer and reused, so connecting is off the critical path.

A worker that will receive from (or forward to) a known set of peers calls
`prewarm(addresses)` while it waits for the start signal; the transfer then finds its
connections already established (UCX connect + peer-info exchange costs milliseconds,
more under load). Endpoints are keyed by (address, channel): one connection carries one
conversation at a time, so a node that talks control and data to the same peer uses two
channels. A closed or failed endpoint is evicted and the next `get` reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Generic, TypeVar

from cascade_worker.transport.endpoint import DEFAULT_PAYLOAD_TIMEOUT_S, Endpoint, TransportError
from cascade_worker.transport.env import ucx
from cascade_worker.transport.frames import FrameCodec

log = logging.getLogger(__name__)

F = TypeVar("F")
DEFAULT_CHANNEL = "data"


def parse_address(address: str) -> tuple[str, int]:
    """("host", port) from "host:port" or "[v6]:port"; ValueError if malformed."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"address {address!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    value = int(port)
    if not 0 < value < 65536:
        raise ValueError(f"port {value} out of range in {address!r}")
    return host, value


class EndpointPool(Generic[F]):
    """Connections to peers by (address, channel), opened once and reused."""

    def __init__(
        self,
        codec: FrameCodec[F],
        *,
        connect_timeout_s: float = 5.0,
        payload_timeout_s: float = DEFAULT_PAYLOAD_TIMEOUT_S,
    ) -> None:
        self.codec = codec
        self.connect_timeout_s = connect_timeout_s
        self.payload_timeout_s = payload_timeout_s
        self._endpoints: dict[tuple[str, str], Endpoint[F]] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self.connects = 0  # how many connections were opened (reuse shows as a low count)

    async def get(self, address: str, channel: str = DEFAULT_CHANNEL) -> Endpoint[F]:
        """A live endpoint to `address` on `channel`, connecting if needed."""
        key = (address, channel)
        ep = self._endpoints.get(key)
        if ep is not None and not ep.closed:
            return ep
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            ep = self._endpoints.get(key)
            if ep is not None and not ep.closed:
                return ep
            self._endpoints.pop(key, None)
            ep = await self._connect(address)
            self._endpoints[key] = ep
            return ep

    async def _connect(self, address: str) -> Endpoint[F]:
        host, port = parse_address(address)
        await self._probe(address, host, port)
        try:
            raw = await asyncio.wait_for(
                ucx().create_endpoint(host, port, connect_timeout=self.connect_timeout_s),
                self.connect_timeout_s + 1.0,
            )
        except (TimeoutError, OSError, ucx().exceptions.UCXError) as exc:
            raise TransportError(f"cannot connect to {address}: {exc!r}") from exc
        self.connects += 1
        return Endpoint(raw, self.codec, peer=address, payload_timeout_s=self.payload_timeout_s)

    async def _probe(self, address: str, host: str, port: int) -> None:
        """Fail fast when nothing listens (a dead peer's port refuses at once).

        ucxx sometimes notices a refused connection only at its connect timeout; a plain
        TCP connect to the listener's port answers immediately, and UCX ignores a socket
        that closes without a connection request.
        """
        try:
            _, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port), self.connect_timeout_s
            )
        except (TimeoutError, OSError) as exc:
            raise TransportError(f"cannot connect to {address}: {exc!r}") from exc
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()

    async def prewarm(
        self, addresses: Iterable[str], channel: str = DEFAULT_CHANNEL
    ) -> dict[str, str]:
        """Open connections to all addresses concurrently; returns {address: error}."""
        targets = sorted(set(addresses))
        results = await asyncio.gather(
            *(self.get(a, channel) for a in targets), return_exceptions=True
        )
        errors: dict[str, str] = {}
        for address, result in zip(targets, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("prewarm %s failed: %s", address, result)
                errors[address] = str(result)
        return errors

    def evict(self, address: str, channel: str | None = None) -> None:
        """Drop (and abort) the endpoint(s) to address; the next get reconnects."""
        for key in [k for k in self._endpoints if k[0] == address and channel in (None, k[1])]:
            self._endpoints.pop(key).abort()

    def abort_all(self) -> None:
        """Drop every endpoint at once without flushing (shutdown after a failure)."""
        endpoints = list(self._endpoints.values())
        self._endpoints.clear()
        for ep in endpoints:
            ep.abort()

    def cached(self, address: str, channel: str = DEFAULT_CHANNEL) -> bool:
        ep = self._endpoints.get((address, channel))
        return ep is not None and not ep.closed

    async def close(self, channel: str | None = None) -> None:
        """Close every endpoint (or only those of `channel`)."""
        keys = [k for k in self._endpoints if channel in (None, k[1])]
        for key in keys:
            ep = self._endpoints.pop(key, None)  # abort_all may run while we await
            if ep is not None:
                await ep.close()
