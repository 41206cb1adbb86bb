"""What a serve request or the worker's flags ask of the engine: one options value.

It lives beside the engine so the serving layer, the materialized artifacts' keys
(control/artifacts.py) and the profile Job read the same fields without importing each
other; torch loads only when a dtype is turned into a torch dtype.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from cascade_worker.engine.sizing import KvSizing


@dataclass(frozen=True)
class EngineOptions:
    """What a serve request or the worker's flags ask of the engine; None = its default."""

    max_batch: int | None = None
    max_model_len: int | None = None
    prefill_budget: int | None = None  # prompt tokens one step prefills (chunked prefill)
    device: str | None = None  # e.g. "cuda:0", "cpu"
    dtype: str | None = None  # torch dtype name ("bfloat16"); None = the checkpoint's
    # Start-up (engine/startup.py): torch.compile the layers; the KV cache's memory
    # budget (CPU bytes; a GPU takes gpu_memory_utilization of the device); a recorded
    # KV sizing to restore instead of profiling.
    compile: bool | None = None
    memory_budget_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    kv_sizing: KvSizing | None = None
    compile_cache: bytes | None = None  # torch compiler cache artifacts to restore

    def as_kwargs(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v is not None}

    def engine_kwargs(self) -> dict[str, Any]:
        """`LLMEngine.from_store`'s keyword arguments (the dtype as a torch dtype)."""
        kwargs = self.as_kwargs()
        if self.dtype is not None:
            kwargs["dtype"] = torch_dtype(self.dtype)
        return kwargs


def torch_dtype(name: str | None) -> torch.dtype | None:
    """The torch dtype an option names ("bfloat16"); None = the engine's default."""
    if name is None:
        return None
    import torch

    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype: {name!r} is not a torch dtype")
    return dtype
