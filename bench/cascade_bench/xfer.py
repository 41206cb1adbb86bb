"""Raw one-to-one transfers, plain TCP sockets and bare ucxx: the baselines the Cascade
transport is compared with (loopback GB/s, one shaped link's rate).

A receive lands in a preallocated buffer (`recv_into` / `ep.recv`), as in the real data
plane, and the clock stops when the receiver holds the last byte. Messages are sent in
`chunk`-sized pieces so one large buffer never needs one huge syscall or UCX message.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import numpy as np

from cascade_worker.transport.env import configure_ucx_env

CHUNK = 4 << 20
# The data plane's UCX defaults (tcp, eager), in this process and so in the nodes it
# starts: a bare `UCX_TLS=tcp` here once kept every bench node off them.
configure_ucx_env()


def socket_recv(conn: socket.socket, buf: np.ndarray) -> None:
    view = memoryview(buf.data).cast("B")
    got = 0
    while got < len(view):
        n = conn.recv_into(view[got:], min(CHUNK, len(view) - got))
        if n == 0:
            raise ConnectionError(f"peer closed after {got} of {len(view)} bytes")
        got += n


def socket_send(conn: socket.socket, buf: np.ndarray) -> None:
    view = memoryview(buf.data).cast("B")
    for off in range(0, len(view), CHUNK):
        conn.sendall(view[off : off + CHUNK])


def socket_loopback(nbytes: int, rounds: int = 3, host: str = "127.0.0.1") -> float:
    """Best of `rounds` seconds to move nbytes between two threads of this process (TCP)."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty(nbytes, dtype=np.uint8)
    done: list[float] = []
    with socket.create_server((host, 0)) as server:
        port = server.getsockname()[1]

        def receive() -> None:
            conn, _ = server.accept()
            with conn:
                for _ in range(rounds):
                    socket_recv(conn, dst)
                    done.append(time.perf_counter())
                    conn.sendall(b"k")

        thread = threading.Thread(target=receive, daemon=True)
        thread.start()
        best = float("inf")
        with socket.create_connection((host, port)) as client:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for _ in range(rounds):  # the first round pays for page faults
                start = time.perf_counter()
                socket_send(client, src)
                if client.recv(1) != b"k":
                    raise RuntimeError("socket loopback: receiver did not finish")
                best = min(best, done[-1] - start)
        thread.join(10)
    return best


async def ucxx_send(ep: object, buf: np.ndarray) -> None:
    for off in range(0, buf.nbytes, CHUNK):
        await ep.send(buf[off : off + CHUNK])  # type: ignore[attr-defined]


async def ucxx_recv(ep: object, buf: np.ndarray) -> None:
    for off in range(0, buf.nbytes, CHUNK):
        await ep.recv(buf[off : off + CHUNK])  # type: ignore[attr-defined]


async def _ucxx_loopback(nbytes: int, rounds: int) -> float:
    import ucxx

    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty(nbytes, dtype=np.uint8)
    finished: asyncio.Queue[float] = asyncio.Queue()

    async def handler(ep: object) -> None:
        for _ in range(rounds):
            await ucxx_recv(ep, dst)
            await finished.put(time.perf_counter())

    listener = ucxx.create_listener(handler, port=0)
    ep = await ucxx.create_endpoint("127.0.0.1", listener.port)
    best = float("inf")
    for _ in range(rounds):  # the first round pays for registration and warm-up
        start = time.perf_counter()
        await ucxx_send(ep, src)
        best = min(best, await finished.get() - start)
    await ep.close()
    listener.close()
    return best


def ucxx_loopback(nbytes: int, rounds: int = 3) -> float:
    """Best of `rounds` seconds to move nbytes over ucxx (tcp) within this process."""
    return asyncio.run(_ucxx_loopback(nbytes, rounds))
