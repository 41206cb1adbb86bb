"""Tensors on the wire: a `TensorSpec` in the frame, then the raw bytes, zero-copy.

A CPU tensor goes as a flat uint8 numpy view of its storage (no copy, any dtype,
bfloat16 included); a CUDA tensor as itself (UCX reads `__cuda_array_interface__`).
The receiver allocates the tensor first and lets UCX write straight into it.
"""

from __future__ import annotations

from typing import Any

import torch

from cascade_worker.pipeline.frames import CHUNK_BYTES, DTYPE_BYTES, TensorSpec
from cascade_worker.transport.endpoint import Endpoint

DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in DTYPE_BYTES}


def spec_of(tensor: torch.Tensor) -> TensorSpec:
    name = str(tensor.dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"cannot send a {tensor.dtype} tensor; supported: {sorted(DTYPES)}")
    return TensorSpec(dtype=name, shape=tuple(tensor.shape))  # type: ignore[arg-type]


def byte_buffer(tensor: torch.Tensor) -> Any:
    """A flat byte view of a contiguous tensor, for `send_buffer` / `recv_into`."""
    raw = tensor.reshape(-1).view(torch.uint8)
    return raw.numpy() if raw.device.type == "cpu" else raw


def empty(spec: TensorSpec, device: torch.device) -> tuple[torch.Tensor, Any]:
    """(tensor, byte buffer to receive it into) for `spec`."""
    raw = torch.empty(spec.nbytes, dtype=torch.uint8, device=device)
    tensor = raw.view(DTYPES[spec.dtype]).view(spec.shape)
    return tensor, raw.numpy() if device.type == "cpu" else raw


async def send_tensor(ep: Endpoint[Any], tensor: torch.Tensor) -> None:
    """The bytes of `tensor` (whose spec the frame just sent announced)."""
    await ep.send_buffer(byte_buffer(tensor.contiguous()), chunk_bytes=CHUNK_BYTES)


async def recv_tensor(
    ep: Endpoint[Any], spec: TensorSpec, device: torch.device, timeout: float | None = None
) -> torch.Tensor:
    tensor, buffer = empty(spec, device)
    await ep.recv_into(buffer, chunk_bytes=CHUNK_BYTES, timeout=timeout)
    return tensor
