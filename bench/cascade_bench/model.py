"""The model every method moves: made once with `cascade model init`, cached, packed once.

The harness packs the checkpoint itself only to learn the block table (sizes, checksums,
digest) that plans and receivers need; sources pack their own copy in their process.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from cascade_bench.nodeio import BlockInfo
from cascade_bench.plans import target_mib


@dataclass(frozen=True)
class ModelInfo:
    path: Path
    digest: str
    total_bytes: int
    blocks: list[BlockInfo]
    rows: list[dict[str, object]]  # manifest rows for the ScalePlan block table


def default_model_dir(cache: Path, model_mb: float) -> Path:
    return cache / f"llama-{model_mb:g}MB"


def ensure_model(path: Path, model_mb: float) -> Path:
    """Reuse a checkpoint at `path`, or write one of about `model_mb` * 10^6 bytes."""
    if (path / "config.json").exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "cascade_cli.main", "model", "init", str(path)]
    cmd += ["--arch", "llama", "--target-mb", f"{target_mib(model_mb):.3f}", "--force"]
    subprocess.run(cmd, check=True)
    return path


def inspect_model(path: Path, blocks: int) -> ModelInfo:
    from cascade_worker.blocks import pack_model

    manifest = pack_model(path, blocks).manifest  # buffers are dropped right away
    return ModelInfo(
        path=path,
        digest=manifest.digest,
        total_bytes=manifest.total_bytes,
        blocks=[BlockInfo(b.index, b.nbytes, b.checksum) for b in manifest.blocks],
        rows=[
            {
                "index": b.index,
                "layer_start": b.layer_start,
                "layer_end": b.layer_end,
                "nbytes": b.nbytes,
                "checksum": b.checksum,
            }
            for b in manifest.blocks
        ],
    )
