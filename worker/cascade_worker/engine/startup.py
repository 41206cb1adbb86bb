"""A one-process engine's start-up work: load the stages, size the KV cache, compile.

Each piece is either done here or restored from what an earlier start recorded, which
is how a cold start gets cheap (Medusa's materialization): a given `KvSizing` replaces
the profiling step by a check of the recorded figures and the allocation of the cache
they size, and compiled graphs come from torch's caches (or artifacts loaded with
`torch.compiler.load_cache_artifacts`) instead of a fresh compile. `StartupReport` says
what this start did and what each part cost, both ways measured the same: the KV stage
runs from the weights being loaded to the sized cache being in place, so a restore's
seconds and a profile's are comparable (what a restore saved is their difference).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.device import torch_device
from cascade_worker.engine.executor import LocalExecutor
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.kv_profile import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    planned_weight_bytes,
    profile_kv,
    profiling_cache,
)
from cascade_worker.engine.sizing import (
    KvSizing,
    cache_config,
    check_weights_fit,
    kv_bytes_per_token,
    restore_problem,
)
from cascade_worker.engine.stage import StageModel
from cascade_worker.engine.weights import compute_dtype


@dataclass(frozen=True)
class StartupOptions:
    """The start-up knobs of `LLMEngine.from_store` (None: the default way)."""

    block_size: int
    kv_cache_tokens: int | None = None  # explicit size: no profile, no budget
    kv_sizing: KvSizing | None = None  # a recorded profile result: checked and applied
    memory_budget_bytes: int | None = None  # CPU: the budget (default: today's KV cap)
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    # torch.compile the layer range for steps of up to compile_max_tokens (default
    # max_batch: the decode steps, where compiling pays on accelerators)
    compile: bool = False
    compile_max_tokens: int | None = None
    compile_dynamic: bool = False  # one symbolic-size graph instead of padded buckets
    compile_backend: str = "inductor"
    # torch.compiler.save_cache_artifacts() bytes of an earlier start: loaded before the
    # compile, so its graphs come from the cache instead of a fresh compile.
    compile_cache: bytes | None = None


@dataclass(frozen=True)
class StartupReport:
    kv_sizing: KvSizing | None  # None when kv_cache_tokens was given
    load_s: float
    compile_s: float | None  # warm-up (graph compile or cache restore); None: eager
    # This start's KV sizing stage, measured, part of load_s: profiling and allocating
    # the sized cache, or (a restore) checking the recorded sizing and allocating it.
    # 0 only when kv_cache_tokens was given (no sizing: the cache comes with the load).
    kv_s: float = 0.0

    @property
    def restorable_s(self) -> float:
        """What this start spent on the work a materialized state replaces: KV
        profiling and compile (a profile run records it; a restore spends less)."""
        return self.kv_s + (self.compile_s or 0.0)


def build_local(
    store: BlockStore,
    config: ModelConfig,
    opts: StartupOptions,
    *,
    max_batch: int,
    max_model_len: int,
    prefill_budget: int,
    device: torch.device | str,
    dtype: torch.dtype | None,
    cuts: Sequence[int],
) -> tuple[LocalExecutor, StartupReport]:
    began = time.perf_counter()
    sizing = opts.kv_sizing
    cache: CacheConfig
    if sizing is not None:  # applied after the load, timed as the profile is
        cache = CacheConfig(opts.block_size, 1)
    elif opts.kv_cache_tokens is not None:
        cache = cache_config(
            config, max_batch=max_batch, max_model_len=max_model_len,
            block_size=opts.block_size, kv_cache_tokens=opts.kv_cache_tokens,
            device=device, dtype=dtype,
        )  # fmt: skip
    else:
        cache = profiling_cache(max_model_len, opts.block_size)
    check_device_holds(store, config, torch_device(device), dtype, opts.gpu_memory_utilization)
    executor = LocalExecutor.load(store, config, cache, cuts=cuts, device=device, dtype=dtype)
    kv_s = 0.0
    sizing_began = time.perf_counter()
    if sizing is not None:
        executor = apply_recorded(executor, sizing, max_model_len)
        kv_s = time.perf_counter() - sizing_began
    elif opts.kv_cache_tokens is None:
        sizing = profile_kv(
            executor.stages, max_batch=max_batch, max_model_len=max_model_len,
            prefill_budget=prefill_budget, budget_bytes=opts.memory_budget_bytes,
            gpu_memory_utilization=opts.gpu_memory_utilization,
        )  # fmt: skip
        executor = with_cache(executor, sizing.cache())
        kv_s = time.perf_counter() - sizing_began
    load_s = time.perf_counter() - began
    compile_s = None
    if opts.compile:
        from cascade_worker.engine.compiled import compile_stage

        restoring = time.perf_counter()
        if opts.compile_cache is not None:
            torch.compiler.load_cache_artifacts(opts.compile_cache)
        limit = opts.compile_max_tokens or max_batch
        compile_s = time.perf_counter() - restoring
        compile_s += sum(
            compile_stage(s, limit, dynamic=opts.compile_dynamic, backend=opts.compile_backend)
            for s in executor.stages
        )
    return executor, StartupReport(sizing, load_s, compile_s, kv_s)


def check_device_holds(
    store: BlockStore, config: ModelConfig, device: torch.device, dtype: torch.dtype | None,
    utilization: float,
) -> None:  # fmt: skip
    """On an accelerator, refuse a model whose weights exceed the device's share before
    copying them (the copy would fail half-way, out of memory, naming no figure)."""
    if device.type != "cuda":
        return
    dtype = dtype or compute_dtype(config, device)
    shapes = {e.name: e.shape for b in store.manifest.blocks for e in b.tensors}
    total = torch.cuda.get_device_properties(device).total_memory
    check_weights_fit(
        weight_bytes=planned_weight_bytes(config, shapes, dtype), device_bytes=total,
        utilization=utilization, dtype=dtype,
    )  # fmt: skip


def apply_recorded(executor: LocalExecutor, sizing: KvSizing, max_model_len: int) -> LocalExecutor:
    """`executor` over the cache a recorded sizing gives, once its figures are checked
    against these stages (ValueError naming the mismatch: a restore never guesses)."""
    first = executor.stages[0]
    layers = sum(s.end - s.start for s in executor.stages)
    problem = restore_problem(
        sizing,
        block_size=first.cache.config.block_size,
        per_token=kv_bytes_per_token(first.config, first.dtype, layers),
        max_model_len=max_model_len,
    )
    if problem is not None:
        raise ValueError(f"cannot restore the recorded KV sizing: {problem}")
    return with_cache(executor, sizing.cache())


def with_cache(executor: LocalExecutor, cache: CacheConfig) -> LocalExecutor:
    """The same weights over fresh KV caches of another geometry (the profile's)."""
    parts = [(s.config, s.weights, s.device) for s in executor.stages]
    executor.stages.clear()  # the profiling caches go before the real ones are made
    return LocalExecutor([StageModel(c, w, cache, d) for c, w, d in parts])
