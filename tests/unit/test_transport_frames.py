"""Pure transport pieces: frame codec limits, byte views (CPU, torch, CUDA interface), env."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
import pytest
import torch
from pydantic import BaseModel, Field, TypeAdapter

from cascade_worker.transport.buffers import CudaBytes, byte_view, chunk_ranges, num_chunks
from cascade_worker.transport.env import TCP_DEFAULTS, UCX_DEFAULTS, configure_ucx_env
from cascade_worker.transport.frames import HEADER, FrameCodec, FrameError
from cascade_worker.transport.pool import parse_address


class Ping(BaseModel):
    kind: Literal["ping"] = "ping"
    n: int


class Pong(BaseModel):
    kind: Literal["pong"] = "pong"
    text: str = ""


Frame = Annotated[Ping | Pong, Field(discriminator="kind")]
CODEC: FrameCodec[Ping | Pong] = FrameCodec(TypeAdapter(Frame), max_bytes=1024)


def test_encode_decode_round_trip() -> None:
    header, payload = CODEC.encode(Ping(n=7))
    assert CODEC.payload_length(header) == len(payload)
    assert CODEC.decode(payload) == Ping(n=7)
    assert isinstance(CODEC.decode(CODEC.encode(Pong(text="x"))[1]), Pong)


@pytest.mark.parametrize(
    ("header", "why"),
    [
        (HEADER.pack(0), "empty"),
        (HEADER.pack(1025), "exceeds"),
        (b"\xff" * 8, "exceeds"),
        (b"\x01\x00", "8 bytes"),
    ],
)
def test_bad_headers_are_frame_errors(header: bytes, why: str) -> None:
    with pytest.raises(FrameError, match=why):
        CODEC.payload_length(header)


@pytest.mark.parametrize(
    "payload",
    [b"{not json", b'{"kind": "nope"}', b'{"kind": "ping"}', b'{"kind": "ping", "n": "x"}', b"[]"],
)
def test_bad_payloads_are_frame_errors(payload: bytes) -> None:
    with pytest.raises(FrameError, match="invalid frame"):
        CODEC.decode(payload)


def test_oversize_frames_are_refused_on_send() -> None:
    with pytest.raises(FrameError, match="exceeds"):
        CODEC.encode(Pong(text="x" * 2000))


def test_chunk_ranges_cover_exactly() -> None:
    assert list(chunk_ranges(10, 4)) == [(0, 4), (4, 8), (8, 10)]
    assert list(chunk_ranges(8, 4)) == [(0, 4), (4, 8)]
    assert list(chunk_ranges(0, 4)) == []
    assert chunk_ranges(10, 4)[-1] == (8, 10) and chunk_ranges(10, 4)[1:] == [(4, 8), (8, 10)]
    # A peer's 1-byte chunks of a terabyte are counted, not listed.
    assert len(chunk_ranges(1 << 40, 1)) == 1 << 40
    assert num_chunks(1 << 20, 1 << 18) == 4
    with pytest.raises(ValueError):
        chunk_ranges(10, 0)


def test_byte_view_is_zero_copy_for_numpy_and_torch() -> None:
    arr = np.arange(16, dtype=np.float32)
    view = byte_view(arr, writable=True)
    assert isinstance(view, np.ndarray)
    assert view.dtype == np.uint8 and view.nbytes == 64
    view[:4] = 0
    assert arr[0] == 0.0  # same memory
    t = torch.ones(8, dtype=torch.float16)
    tv = byte_view(t.numpy(), writable=True)
    assert isinstance(tv, np.ndarray)
    tv[:2] = 0
    assert t[0].item() == 0.0
    with pytest.raises(ValueError, match="contiguous"):
        byte_view(np.arange(10)[::2])
    ro = np.arange(4, dtype=np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        byte_view(ro, writable=True)


class FakeCuda:
    """An object shaped like a CUDA tensor: only __cuda_array_interface__ (no GPU here)."""

    def __init__(self, shape: tuple[int, ...], typestr: str, ptr: int, readonly: bool = False):
        self.__cuda_array_interface__: dict[str, Any] = {
            "shape": shape,
            "typestr": typestr,
            "data": (ptr, readonly),
            "strides": None,
            "version": 3,
        }


def test_cuda_interface_becomes_flat_bytes_with_sliceable_views() -> None:
    dev = FakeCuda((4, 8), "<f2", ptr=0x1000)
    view = byte_view(dev, writable=True)
    assert isinstance(view, CudaBytes)
    assert len(view) == 64
    part = view[16:48]
    iface = part.__cuda_array_interface__
    assert iface["data"] == (0x1000 + 16, False)
    assert iface["shape"] == (32,) and iface["typestr"] == "|u1"
    assert part.owner is dev  # the allocation stays referenced
    with pytest.raises(ValueError, match="read-only"):
        byte_view(FakeCuda((4,), "<f4", 0x2000, readonly=True), writable=True)


def test_env_defaults_respect_user_settings() -> None:
    env: dict[str, str] = {"UCX_TLS": "rc,cuda_copy"}
    applied = configure_ucx_env(env)
    assert env["UCX_TLS"] == "rc,cuda_copy"  # the user's choice wins
    assert "UCX_TLS" not in applied
    assert env["UCX_WARN_UNUSED_ENV_VARS"] == "n"
    assert "UCX_RNDV_SCHEME" not in env  # tuned for our TCP default only
    assert "UCX_RNDV_THRESH" not in env
    fresh: dict[str, str] = {}
    configure_ucx_env(fresh)
    assert fresh == UCX_DEFAULTS | TCP_DEFAULTS and "tcp" in fresh["UCX_TLS"]


def test_parse_address() -> None:
    assert parse_address("198.18.0.2:29700") == ("198.18.0.2", 29700)
    assert parse_address("[::1]:80") == ("::1", 80)
    for bad in ("nohost", "h:", ":80", "h:0", "h:99999", "h:x"):
        with pytest.raises(ValueError):
            parse_address(bad)
