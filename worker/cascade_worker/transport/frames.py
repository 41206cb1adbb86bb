"""Typed control frames: an 8-byte length header, then a JSON payload (two UCX messages).

A frame type is a pydantic model with a literal `kind` field; a protocol is a
discriminated union of such models. The codec is pure (no I/O) so the rules that decide
when a connection is misbehaving are unit-tested without a network:

- the header is an unsigned little-endian 64-bit payload length; 0 or more than
  `max_bytes` is a `FrameError` (a peer must not make us allocate gigabytes);
- the payload must be valid JSON of a known `kind` that validates; anything else is a
  `FrameError`.

A `FrameError` means "close this connection and log it": the server keeps serving others.
"""

from __future__ import annotations

import struct
from typing import Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

HEADER = struct.Struct("<Q")
HEADER_BYTES = HEADER.size
# Control frames are small; the largest is a model manifest (tensor table), well below this.
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024

F = TypeVar("F")


class FrameError(Exception):
    """A malformed, oversize or unexpected frame: the connection it came on is unusable."""


class FrameCodec(Generic[F]):
    """Encodes frames of one protocol (a discriminated union) and validates what arrives."""

    def __init__(self, adapter: TypeAdapter[F], max_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_bytes <= 0:
            raise ValueError("max_bytes must be positive")
        self._adapter = adapter
        self.max_bytes = max_bytes

    def encode(self, frame: F) -> tuple[bytes, bytes]:
        """(header, payload) for one frame; FrameError if it is too large to send."""
        payload = self._adapter.dump_json(frame, by_alias=True)
        if len(payload) > self.max_bytes:
            raise FrameError(f"frame of {len(payload)} bytes exceeds limit {self.max_bytes}")
        return HEADER.pack(len(payload)), payload

    def payload_length(self, header: bytes | bytearray | memoryview) -> int:
        """Validated payload length from a received header."""
        if len(header) != HEADER_BYTES:
            raise FrameError(f"frame header must be {HEADER_BYTES} bytes, got {len(header)}")
        (length,) = HEADER.unpack(bytes(header))
        if length == 0:
            raise FrameError("empty frame")
        if length > self.max_bytes:
            raise FrameError(f"frame length {length} exceeds limit {self.max_bytes}")
        return int(length)

    def decode(self, payload: bytes | bytearray | memoryview) -> F:
        """The frame in `payload`; FrameError for bad JSON, unknown kind or bad fields."""
        try:
            return self._adapter.validate_json(bytes(payload))
        except ValidationError as exc:
            errors = exc.errors()
            # Name the field (loc[0] is the union member's kind): which field of which
            # frame a peer got wrong is what a log reader needs.
            where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
            detail = f"{where or 'frame'}: {errors[0]['msg']}" if errors else str(exc)
            raise FrameError(f"invalid frame ({exc.error_count()} errors): {detail}") from None
