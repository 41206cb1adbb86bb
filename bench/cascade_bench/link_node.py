"""One end of the single-link check: move N bytes from one pod to another, plain TCP or
bare ucxx, and record when the receiver holds the last byte.

The connection is made before the ready signal, so only the transfer is timed. Run as
`python -m cascade_bench.link_node {send,recv} ...` inside a pod's namespace.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import time
from pathlib import Path

import numpy as np

from cascade_bench import xfer
from cascade_bench.nodeio import result_doc, write_json
from cascade_bench.procs import await_start

CONNECT_TRIES = 200


def _connect(host: str, port: int) -> socket.socket:
    for _ in range(CONNECT_TRIES):
        try:
            return socket.create_connection((host, port), timeout=5)
        except OSError:
            time.sleep(0.05)
    raise ConnectionError(f"cannot reach {host}:{port}")


def _finish(args: argparse.Namespace, done_at: float, nbytes: int) -> None:
    start = float(args.start.read_text())
    t = done_at - start
    write_json(args.result, result_doc(args.name, {0: t}, t, [], nbytes, start))


def socket_recv(args: argparse.Namespace, buf: np.ndarray) -> None:
    with socket.create_server((args.host, args.port)) as server:
        args.ready.touch()
        conn, _ = server.accept()
        with conn:
            xfer.socket_recv(conn, buf)
            _finish(args, time.time(), buf.nbytes)


def socket_send(args: argparse.Namespace, buf: np.ndarray) -> None:
    with _connect(args.host, args.port) as conn:
        conn.settimeout(None)
        args.ready.touch()
        await_start(args.start)
        xfer.socket_send(conn, buf)
        conn.shutdown(socket.SHUT_WR)
        conn.recv(1)  # the receiver closes once it has everything


async def ucxx_recv(args: argparse.Namespace, buf: np.ndarray) -> None:
    import ucxx

    finished = asyncio.Event()

    async def handler(ep: object) -> None:
        await xfer.ucxx_recv(ep, buf)
        _finish(args, time.time(), buf.nbytes)
        finished.set()

    listener = ucxx.create_listener(handler, port=args.port)
    args.ready.touch()
    await finished.wait()
    listener.close()


async def ucxx_send(args: argparse.Namespace, buf: np.ndarray) -> None:
    import ucxx

    ep = None
    for _ in range(CONNECT_TRIES):
        try:
            ep = await ucxx.create_endpoint(args.host, args.port)
            break
        except Exception:  # refused until the listener is up
            await asyncio.sleep(0.05)
    if ep is None:
        raise ConnectionError(f"cannot reach {args.host}:{args.port}")
    args.ready.touch()
    await asyncio.to_thread(await_start, args.start)
    await xfer.ucxx_send(ep, buf)
    await asyncio.sleep(1.0)  # let the receiver drain before the endpoint goes away
    await ep.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("role", choices=("send", "recv"))
    p.add_argument("--kind", choices=("socket", "ucxx"), default="socket")
    p.add_argument("--name", required=True)
    p.add_argument("--host", required=True, help="the receiver's address")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bytes", type=int, required=True)
    p.add_argument("--ready", type=Path, required=True)
    p.add_argument("--start", type=Path, required=True)
    p.add_argument("--result", type=Path, required=True)
    args = p.parse_args()
    buf = np.ones(args.bytes, dtype=np.uint8)  # touched: no page faults on the clock
    if args.kind == "socket":
        (socket_send if args.role == "send" else socket_recv)(args, buf)
    else:
        asyncio.run((ucxx_send if args.role == "send" else ucxx_recv)(args, buf))


if __name__ == "__main__":
    main()
