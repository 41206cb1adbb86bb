"""Typed description of a model cut into packed blocks.

A receiver gets the manifest first (over the control channel, as JSON) and knows from it
everything needed to preallocate buffers, verify what arrives and view the bytes as
tensors: each block's size and checksums, and each tensor's dtype, shape and offset inside
its block. The model digest names the exact weights (config + every block's layout and
checksums + extra files), so two workers can tell cheaply whether they hold the same model.

Trust (docs/security.md, "Trusted weights"): the digest and each block's `sha256` are
SHA-256, so neither a manifest nor a block can be altered consistently without changing
the digest; a receiver re-derives the digest of every manifest it is sent and checks it
against the plan's, and installs a block only when both its xxh3 `checksum` (fast, finds
a bad link) and its `sha256` match.

Dtypes are spelled as torch names without the ``torch.`` prefix ("bfloat16"); the table
below maps them to safetensors codes and item sizes (numpy has no bfloat16, so buffers
stay uint8 and are viewed through torch).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Annotated, Any

import xxhash
from pydantic import BaseModel, ConfigDict, Field, model_validator

from cascade_protocol import limits

# torch dtype name -> (safetensors dtype code, bytes per element)
DTYPES: dict[str, tuple[str, int]] = {
    "float64": ("F64", 8),
    "float32": ("F32", 4),
    "float16": ("F16", 2),
    "bfloat16": ("BF16", 2),
    "float8_e4m3fn": ("F8_E4M3", 1),
    "float8_e5m2": ("F8_E5M2", 1),
    "int64": ("I64", 8),
    "int32": ("I32", 4),
    "int16": ("I16", 2),
    "int8": ("I8", 1),
    "uint8": ("U8", 1),
    "bool": ("BOOL", 1),
}
SAFETENSORS_TO_DTYPE: dict[str, str] = {code: name for name, (code, _) in DTYPES.items()}

# Tensors start at multiples of this many bytes inside a block (cache lines, DMA, SIMD).
ALIGNMENT = 64


def itemsize(dtype: str) -> int:
    """Bytes per element of a dtype name; ValueError for an unknown one."""
    try:
        return DTYPES[dtype][1]
    except KeyError:
        raise ValueError(f"unsupported dtype {dtype!r}; known: {sorted(DTYPES)}") from None


def align_up(n: int, alignment: int = ALIGNMENT) -> int:
    return (n + alignment - 1) // alignment * alignment


class TensorEntry(BaseModel):
    """One tensor inside a packed block."""

    model_config = ConfigDict(frozen=True)

    name: str  # HF parameter name, e.g. "model.layers.3.self_attn.q_proj.weight"
    dtype: str  # torch dtype name, a key of DTYPES
    shape: tuple[Annotated[int, Field(ge=0)], ...]
    offset: int = Field(ge=0)  # byte offset inside the block buffer; multiple of ALIGNMENT
    nbytes: int = Field(ge=0)  # = prod(shape) * itemsize(dtype)

    @model_validator(mode="after")
    def _sized_by_shape(self) -> TensorEntry:
        expected = math.prod(self.shape) * itemsize(self.dtype)
        if self.nbytes != expected:
            raise ValueError(f"nbytes: {self.nbytes}, but {self.dtype}{list(self.shape)} is "
                             f"{expected} bytes")  # fmt: skip
        return self


class BlockManifest(BaseModel):
    """One block: layers [layer_start, layer_end) packed into one buffer of `nbytes`."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=0)
    layer_start: int = Field(ge=0)  # first decoder layer held (inclusive)
    layer_end: int = Field(ge=0)  # one past the last decoder layer held (exclusive)
    nbytes: int = Field(ge=0)  # whole buffer length, padding included
    checksum: str  # xxh3_128 hex digest of the whole buffer
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")  # SHA-256 hex of the whole buffer
    tensors: list[TensorEntry]

    @model_validator(mode="after")
    def _tensors_inside(self) -> BlockManifest:
        if self.layer_end < self.layer_start:
            raise ValueError(f"layer_end: {self.layer_end} < layer_start {self.layer_start}")
        for t in self.tensors:
            if t.offset + t.nbytes > self.nbytes:
                raise ValueError(f"tensors: {t.name} ends at byte {t.offset + t.nbytes}, past "
                                 f"the block's nbytes {self.nbytes}")  # fmt: skip
        return self


class ModelManifest(BaseModel):
    """A whole model as blocks, plus what is needed to write an HF directory back."""

    model_config = ConfigDict(frozen=True)

    digest: str  # model_digest(...) of the fields below
    arch: str  # config["architectures"][0], e.g. "LlamaForCausalLM"
    num_layers: int = Field(ge=1)
    config: dict[str, Any]  # config.json as loaded
    # Each block becomes a buffer (BlockStore): their count and sizes are bounded.
    blocks: list[BlockManifest] = Field(max_length=limits.MAX_MODEL_BLOCKS)
    # Small text files kept with the model (tokenizer.json, generation_config.json, ...):
    # file name -> content. Covered by the digest.
    extras: dict[str, str] = Field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(b.nbytes for b in self.blocks)

    @model_validator(mode="after")
    def _blocks_in_order(self) -> ModelManifest:
        for position, block in enumerate(self.blocks):
            if block.index != position:
                raise ValueError(f"blocks: block {position} has index {block.index}")
        return self

    def block_of_layer(self, layer: int) -> int:
        """Index of the block holding decoder layer `layer`."""
        for block in self.blocks:
            if block.layer_start <= layer < block.layer_end:
                return block.index
        raise ValueError(f"layer {layer} outside 0..{self.num_layers - 1}")

    def verify_digest(self) -> bool:
        return self.digest == model_digest(
            self.arch, self.num_layers, self.config, self.blocks, self.extras
        )


def host_memory_bytes() -> int:
    """This machine's physical memory: no received manifest may ask for more buffers."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_fits(manifest: ModelManifest, limit: int | None = None) -> None:
    """ValueError naming the field when `manifest`'s blocks exceed `limit` bytes (default:
    this host's memory), before a store allocates their buffers."""
    limit = host_memory_bytes() if limit is None else limit
    if manifest.total_bytes > limit:
        raise ValueError(f"manifest.blocks: {manifest.total_bytes} bytes in all, more than "
                         f"the {limit} bytes this host can hold")  # fmt: skip


def checksum(data: Any) -> str:
    """xxh3_128 hex digest of a buffer (numpy array, memoryview, bytes); ~25 GB/s."""
    return xxhash.xxh3_128_hexdigest(data)


def strong_hash(data: Any) -> str:
    """SHA-256 hex digest of a buffer: what trust rests on (~1-2 GB/s a core)."""
    return hashlib.sha256(memoryview(data).cast("B")).hexdigest()


def model_digest(
    arch: str,
    num_layers: int,
    config: dict[str, Any],
    blocks: list[BlockManifest],
    extras: dict[str, str],
) -> str:
    """SHA-256 over config, block layout/checksums and extras (canonical JSON)."""
    doc = {
        "arch": arch,
        "num_layers": num_layers,
        "config": config,
        "blocks": [b.model_dump(mode="json") for b in blocks],
        "extras": {name: strong_hash(text.encode()) for name, text in sorted(extras.items())},
    }
    return hashlib.sha256(
        json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
