"""Half-open connections on a UCX listener (issue 34, item 5): TCP connections that never
finish UCX's handshake are shut after the bound and each is counted as refused, while a
peer that connects properly, before and after, is served; a port with nothing served
counts its refusals too."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest
from waiting import until

from cascade_protocol.peer_auth import MULTICAST
from cascade_worker.access.refusals import REFUSED, count
from cascade_worker.multicast.frames import CODEC, Attach, FrameT
from cascade_worker.transport.endpoint import Endpoint, TransportError
from cascade_worker.transport.handshakes import port_sockets
from cascade_worker.transport.pool import EndpointPool
from cascade_worker.transport.server import Server
from cascade_worker.transport.shared import SharedServer

pytestmark = [pytest.mark.ucx, pytest.mark.timeout(120)]

HALF_OPEN = 50
BOUND_S = 1.0


async def echo_frames(ep: Endpoint[FrameT]) -> None:
    while True:
        await ep.send_frame(await ep.recv_frame())


def peer_closed(s: socket.socket) -> bool:
    s.settimeout(0.01)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_unfinished_handshakes_are_shut_after_the_bound_and_counted() -> None:
    reasons: list[str] = []

    async def go() -> None:
        server: Server[FrameT] = Server(
            echo_frames, CODEC, "127.0.0.1", 0, name="victim",
            handshake_timeout_s=BOUND_S, on_refused=reasons.append,
        )  # fmt: skip
        await server.start()
        pool = EndpointPool(CODEC, connect_timeout_s=10)
        raw: list[socket.socket] = []
        try:
            before = await pool.get(server.address, "before")
            await before.send_frame(Attach(node="b"))
            assert await before.recv_frame(timeout=10) == Attach(node="b")
            start = time.monotonic()
            for i in range(HALF_OPEN):
                s = socket.create_connection(("127.0.0.1", server.port))
                if i % 2:
                    s.send(b"\x00\x01")  # a few bytes of a request, never the rest
                raw.append(s)
            await until(lambda: len(port_sockets(server.port)) >= HALF_OPEN, 10)
            await until(lambda: all(peer_closed(s) for s in raw), 15)
            took = time.monotonic() - start
            print(f"{HALF_OPEN} half-open connections shut after {took:.1f} s")
            assert took >= BOUND_S
            await until(lambda: server.refused >= HALF_OPEN, 5)
            assert set(reasons) == {"a UCX handshake not finished in time"}
            # The properly connected peer was left alone, and a new one is served.
            await before.send_frame(Attach(node="b2"))
            assert await before.recv_frame(timeout=10) == Attach(node="b2")
            after = await pool.get(server.address, "after")
            await after.send_frame(Attach(node="a"))
            assert await after.recv_frame(timeout=10) == Attach(node="a")
            await until(lambda: len(port_sockets(server.port)) <= 2, 10)
        finally:
            for s in raw:
                s.close()
            await pool.close()
            await server.close()

    asyncio.run(go())


def test_a_port_with_nothing_served_counts_its_refusals() -> None:
    async def go() -> None:
        port: SharedServer[FrameT] = SharedServer(
            CODEC, "127.0.0.1", 0, name="data", on_refused=lambda why: count(MULTICAST, why)
        )
        lease = await port.lend(echo_frames).start()
        await lease.close()  # the port stays bound, nothing is served on it
        pool = EndpointPool(CODEC, connect_timeout_s=10)
        before = REFUSED.total(MULTICAST)
        try:
            ep = await pool.get(lease.address, "stranger")
            with pytest.raises(TransportError):
                await ep.send_frame(Attach(node="s"))
                await ep.recv_frame(timeout=5)
            await until(lambda: REFUSED.total(MULTICAST) == before + 1, 10)
            assert port.server.refused == 1
        finally:
            await pool.close()
            await port.close()

    asyncio.run(go())
