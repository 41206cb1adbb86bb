"""How the worker builds an engine from the model it holds: an injectable factory.

The serving layer only needs an `EngineCore` (engine/core.py); what it is asked
for is an `EngineOptions` (engine/options.py). Production builds
the real engine; tests pass a fake, so no test needs torch kernels or a GPU. The real
engine is imported inside the default factory, so the worker starts (and moves weights)
without it and a missing engine is a clear serve error, not an import-time crash.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cascade_worker.config import WorkerConfig
from cascade_worker.engine.core import EngineCore
from cascade_worker.engine.options import EngineOptions

if TYPE_CHECKING:
    from cascade_worker.blocks.store import BlockStore


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
