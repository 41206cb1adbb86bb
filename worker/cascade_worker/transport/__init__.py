"""UCX transport (ucxx): typed control frames and zero-copy chunked buffer transfers.

One module family for every bulk byte mover in the worker: weight blocks now, engine
activations later. env.py sets the UCX defaults, frames.py is the pure frame codec,
buffers.py flattens CPU/GPU buffers, endpoint.py/server.py/pool.py do the I/O, bench.py
measures loopback throughput against a plain socket.
"""

from cascade_worker.transport.buffers import DEFAULT_CHUNK_BYTES, byte_view, chunk_ranges
from cascade_worker.transport.endpoint import Endpoint, TransportError
from cascade_worker.transport.env import configure_ucx_env
from cascade_worker.transport.frames import FrameCodec, FrameError
from cascade_worker.transport.pool import EndpointPool, parse_address
from cascade_worker.transport.server import Server

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "Endpoint",
    "EndpointPool",
    "FrameCodec",
    "FrameError",
    "Server",
    "TransportError",
    "byte_view",
    "chunk_ranges",
    "configure_ucx_env",
    "parse_address",
]
