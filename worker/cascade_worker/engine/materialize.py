"""One engine start's materialized state: the key it needs, what a start measured (to
record it), and the `from_store` arguments that restore it.

The key resolves every default the way `LLMEngine.from_store` does (max batch, context
clamped to the checkpoint, prefill budget, compute dtype for the device), so a profile
Job and a serving worker given the same deployment settings compute the same key.
"""

from __future__ import annotations

import base64
import hashlib
import time
from typing import Any

import torch

from cascade_protocol.materialize import MaterializationKey, MaterializedState
from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.kv_profile import DEFAULT_GPU_MEMORY_UTILIZATION
from cascade_worker.engine.scheduler import DEFAULT_MAX_BATCH, DEFAULT_PREFILL_BUDGET
from cascade_worker.engine.sizing import DEFAULT_BLOCK_SIZE, KvSizing, context_length
from cascade_worker.engine.startup import StartupReport
from cascade_worker.engine.weights import compute_dtype

# Bump when what a restore reads changes meaning: older artifacts then stop matching.
ARTIFACT_FORMAT = 1


def accelerator(device: torch.device) -> str:
    """The accelerator product a recorded state is true for."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


def start_key(
    store: BlockStore,
    *,
    max_batch: int | None = None,
    max_model_len: int | None = None,
    prefill_budget: int | None = None,
    device: str | None = None,
    dtype: torch.dtype | None = None,
    memory_budget_bytes: int | None = None,
    gpu_memory_utilization: float | None = None,
    compile: bool | None = None,
    **_: Any,
) -> MaterializationKey:
    """The key of a `from_store(store, ...)` start with these options (None: default)."""
    config = ModelConfig.from_hf(store.manifest.config)
    dev = torch.device(device or "cpu")
    return MaterializationKey(
        model_digest=store.manifest.digest,
        accelerator=accelerator(dev),
        dtype=str(dtype or compute_dtype(config, dev)).removeprefix("torch."),
        max_batch=max_batch or DEFAULT_MAX_BATCH,
        max_model_len=context_length(config, max_model_len),
        prefill_budget=prefill_budget or DEFAULT_PREFILL_BUDGET,
        block_size=DEFAULT_BLOCK_SIZE,
        memory_budget_bytes=memory_budget_bytes,
        gpu_memory_utilization=gpu_memory_utilization or DEFAULT_GPU_MEMORY_UTILIZATION,
        compile=bool(compile),
        runtime=f"torch {torch.__version__}; artifacts {ARTIFACT_FORMAT}",
    )


def capture(
    key: MaterializationKey, startup: StartupReport | None, *, by: str = ""
) -> MaterializedState:
    """What a start with `key` measured (its engine's `startup` report), as an artifact;
    ValueError when the start measured nothing that could be restored."""
    if startup is None or startup.kv_sizing is None:
        raise ValueError("this start did not profile its KV cache: nothing to record")
    cache = None
    if key.compile:
        artifacts = torch.compiler.save_cache_artifacts()
        if artifacts is not None:
            cache = base64.b64encode(artifacts[0]).decode()
    return MaterializedState(
        id=key.id,
        key=key,
        kv_sizing=startup.kv_sizing.to_json(),
        compile_cache=cache,
        compile_cache_sha256=hashlib.sha256(cache.encode()).hexdigest() if cache else None,
        profile_s=round(startup.restorable_s, 4),
        created_at=time.time(),
        created_by=by,
    )


def restore_options(state: MaterializedState) -> dict[str, Any]:
    """`from_store` arguments that restore `state` (checked with `state.problem` first)."""
    options: dict[str, Any] = {"kv_sizing": KvSizing.from_json(state.kv_sizing)}
    if state.compile_cache is not None:
        options["compile_cache"] = base64.b64decode(state.compile_cache)
    return options
