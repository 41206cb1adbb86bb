"""Minimal safetensors reader/writer over raw bytes (no torch, no copies).

The format is an 8-byte little-endian header length, a JSON header (name -> dtype, shape,
data_offsets relative to the data section) and the data. Reading memory-maps the file so
packing copies each tensor exactly once, from the page cache into its block buffer; bf16
needs no special case because nothing is interpreted. Writing streams buffer slices
straight to the file (the data section has no holes, as the format requires).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cascade_worker.blocks.manifest import DTYPES, SAFETENSORS_TO_DTYPE, itemsize

_MAX_HEADER = 100 * 1024 * 1024


@dataclass(frozen=True)
class StoredTensor:
    """A tensor inside a safetensors file: where its bytes are and how to read them."""

    name: str
    dtype: str  # torch dtype name
    shape: tuple[int, ...]
    data: np.ndarray  # uint8 memmap slice of exactly nbytes

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


def read_header(path: Path) -> tuple[int, dict[str, Any]]:
    """(data section offset, header dict) of a safetensors file."""
    with path.open("rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: not a safetensors file (too short)")
        (size,) = struct.unpack("<Q", raw)
        if size > _MAX_HEADER:
            raise ValueError(f"{path}: header of {size} bytes is implausible")
        header = json.loads(f.read(size))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    return 8 + size, header


def open_tensors(path: Path) -> Iterator[StoredTensor]:
    """Tensors of one file, as read-only uint8 memmap views (no data is read yet)."""
    start, header = read_header(path)
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=start) if _has_data(header) else None
    for name, info in header.items():
        if name == "__metadata__":
            continue
        code = info["dtype"]
        if code not in SAFETENSORS_TO_DTYPE:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {code}")
        dtype = SAFETENSORS_TO_DTYPE[code]
        shape = tuple(int(d) for d in info["shape"])
        begin, end = (int(x) for x in info["data_offsets"])
        if end - begin != int(np.prod(shape, dtype=np.int64)) * itemsize(dtype):
            raise ValueError(f"{path}: tensor {name!r} offsets do not match its shape")
        view = data[begin:end] if data is not None else np.empty(0, dtype=np.uint8)
        if view.nbytes != end - begin:
            raise ValueError(f"{path}: tensor {name!r} runs past the end of the file")
        yield StoredTensor(name, dtype, shape, view)


def _has_data(header: dict[str, Any]) -> bool:
    return any(
        k != "__metadata__" and v["data_offsets"][1] > v["data_offsets"][0]
        for k, v in header.items()
    )


def model_files(model_dir: Path) -> list[Path]:
    """All *.safetensors files of an HF directory, sorted; ValueError if none."""
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise ValueError(f"{model_dir}: no *.safetensors files")
    return files


def open_model(model_dir: Path) -> dict[str, StoredTensor]:
    """Every tensor of an HF directory by name; a name in two files is a ValueError."""
    tensors: dict[str, StoredTensor] = {}
    for path in model_files(model_dir):
        for tensor in open_tensors(path):
            if tensor.name in tensors:
                raise ValueError(f"{model_dir}: tensor {tensor.name!r} appears twice")
            tensors[tensor.name] = tensor
    return tensors


def write_safetensors(
    path: Path,
    tensors: Iterable[tuple[str, str, tuple[int, ...], Any]],
    metadata: dict[str, str] | None = None,
) -> int:
    """Write (name, dtype, shape, bytes-like) tensors to `path`; returns data bytes."""
    items = list(tensors)
    header: dict[str, Any] = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    for name, dtype, shape, data in items:
        nbytes = memoryview(data).nbytes
        expected = int(np.prod(shape, dtype=np.int64)) * itemsize(dtype)
        if nbytes != expected:
            raise ValueError(f"tensor {name!r}: {nbytes} bytes, shape needs {expected}")
        header[name] = {
            "dtype": DTYPES[dtype][0],
            "shape": list(shape),
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for _, _, _, data in items:
            f.write(memoryview(data).cast("B"))
    return offset
