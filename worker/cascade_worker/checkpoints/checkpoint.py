"""Write a random-weight HF checkpoint (what `cascade model init` does).

Weights are small normals (std 0.02, like `initializer_range`) with RMSNorm weights of 1,
so a forward pass stays numerically sane; the same seed gives byte-identical files.
Checkpoints over `shard_mb` are split into HF-style shards with an index, as hub models
are, so loaders and the block packer see the layouts they will meet in practice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from cascade_worker.checkpoints.files import write_json, write_shards
from cascade_worker.checkpoints.spec import DTYPE_BYTES, ModelSpec, hf_config, param_shapes
from cascade_worker.checkpoints.tokenizer import (
    DEFAULT_TOKENIZER_VOCAB,
    build_tokenizer,
    special_ids,
    write_tokenizer,
)

DEFAULT_SHARD_MB = 100
INIT_STD = 0.02


@dataclass(frozen=True)
class CheckpointInfo:
    out_dir: Path
    spec: ModelSpec
    tensor_bytes: int
    files: list[str]  # safetensors file names
    tokenizer_vocab: int


def plan_shards(
    shapes: Sequence[tuple[str, tuple[int, ...]]], itemsize: int, shard_bytes: int
) -> list[list[str]]:
    """Greedy, order-preserving split of tensors into files of at most ~shard_bytes."""
    shards: list[list[str]] = [[]]
    size = 0
    for name, shape in shapes:
        nbytes = itemsize
        for d in shape:
            nbytes *= d
        if shards[-1] and size + nbytes > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += nbytes
    return shards


def _init_tensor(
    name: str, shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator
) -> torch.Tensor:
    if name.endswith("norm.weight"):
        return torch.ones(shape, dtype=dtype)
    return (torch.randn(shape, generator=g) * INIT_STD).to(dtype)


def prepare_out_dir(out_dir: Path, *, force: bool) -> Path:
    """`out_dir`, created, with an earlier checkpoint's weights removed when `force`;
    ValueError if it holds one and not `force` (nothing is overwritten by accident)."""
    out_dir = Path(out_dir)
    old = sorted(out_dir.glob("*.safetensors")) if out_dir.exists() else []
    if old and not force:
        raise ValueError(f"{out_dir} already holds a checkpoint; pass --force to replace it")
    out_dir.mkdir(parents=True, exist_ok=True)
    for path in [*old, out_dir / "model.safetensors.index.json"]:
        path.unlink(missing_ok=True)
    return out_dir


def write_checkpoint(
    out_dir: Path, spec: ModelSpec, *, shard_mb: float = DEFAULT_SHARD_MB, force: bool = False
) -> CheckpointInfo:
    """Write config, tokenizer and random weights for `spec` into `out_dir`."""
    spec.validate()
    out_dir = prepare_out_dir(out_dir, force=force)

    tok = build_tokenizer(min(spec.vocab, DEFAULT_TOKENIZER_VOCAB))
    if tok.get_vocab_size() > spec.vocab:
        raise ValueError(
            f"vocab {spec.vocab} is smaller than the tokenizer's {tok.get_vocab_size()}"
        )
    ids = special_ids(tok)
    write_tokenizer(out_dir, tok, spec.max_positions)
    write_json(out_dir / "config.json", hf_config(spec, ids))
    write_json(
        out_dir / "generation_config.json",
        {"bos_token_id": ids["bos"], "eos_token_id": ids["eos"], "pad_token_id": ids["pad"]},
    )

    shapes = dict(param_shapes(spec))
    dtype: torch.dtype = getattr(torch, spec.dtype)
    shards = plan_shards(list(shapes.items()), DTYPE_BYTES[spec.dtype], int(shard_mb * 2**20))
    g = torch.Generator().manual_seed(spec.seed)
    total, files = write_shards(out_dir, shards, lambda n: _init_tensor(n, shapes[n], dtype, g))
    return CheckpointInfo(out_dir, spec, total, files, tok.get_vocab_size())
