"""Connections on a listener's port that never finish UCX's handshake, shut after a bound.

UCX's TCP connection manager accepts a socket and then waits, with no timeout of its own
(UCX 1.21 has no such setting), for the client's connection request: a client that opens
TCP and sends nothing, or half of it, holds one of the worker's file descriptors for as
long as it likes. The server answers every request it takes (its reply carries UCX's
private data), so a socket on the listening port to which this process has sent nothing
for `bound_s` is a handshake that did not finish. It is shut down (UCX reads the end of
the stream and frees its side) and reported to `on_shut`.

Linux only (/proc and TCP_INFO); elsewhere the watch does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import struct
import time
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

DEFAULT_HANDSHAKE_TIMEOUT_S = 10.0  # a UCX handshake on a cluster network takes milliseconds
_STATES = {"01", "08"}  # ESTABLISHED, CLOSE_WAIT (the client left, UCX did not notice)
_BYTES_ACKED = 120  # offset of tcpi_bytes_acked in struct tcp_info (Linux >= 4.1)


def port_sockets(port: int) -> dict[int, int]:
    """{socket inode: fd} of this process's connected TCP sockets whose local port is
    `port` (the server side of connections to a listener on it)."""
    inodes: set[int] = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in list(f)[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] in _STATES:
                    inodes.add(int(fields[9]))
    found: dict[int, int] = {}
    for fd, target in _socket_fds():
        inode = int(target[len("socket:[") : -1])
        if inode in inodes:
            found[inode] = fd
    return found


def _socket_fds() -> Iterator[tuple[int, str]]:
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError, ValueError):
                target = os.readlink(f"/proc/self/fd/{name}")
                if target.startswith("socket:["):
                    yield int(name), target


def sent_nothing(fd: int) -> bool:
    """Whether this side of the connection on `fd` has had no byte of its own acked."""
    with socket.socket(fileno=os.dup(fd)) as s:
        info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    return len(info) >= _BYTES_ACKED + 8 and struct.unpack_from("Q", info, _BYTES_ACKED)[0] == 0


def shut(fd: int) -> None:
    """End the connection on `fd` without closing the descriptor UCX owns."""
    with socket.socket(fileno=os.dup(fd)) as s, contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)


class HandshakeWatch:
    """Shuts the connections on `port` that have sent nothing back for `bound_s`."""

    def __init__(self, port: int, bound_s: float, on_shut: Callable[[], None]) -> None:
        self.port = port
        self.bound_s = bound_s
        self.on_shut = on_shut
        self._seen: dict[int, float] = {}  # inode -> when first seen silent

    def sweep(self, now: float) -> int:
        """One look at the port; how many connections it shut."""
        sockets = port_sockets(self.port)
        silent: dict[int, float] = {}
        closed = 0
        for inode, fd in sockets.items():
            try:
                if not sent_nothing(fd):
                    continue
            except OSError:  # gone between the listing and the look
                continue
            first = self._seen.get(inode, now)
            if now - first >= self.bound_s:
                shut(fd)
                closed += 1
                self.on_shut()
            else:
                silent[inode] = first
        self._seen = silent
        return closed

    async def run(self) -> None:
        """Sweep every quarter of the bound (at most every second) until cancelled."""
        if not os.path.exists("/proc/self/net/tcp"):
            log.info("no /proc/self/net/tcp: unfinished UCX handshakes are not timed out")
            return
        while True:
            await asyncio.sleep(min(1.0, self.bound_s / 4))
            closed = self.sweep(time.monotonic())
            if closed:
                log.warning(
                    "port %d: shut %d connection(s) that did not finish a UCX handshake in %.0f s",
                    self.port,
                    closed,
                    self.bound_s,
                )
