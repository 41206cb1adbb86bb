"""Pack an HF checkpoint into contiguous block buffers, and view them back as tensors.

One buffer per block means one send/receive per block on the wire (or a few chunked
ones), one checksum,
    strong_hash, and one allocation on the receiver, made before any byte arrives.
Tensors sit at 64-byte-aligned offsets so viewing them as any dtype is legal and fast.
Buffers are plain numpy uint8 arrays (ucxx sends them zero-copy; bf16 needs no numpy
dtype); `unpack_block` views them through torch without copying. Packing copies each
tensor out of its memory-mapped file, so that copy is where a storage rate is applied
(pacing.py): the result says how many bytes were read and how long it took.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cascade_worker.blocks.manifest import (
    BlockManifest,
    ModelManifest,
    TensorEntry,
    align_up,
    checksum,
    itemsize,
    model_digest,
    strong_hash,
)
from cascade_worker.blocks.pacing import Pacer, StorageRead
from cascade_worker.blocks.partition import assign_tensors, partition_layers
from cascade_worker.blocks.safetensors_io import StoredTensor, open_model

log = logging.getLogger(__name__)

# Text files kept in ModelManifest.extras when packing (tokenizer, generation config...).
_EXTRA_SKIP = {"config.json", "model.safetensors.index.json"}
_EXTRA_MAX_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True)
class PackedModel:
    manifest: ModelManifest
    buffers: list[np.ndarray]  # one uint8 array per block, index = block index
    # The checkpoint's tensor bytes read and the seconds the whole pack took: the
    # worker reports them as its last load (how fast "from storage" really was).
    read: StorageRead | None = None


def layout(entries: Sequence[tuple[str, str, tuple[int, ...]]]) -> tuple[list[TensorEntry], int]:
    """Aligned offsets for (name, dtype, shape) in order; returns entries and buffer size."""
    out: list[TensorEntry] = []
    offset = 0
    for name, dtype, shape in entries:
        nbytes = int(np.prod(shape, dtype=np.int64)) * itemsize(dtype)
        offset = align_up(offset)
        out.append(TensorEntry(name=name, dtype=dtype, shape=shape, offset=offset, nbytes=nbytes))
        offset += nbytes
    return out, align_up(offset)


def read_config(model_dir: Path) -> dict[str, Any]:
    config = json.loads((model_dir / "config.json").read_text())
    if not isinstance(config, dict) or "num_hidden_layers" not in config:
        raise ValueError(f"{model_dir}/config.json: no num_hidden_layers")
    return config


def read_extras(model_dir: Path) -> dict[str, str]:
    """Small UTF-8 side files of the checkpoint (tokenizer etc.), by file name."""
    extras: dict[str, str] = {}
    for path in sorted(model_dir.iterdir()):
        if not path.is_file() or path.name in _EXTRA_SKIP or path.suffix == ".safetensors":
            continue
        if path.stat().st_size > _EXTRA_MAX_BYTES:
            log.warning(
                "not keeping %s in the manifest: larger than %d bytes", path, _EXTRA_MAX_BYTES
            )
            continue
        try:
            extras[path.name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            log.warning("not keeping %s in the manifest: not UTF-8 text", path)
    return extras


def pack_model(model_dir: Path, blocks: int, *, rate_mbit: float | None = None) -> PackedModel:
    """Cut the checkpoint in `model_dir` into `blocks` packed, checksummed buffers
    (at most one per decoder layer: a deployment's multicast.blocks applies to models of
    every depth, so a shallower model gets fewer, whole-layer blocks). `rate_mbit` caps
    how fast the tensors are read from storage (None: as fast as the disk goes)."""
    pacer = Pacer(rate_mbit)
    config = read_config(model_dir)
    num_layers = int(config["num_hidden_layers"])
    arch = str((config.get("architectures") or [config.get("model_type", "unknown")])[0])
    stored = open_model(model_dir)
    ranges = partition_layers(num_layers, min(blocks, num_layers))
    block_manifests: list[BlockManifest] = []
    buffers: list[np.ndarray] = []
    for index, (names, (start, end)) in enumerate(
        zip(assign_tensors(list(stored), ranges), ranges, strict=True)
    ):
        tensors = [stored[n] for n in names]
        entries, nbytes = layout([(t.name, t.dtype, t.shape) for t in tensors])
        buffer = _fill(entries, tensors, nbytes, pacer)
        block_manifests.append(
            BlockManifest(
                index=index,
                layer_start=start,
                layer_end=end,
                nbytes=nbytes,
                checksum=checksum(buffer),
                sha256=strong_hash(buffer),
                tensors=entries,
            )
        )
        buffers.append(buffer)
    extras = read_extras(model_dir)
    manifest = ModelManifest(
        digest=model_digest(arch, num_layers, config, block_manifests, extras),
        arch=arch,
        num_layers=num_layers,
        config=config,
        blocks=block_manifests,
        extras=extras,
    )
    return PackedModel(manifest, buffers, pacer.report())


def _fill(
    entries: list[TensorEntry], tensors: list[StoredTensor], nbytes: int, pacer: Pacer
) -> np.ndarray:
    buffer = np.zeros(nbytes, dtype=np.uint8)  # zeros: padding bytes are deterministic
    for entry, tensor in zip(entries, tensors, strict=True):
        pacer.copy(buffer[entry.offset : entry.offset + entry.nbytes], tensor.data)
    return buffer


def torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown torch dtype {name!r}")
    return dtype


def unpack_block(manifest: BlockManifest, buffer: np.ndarray) -> dict[str, torch.Tensor]:
    """Tensors of one block as torch views of `buffer` (no copy; writes show through)."""
    if buffer.dtype != np.uint8 or buffer.ndim != 1 or buffer.nbytes != manifest.nbytes:
        raise ValueError(
            f"block {manifest.index}: need a 1-D uint8 buffer of {manifest.nbytes} bytes, "
            f"got {buffer.dtype} {buffer.shape}"
        )
    if not buffer.flags.c_contiguous:
        raise ValueError(f"block {manifest.index}: buffer is not contiguous")
    base = torch.from_numpy(buffer)
    out: dict[str, torch.Tensor] = {}
    for entry in manifest.tensors:
        raw = base[entry.offset : entry.offset + entry.nbytes]
        out[entry.name] = raw.view(torch_dtype(entry.dtype)).view(entry.shape)
    return out
