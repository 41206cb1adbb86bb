"""How a checkpoint's files are written, for every command that writes one
(`model init`'s random weights, `model import`'s converted GGUF): HF-named safetensors
shards with the index HF loaders read, and the JSON side files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import save_file

from cascade_worker.blocks.store import shard_name


def write_json(path: Path, doc: object) -> None:
    path.write_text(json.dumps(doc, indent=2) + "\n")


def write_shards(
    out_dir: Path, shards: list[list[str]], tensor: Callable[[str], torch.Tensor]
) -> tuple[int, list[str]]:
    """Each shard's tensors, made by `tensor(name)` in order with one shard in memory at
    a time, saved as one file; the index when there are several. (bytes, file names)."""
    files: list[str] = []
    weight_map: dict[str, str] = {}
    total = 0
    for i, names in enumerate(shards):
        file_name = shard_name(i, len(shards))
        part = {n: tensor(n) for n in names}
        save_file(part, str(out_dir / file_name), metadata={"format": "pt"})
        (out_dir / file_name).chmod(0o644)  # safetensors writes 0600; weights are for all
        total += sum(t.numel() * t.element_size() for t in part.values())
        weight_map.update(dict.fromkeys(names, file_name))
        files.append(file_name)
        del part
    if len(shards) > 1:
        write_json(
            out_dir / "model.safetensors.index.json",
            {"metadata": {"total_size": total}, "weight_map": weight_map},
        )
    return total, files
