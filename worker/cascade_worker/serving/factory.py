"""How the worker builds an engine from the model it holds: an injectable factory.

The serving layer only needs an `EngineCore` (engine/protocol.py). Production builds
the real engine; tests pass a fake, so no test needs torch kernels or a GPU. The real
engine is imported inside the default factory, so the worker starts (and moves weights)
without it and a missing engine is a clear serve error, not an import-time crash.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cascade_worker.config import WorkerConfig
from cascade_worker.engine.protocol import EngineCore

if TYPE_CHECKING:
    import torch

    from cascade_worker.blocks.store import BlockStore
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


def engine_options(
    config: WorkerConfig, max_batch: int | None = None, max_model_len: int | None = None
) -> EngineOptions:
    """Engine options: a request's values over the worker's flags (a profile Job
    measures with the same ones, so its key is the serving start's)."""
    return EngineOptions(
        max_batch=max_batch or config.max_batch,
        max_model_len=max_model_len or config.max_model_len,
        prefill_budget=config.prefill_tokens_per_step,
        device=config.device or None,
        dtype=None if config.dtype in ("", "auto") else config.dtype,
        compile=config.compile or None,
    )


# Called on a worker thread (building an engine copies weights to the device: slow).
EngineFactory = Callable[["BlockStore", EngineOptions], EngineCore]


class EngineUnavailable(RuntimeError):
    """This build has no usable engine (module missing or failing to import)."""


def default_engine_factory(store: BlockStore, options: EngineOptions) -> EngineCore:
    """The real engine: `LLMEngine.from_store(store, **options)`."""
    try:
        from cascade_worker.engine import cpu_limit
        from cascade_worker.engine.engine import LLMEngine
    except ImportError as exc:
        raise EngineUnavailable(
            f"cannot import the inference engine (cascade_worker.engine.engine): {exc}"
        ) from exc
    cpu_limit.apply()  # before the first kernel: threads sized to the CPU quota
    engine: EngineCore = LLMEngine.from_store(store, **options.engine_kwargs())
    return engine


def torch_dtype(name: str | None) -> torch.dtype | None:
    """The torch dtype an option names ("bfloat16"); None = the engine's default."""
    if name is None:
        return None
    import torch

    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"dtype: {name!r} is not a torch dtype")
    return dtype
