"""Size the KV cache by profiling: run the largest step the scheduler can produce,
measure its memory peak, give the KV cache what the budget has left (vLLM's way).

The dummy step is the scheduler's worst case: one prefill chunk of the whole prefill
budget ending a full context, beside max_batch - 1 decodes each at a full context. All
block tables alias the same blocks of a small profiling cache (reads of aliased blocks
cost what distinct ones would; what the dummy writes is garbage nobody reads), so
profiling needs one context's cache, not the one being sized.

The peak is measured, not computed from shapes, because attention's temporaries
(masks, gathered contexts, the kernels' own buffers) are the part a formula gets wrong:
- CUDA: torch's allocator peak (`max_memory_allocated`) over the step; the budget is
  `gpu_memory_utilization` of the device, and memory held outside this process's torch
  allocator (other processes, the CUDA context) counts against it.
- CPU: the process's peak resident set over the step. Linux resets the peak on writing
  5 to /proc/self/clear_refs, so VmHWM after the step minus VmRSS before it is the
  step's transient memory (glibc serves tensors this big with mmap, returned on free,
  so the peak is not hidden in memory the allocator kept). The budget is explicit
  bytes; without one, weights + peak + DEFAULT_KV_CACHE_BYTES, i.e. today's KV cap.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch

from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.executor import LocalExecutor
from cascade_worker.engine.kv_blocks import CacheConfig, blocks_for
from cascade_worker.engine.sizing import (
    DEFAULT_KV_CACHE_BYTES,
    KvSizing,
    kv_bytes_per_token,
    size_kv,
)
from cascade_worker.engine.stage import StageModel

DEFAULT_GPU_MEMORY_UTILIZATION = 0.9


def profiling_cache(max_model_len: int, block_size: int) -> CacheConfig:
    """Enough cache for the dummy step: one full context (every table aliases it)."""
    return CacheConfig(block_size, blocks_for(max_model_len, block_size))


def worst_step(
    max_batch: int, max_model_len: int, prefill_budget: int, block_size: int
) -> StageBatch:
    """The largest step the scheduler can produce (token ids; see the module doc)."""
    chunk = min(prefill_budget, max_model_len)
    decodes = max_batch - 1
    table = list(range(blocks_for(max_model_len, block_size)))
    return StageBatch(
        seq_ids=list(range(decodes + 1)),
        start_positions=[max_model_len - 1] * decodes + [max_model_len - chunk],
        num_new=[1] * decodes + [chunk],
        block_tables=[table] * (decodes + 1),
        input=torch.zeros(decodes + chunk, dtype=torch.int64),
    )


def weight_bytes(stages: Sequence[StageModel]) -> int:
    """Bytes of every distinct weight tensor (a tied, unpacked LM head is the embedding)."""
    seen: dict[int, int] = {}
    packed = 0
    for stage in stages:
        w = stage.weights
        head = None
        if w.lm_head is not None and w.lm_head.packed:
            packed += w.lm_head.nbytes  # its own copy: nothing else shares it
        elif w.lm_head is not None:
            head = w.lm_head.tensor()
        tensors = [w.embed, w.norm, head, *(t for lw in w.layers for t in vars(lw).values())]
        for t in tensors:
            if isinstance(t, torch.Tensor):  # a meta tensor has no address: its identity
                key = id(t) if t.device.type == "meta" else t.data_ptr()
                seen[key] = t.numel() * t.element_size()
    return sum(seen.values()) + packed


def planned_weight_bytes(
    config: ModelConfig, shapes: Mapping[str, tuple[int, ...]], dtype: torch.dtype
) -> int:
    """What the weights of `shapes` (HF names) take in `dtype`, built by the loader itself
    on the meta device: nothing is allocated or read, so a start can refuse a model its
    device cannot hold before copying a byte (startup.py), and a test can size a 70B."""
    meta = {name: torch.empty(shape, dtype=dtype, device="meta") for name, shape in shapes.items()}
    executor = LocalExecutor.load(meta, config, CacheConfig(1, 1), device="meta", dtype=dtype)
    return weight_bytes(executor.stages)


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def _run(stages: Sequence[StageModel], batch: StageBatch) -> None:
    x = batch.input
    for stage in stages:
        x = stage.forward(batch.with_input(x))


def _cpu_peak(stages: Sequence[StageModel], batch: StageBatch) -> tuple[int, str]:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
        before = _status_kib("VmRSS")
    except OSError:  # no procfs: the lifetime peak's growth (0 if the step stays under)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        _run(stages, batch)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return max(0, after - before) * 1024, "cpu-maxrss-growth"
    _run(stages, batch)
    return max(0, _status_kib("VmHWM") - before) * 1024, "cpu-rss-peak"


def _cuda_peak(stages: Sequence[StageModel], batch: StageBatch, device: torch.device) -> int:
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    _run(stages, batch)
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before


def profile_kv(
    stages: Sequence[StageModel],
    *,
    max_batch: int,
    max_model_len: int,
    prefill_budget: int,
    budget_bytes: int | None = None,
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION,
) -> KvSizing:
    """Measure the worst step on `stages` (built over `profiling_cache`) and size the
    KV cache in the budget; ValueError when it cannot hold one full context."""
    began = time.perf_counter()
    first = stages[0]
    device, block_size = first.device, first.cache.config.block_size
    batch = worst_step(max_batch, max_model_len, prefill_budget, block_size)
    weights = weight_bytes(stages)
    num_layers = sum(s.end - s.start for s in stages)
    per_token = kv_bytes_per_token(first.config, first.dtype, num_layers)
    other = 0
    if device.type == "cuda":
        peak, method = _cuda_peak(stages, batch, device), "cuda-peak"
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info(device)
        other = max(0, total - free - torch.cuda.memory_reserved(device))
        if budget_bytes is None:
            budget_bytes = int(total * gpu_memory_utilization)
    else:
        peak, method = _cpu_peak(stages, batch)
        if budget_bytes is None:  # today's KV cap, and never less than one context
            kv = max(
                DEFAULT_KV_CACHE_BYTES,
                blocks_for(max_model_len, block_size) * block_size * per_token,
            )
            budget_bytes = weights + peak + kv
    return size_kv(
        budget_bytes=budget_bytes,
        weight_bytes=weights,
        activation_peak_bytes=peak,
        other_bytes=other,
        per_token=per_token,
        max_batch=max_batch,
        max_model_len=max_model_len,
        block_size=block_size,
        profiled_s=time.perf_counter() - began,
        method=method,
    )
