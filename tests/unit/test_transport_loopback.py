"""ucxx over loopback: frames and zero-copy buffers, bad clients, the endpoint pool."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Literal

import numpy as np
import pytest
from pydantic import BaseModel, Field, TypeAdapter

from cascade_worker.transport import Endpoint, EndpointPool, FrameCodec, Server, TransportError
from cascade_worker.transport.bench import measure_loopback_async
from cascade_worker.transport.frames import HEADER

pytestmark = [pytest.mark.timeout(60), pytest.mark.ucx]


class Put(BaseModel):
    kind: Literal["put"] = "put"
    nbytes: int
    chunk_bytes: int


class Sum(BaseModel):
    kind: Literal["sum"] = "sum"
    total: int
    address: int  # where the data landed: proves the receive used the preallocated array


Frame = Annotated[Put | Sum, Field(discriminator="kind")]
CODEC: FrameCodec[Put | Sum] = FrameCodec(TypeAdapter(Frame))


class Summer:
    """Server handler: receive each Put's buffer into one preallocated array, reply Sum."""

    def __init__(self) -> None:
        self.target = np.zeros(1 << 20, dtype=np.uint8)
        self.chunks_seen: list[int] = []

    async def __call__(self, ep: Endpoint[Put | Sum]) -> None:
        while True:
            frame = await ep.recv_frame()
            if not isinstance(frame, Put):
                raise TypeError("unexpected")  # handler bug path: logged, connection closed
            view = self.target[: frame.nbytes]
            await ep.recv_into(
                view, chunk_bytes=frame.chunk_bytes, on_chunk=self.chunks_seen.append
            )
            await ep.send_frame(Sum(total=int(view.sum(dtype=np.int64)), address=view.ctypes.data))


def test_frames_and_buffers_round_trip_zero_copy() -> None:
    async def scenario() -> None:
        summer = Summer()
        server = await Server(summer, CODEC, name="t").start()
        pool: EndpointPool[Put | Sum] = EndpointPool(CODEC)
        try:
            ep = await pool.get(server.address)
            data = np.random.default_rng(1).integers(0, 256, 300_000, dtype=np.uint8)
            for chunk in (64 * 1024, 1 << 20):
                summer.chunks_seen.clear()
                await ep.send_frame(Put(nbytes=data.nbytes, chunk_bytes=chunk))
                sent = await ep.send_buffer(data, chunk_bytes=chunk)
                reply = await ep.recv_frame(timeout=10)
                assert sent == data.nbytes
                assert isinstance(reply, Sum)
                assert reply.total == int(data.sum(dtype=np.int64))
                assert reply.address == summer.target.ctypes.data
                assert np.array_equal(summer.target[: data.nbytes], data)
                assert summer.chunks_seen == list(range(-(-data.nbytes // chunk)))
        finally:
            await pool.close()
            await server.close()

    asyncio.run(scenario())


def test_forwarding_gate_releases_chunks_in_order() -> None:
    async def scenario() -> None:
        summer = Summer()
        server = await Server(summer, CODEC).start()
        pool: EndpointPool[Put | Sum] = EndpointPool(CODEC)
        released: list[int] = []

        async def ready(i: int) -> None:  # a relay waiting for chunk i to arrive upstream
            await asyncio.sleep(0.001)
            released.append(i)

        try:
            ep = await pool.get(server.address)
            data = np.ones(10 * 4096, dtype=np.uint8)
            await ep.send_frame(Put(nbytes=data.nbytes, chunk_bytes=4096))
            await ep.send_buffer(data, chunk_bytes=4096, ready=ready, depth=2)
            reply = await ep.recv_frame(timeout=10)
            assert isinstance(reply, Sum) and reply.total == data.nbytes
            assert released == list(range(10))
        finally:
            await pool.close()
            await server.close()

    asyncio.run(scenario())


def test_garbage_frames_close_only_that_connection(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        summer = Summer()
        server = await Server(summer, CODEC, name="victim").start()
        pool: EndpointPool[Put | Sum] = EndpointPool(CODEC)
        try:
            good = await pool.get(server.address, "good")
            garbage = [
                [b"x" * 100],  # raw bytes bigger than a header
                [b"\xff" * 8],  # absurd length
                [HEADER.pack(11), b"{not json}!"],  # bad JSON
                [HEADER.pack(16), b'{"kind": "boom"}'],  # unknown kind
            ]
            for i, messages in enumerate(garbage):
                bad = await pool.get(server.address, f"bad{i}")
                for m in messages:
                    await bad.send_raw(m)
            for _ in range(200):
                if server.rejected >= len(garbage):
                    break
                await asyncio.sleep(0.01)
            assert server.rejected == len(garbage)
            # The server still serves: an old client and a brand-new one.
            fresh = await pool.get(server.address, "fresh")
            for ep in (good, fresh):
                await ep.send_frame(Put(nbytes=10, chunk_bytes=4))
                await ep.send_buffer(np.full(10, 2, dtype=np.uint8), chunk_bytes=4)
                reply = await ep.recv_frame(timeout=10)
                assert isinstance(reply, Sum) and reply.total == 20
            # An unexpected (well-formed) frame: the handler fails, that connection closes.
            await fresh.send_frame(Sum(total=0, address=0))
            with pytest.raises(TransportError):
                await fresh.recv_frame(timeout=5)
            assert server.accepted == 2 + len(garbage)
        finally:
            await pool.close()
            await server.close()

    with caplog.at_level(logging.ERROR, logger="cascade_worker.transport.server"):
        asyncio.run(scenario())
    assert sum("bad frame" in r.getMessage() for r in caplog.records) == 4


def test_pool_prewarms_reuses_and_reopens() -> None:
    async def scenario() -> None:
        summer = Summer()
        a = await Server(summer, CODEC).start()
        b = await Server(summer, CODEC).start()
        pool: EndpointPool[Put | Sum] = EndpointPool(CODEC, connect_timeout_s=1)
        try:
            errors = await pool.prewarm([a.address, b.address, "127.0.0.1:1"])
            assert set(errors) == {"127.0.0.1:1"}
            assert pool.connects == 2 and pool.cached(a.address)
            first = await pool.get(a.address)
            assert await pool.get(a.address) is first  # reused, no new connection
            assert pool.connects == 2
            first.abort()  # a closed endpoint is evicted and reopened on the next get
            again = await pool.get(a.address)
            assert again is not first and not again.closed and pool.connects == 3
            pool.evict(b.address)
            assert not pool.cached(b.address)
            with pytest.raises(TransportError):
                await pool.get("127.0.0.1:1")
        finally:
            await pool.close()
            await a.close()
            await b.close()

    asyncio.run(scenario())


def test_loopback_benchmark_reports_both_paths() -> None:
    result = asyncio.run(measure_loopback_async(1 << 20, repeats=1))
    assert result["ucxx_gbps"] > 0 and result["socket_gbps"] > 0
