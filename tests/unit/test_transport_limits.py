"""A flood of strangers costs a worker little (issue 13, acceptance 3): 500 connections
each announcing a 64 MiB frame are closed before any payload buffer is allocated, the
worker's memory stays far below one such frame, and a server over its connection cap
closes new connections on arrival while the ones it holds keep working."""

from __future__ import annotations

import asyncio
import contextlib
import os

import pytest
from waiting import until

from cascade_worker.multicast.frames import CODEC, Attach, FrameT
from cascade_worker.transport.endpoint import Endpoint, TransportError
from cascade_worker.transport.frames import DEFAULT_MAX_FRAME_BYTES, HEADER, FrameError
from cascade_worker.transport.pool import EndpointPool
from cascade_worker.transport.server import Server

pytestmark = [pytest.mark.ucx, pytest.mark.timeout(300)]

FLOOD = 500
MIB = 1024 * 1024


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def echo_frames(ep: Endpoint[FrameT]) -> None:
    """A server conversation: read frames until the peer goes (as BlockServer does)."""
    while True:
        frame = await ep.recv_frame()
        await ep.send_frame(frame)


def test_announced_frames_are_refused_before_allocation_and_memory_stays_bounded() -> None:
    first = int(os.environ.get("FIRST_FRAME_BYTES", "0")) or None  # a check of the check

    async def go() -> None:
        kwargs = {} if first is None else {"first_frame_bytes": first}
        server: Server[FrameT] = Server(echo_frames, CODEC, "127.0.0.1", 0, name="victim", **kwargs)
        await server.start()
        pool = EndpointPool(CODEC, connect_timeout_s=10)
        try:
            # Warm the transport (UCX's first connection allocates its pools).
            warm = await pool.get(server.address, "warm")
            await warm.send_frame(Attach(node="w"))
            assert await warm.recv_frame(timeout=10) == Attach(node="w")
            before = rss_bytes()
            header = HEADER.pack(DEFAULT_MAX_FRAME_BYTES)  # 64 MiB announced
            payload = b"\x01" * MIB
            assert DEFAULT_MAX_FRAME_BYTES == 64 * MIB
            eps = []
            for i in range(FLOOD):
                ep = await pool.get(server.address, f"flood-{i}")
                await ep.send_raw(header)
                with contextlib.suppress(TransportError):  # closed already: the point
                    await ep.send_raw(payload)  # and start on it, as a real flood would
                eps.append(ep)
            await until(lambda: server.rejected >= FLOOD, 120)
            grown = rss_bytes() - before
            print(f"RSS grew {grown / MIB:.1f} MiB over {FLOOD} connections")
            assert grown < 64 * MIB  # not even one announced frame, let alone 500
            for ep in eps[:5]:  # each was closed by the server
                with pytest.raises((TransportError, FrameError)):
                    await ep.recv_frame(timeout=5)
            # The connection that introduced itself properly still works.
            await warm.send_frame(Attach(node="w2"))
            assert await warm.recv_frame(timeout=10) == Attach(node="w2")
        finally:
            await pool.close()
            await server.close()

    asyncio.run(go())


def test_connections_over_the_cap_are_closed_on_arrival() -> None:
    async def go() -> None:
        server: Server[FrameT] = Server(
            echo_frames, CODEC, "127.0.0.1", 0, name="capped", max_connections=3
        )
        await server.start()
        pool = EndpointPool(CODEC, connect_timeout_s=10)
        try:
            held = [await pool.get(server.address, f"c{i}") for i in range(3)]
            for i, ep in enumerate(held):
                await ep.send_frame(Attach(node=f"n{i}"))
                assert (await ep.recv_frame(timeout=10)).kind == "attach"
            extra = await pool.get(server.address, "extra")
            await until(lambda: server.refused == 1, 30)
            with pytest.raises((TransportError, FrameError)):
                await extra.send_frame(Attach(node="x"))
                await extra.recv_frame(timeout=5)
            await held[0].send_frame(Attach(node="again"))  # the held ones still work
            assert await held[0].recv_frame(timeout=10) == Attach(node="again")
        finally:
            await pool.close()
            await server.close()

    asyncio.run(go())
