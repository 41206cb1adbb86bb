"""Flat byte views of send/receive buffers, CPU or GPU, without copying.

UCX moves contiguous byte ranges. A block buffer is a 1-D uint8 numpy array on the host,
but the engine will hand over torch tensors, and GPU memory arrives as any object with
`__cuda_array_interface__` (torch CUDA tensors, CuPy arrays). `byte_view` turns either
into a flat byte object whose slices are views too, so a transfer can be cut into chunks
(a forwarder relays chunk i while chunk i+1 is still arriving) with no copy anywhere.

The CUDA path is exercised here only with a fake interface object (no GPU on this
machine); UCX itself accepts the interface and picks cuda_copy/cuda_ipc/GDR transports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, overload

import numpy as np

DEFAULT_CHUNK_BYTES = 256 << 10  # chain relay granularity; 256 KiB measured best on the fabric


class CudaBytes:
    """A contiguous byte range of device memory, exposed as a 1-D uint8 CUDA array."""

    def __init__(self, ptr: int, nbytes: int, readonly: bool, owner: Any) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.readonly = readonly
        self.owner = owner  # keeps the device allocation alive while we use the view

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {
            "shape": (self.nbytes,),
            "typestr": "|u1",
            "data": (self.ptr, self.readonly),
            "strides": None,
            "version": 3,
        }

    def __len__(self) -> int:
        return self.nbytes

    def __getitem__(self, item: slice) -> CudaBytes:
        start, stop, step = item.indices(self.nbytes)
        if step != 1:
            raise ValueError("only contiguous slices of device memory")
        return CudaBytes(self.ptr + start, max(0, stop - start), self.readonly, self.owner)


ByteView = np.ndarray | CudaBytes


def is_cuda(obj: Any) -> bool:
    return hasattr(obj, "__cuda_array_interface__") and not isinstance(obj, np.ndarray)


def _cuda_view(obj: Any, writable: bool) -> CudaBytes:
    iface = obj.__cuda_array_interface__
    shape = tuple(iface["shape"])
    itemsize = np.dtype(iface["typestr"]).itemsize
    nbytes = math.prod(shape) * itemsize
    strides = iface.get("strides")
    if strides is not None:
        expected = []
        acc = itemsize
        for dim in reversed(shape):
            expected.append(acc)
            acc *= dim
        if tuple(reversed(expected)) != tuple(strides) and nbytes > 0:
            raise ValueError("device buffer must be C-contiguous")
    ptr, readonly = iface["data"]
    if writable and readonly:
        raise ValueError("device buffer is read-only")
    return CudaBytes(int(ptr), nbytes, bool(readonly), obj)


def byte_view(obj: Any, writable: bool = False) -> ByteView:
    """A flat uint8 view of `obj` (numpy/torch CPU or CUDA interface); never copies."""
    if is_cuda(obj):
        return _cuda_view(obj, writable)
    arr = np.asarray(obj)
    if not arr.flags.c_contiguous:
        raise ValueError("buffer must be C-contiguous")
    if writable and not arr.flags.writeable:
        raise ValueError("receive buffer is read-only")
    return arr.reshape(-1).view(np.uint8)


class ChunkRanges(Sequence[tuple[int, int]]):
    """Half-open byte ranges of at most chunk_bytes covering nbytes, computed on access:
    the chunk size comes from a peer's frame, and a 1-byte chunk of a 1 GB block must
    not become a list of a billion tuples."""

    def __init__(self, nbytes: int, chunk_bytes: int) -> None:
        if chunk_bytes <= 0:
            raise ValueError("chunk_bytes must be positive")
        self.nbytes, self.chunk_bytes = nbytes, chunk_bytes
        self._starts = range(0, nbytes, chunk_bytes)

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, index: slice) -> list[tuple[int, int]]: ...
    def __getitem__(self, index: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        start = self._starts[index]
        return start, min(start + self.chunk_bytes, self.nbytes)


def chunk_ranges(nbytes: int, chunk_bytes: int) -> ChunkRanges:
    """Half-open byte ranges of at most chunk_bytes covering nbytes (none if nbytes is 0)."""
    return ChunkRanges(nbytes, chunk_bytes)


def num_chunks(nbytes: int, chunk_bytes: int) -> int:
    return len(chunk_ranges(nbytes, chunk_bytes))
