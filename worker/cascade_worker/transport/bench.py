"""Loopback throughput of the transport next to a plain TCP socket, in the same run.

On loopback both paths measure the CPU (memory copies, syscalls, the event loop), not a
network, so the interesting number is the ratio: the UCX path should not be slower than
a socket doing the same zero-copy receive into a preallocated buffer. Both sides of each
path run in this one process and event loop (UCX's progress thread is its own), each
timed transfer ends with a one-frame acknowledgement, and the best of `repeats` runs is
reported in GB/s (1e9 bytes per second). The emulated-fabric numbers live in bench/.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, Field, TypeAdapter

from cascade_worker.transport.buffers import DEFAULT_CHUNK_BYTES
from cascade_worker.transport.endpoint import Endpoint
from cascade_worker.transport.frames import FrameCodec
from cascade_worker.transport.pool import EndpointPool
from cascade_worker.transport.server import Server


class _Go(BaseModel):
    kind: Literal["go"] = "go"
    nbytes: int


class _Ack(BaseModel):
    kind: Literal["ack"] = "ack"


_Frame = Annotated[_Go | _Ack, Field(discriminator="kind")]
_CODEC: FrameCodec[_Go | _Ack] = FrameCodec(TypeAdapter(_Frame))


async def _ucxx_gbps(nbytes: int, repeats: int, chunk_bytes: int) -> float:
    sink = np.empty(nbytes, dtype=np.uint8)

    async def handler(ep: Endpoint[_Go | _Ack]) -> None:
        while True:
            frame = await ep.recv_frame()
            if isinstance(frame, _Go):
                await ep.recv_into(sink[: frame.nbytes], chunk_bytes=chunk_bytes)
                await ep.send_frame(_Ack())

    server = await Server(handler, _CODEC, name="bench").start()
    pool = EndpointPool(_CODEC)
    source = np.ones(nbytes, dtype=np.uint8)
    best = 0.0
    try:
        ep = await pool.get(server.address)
        for run in range(repeats + 1):  # run 0 warms up (registration, buffers)
            start = time.perf_counter()
            await ep.send_frame(_Go(nbytes=nbytes))
            await ep.send_buffer(source, chunk_bytes=chunk_bytes)
            await ep.recv_frame()
            elapsed = time.perf_counter() - start
            if run:
                best = max(best, nbytes / elapsed / 1e9)
    finally:
        await pool.close()
        await server.close()
    return best


async def _socket_gbps(nbytes: int, repeats: int) -> float:
    loop = asyncio.get_running_loop()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    client.setblocking(False)
    await loop.sock_connect(client, listener.getsockname())
    conn, _ = await loop.sock_accept(listener)
    conn.setblocking(False)
    sink = memoryview(bytearray(nbytes))
    source = np.ones(nbytes, dtype=np.uint8)

    async def receive() -> None:
        got = 0
        while got < nbytes:
            n = await loop.sock_recv_into(conn, sink[got:])
            if n == 0:
                raise ConnectionError("socket closed")
            got += n
        await loop.sock_sendall(conn, b"k")

    best = 0.0
    try:
        for run in range(repeats + 1):
            start = time.perf_counter()
            receiver = asyncio.ensure_future(receive())
            await loop.sock_sendall(client, source.data)
            await receiver
            await loop.sock_recv(client, 1)
            elapsed = time.perf_counter() - start
            if run:
                best = max(best, nbytes / elapsed / 1e9)
    finally:
        for s in (client, conn, listener):
            s.close()
    return best


async def measure_loopback_async(
    nbytes: int, repeats: int = 3, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> dict[str, float]:
    ucxx_gbps = await _ucxx_gbps(nbytes, repeats, chunk_bytes)
    socket_gbps = await _socket_gbps(nbytes, repeats)
    return {
        "ucxx_gbps": ucxx_gbps,
        "socket_gbps": socket_gbps,
        "nbytes": float(nbytes),
        "chunk_bytes": float(chunk_bytes),
    }


def measure_loopback(
    nbytes: int, repeats: int = 3, chunk_bytes: int = DEFAULT_CHUNK_BYTES
) -> dict[str, float]:
    """{"ucxx_gbps", "socket_gbps", ...}: loopback throughput, best of `repeats`."""
    return asyncio.run(measure_loopback_async(nbytes, repeats, chunk_bytes))
