"""Ports for test servers that bind later than the test picks them (UCX listeners, child
processes): chosen below the ephemeral range, so no outgoing connection of this or any
other process can take one between the pick and the bind."""

from __future__ import annotations

import random
import socket


def free_port() -> int:
    """A port in 20000-29999 that is free now."""
    rng = random.Random()
    for _ in range(100):
        port = rng.randrange(20000, 30000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-29999")
