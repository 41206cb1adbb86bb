"""How long a context and how big a KV cache an engine gets, decided once for every
way of building one (one process, or a pipeline head whose stages copy its geometry).

The context is the caller's `max_model_len` clamped to the checkpoint's (a deployment's
default is generic; the checkpoint knows better). The cache holds `kv_cache_tokens`
positions per layer. A one-process engine sizes it against a memory budget
(`size_kv`: budget - weights - the largest step's activation peak, measured by
kv_profile.py, as vLLM does) and records the result as a `KvSizing`, which a profile job
can store and a cold start restore instead of profiling again (Medusa's materialized
start-up state). `cache_config` is the fixed formula a pipeline head still uses (its
layers are spread over processes): max_batch full contexts capped at
DEFAULT_KV_CACHE_BYTES, never less than one full context so any request can finish.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import Any

import torch

from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.kv_blocks import CacheConfig, blocks_for
from cascade_worker.engine.weights import compute_dtype

log = logging.getLogger(__name__)

DEFAULT_BLOCK_SIZE = 16
# Enough for small models to batch well, small enough that a few CPU workers share a
# machine. Also a CPU engine's default KV share of its budget (no budget given).
DEFAULT_KV_CACHE_BYTES = 256 << 20


@dataclass(frozen=True)
class KvSizing:
    """How big a KV cache one engine gets and why: plain ints, JSON round-trippable, so
    it can be stored as a materialized artifact per (model, accelerator, engine options)
    and handed to `LLMEngine.from_store(kv_sizing=...)` to skip the profile."""

    budget_bytes: int  # memory this engine may use: weights + activations + KV (+ other)
    weight_bytes: int  # the stages' weights, as held for compute
    activation_peak_bytes: int  # transient memory of the largest step (measured)
    other_bytes: int  # not ours but in the budget: other processes on the GPU (0 on CPU)
    kv_bytes_per_token: int  # K and V of one position, every layer
    kv_cache_tokens: int  # positions the cache holds, whole blocks
    block_size: int
    profiled_s: float  # what measuring cost (the time a restore saves)
    method: str  # how activation_peak_bytes was measured ("cuda-peak", "cpu-rss-peak")

    def cache(self) -> CacheConfig:
        return CacheConfig(self.block_size, self.kv_cache_tokens // self.block_size)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> KvSizing:
        return cls(**{k: doc[k] for k in cls.__dataclass_fields__})


def kv_bytes_per_token(config: ModelConfig, dtype: torch.dtype, num_layers: int) -> int:
    return 2 * num_layers * config.kv_heads * config.head_dim * dtype.itemsize


def size_kv(
    *,
    budget_bytes: int,
    weight_bytes: int,
    activation_peak_bytes: int,
    other_bytes: int,
    per_token: int,
    max_batch: int,
    max_model_len: int,
    block_size: int,
    profiled_s: float,
    method: str,
) -> KvSizing:
    """The budget's remainder in whole blocks, at most max_batch full contexts (more
    could never be used: only running sequences hold blocks). ValueError, naming every
    figure, when the remainder cannot hold one full context: a request could then
    never finish, and the operator should hear it at start, not at the long prompt."""
    free = budget_bytes - weight_bytes - activation_peak_bytes - other_bytes
    tokens = min(max(free, 0) // per_token, max_batch * max_model_len)
    tokens -= tokens % block_size
    if tokens < max_model_len:
        raise ValueError(
            f"memory budget {budget_bytes} B - weights {weight_bytes} B - activation peak "
            f"{activation_peak_bytes} B - other {other_bytes} B leaves {free} B for the KV "
            f"cache: {tokens} tokens at {per_token} B each, fewer than one full context "
            f"({max_model_len}); raise the budget or lower max_model_len/max_batch"
        )
    return KvSizing(
        budget_bytes=budget_bytes,
        weight_bytes=weight_bytes,
        activation_peak_bytes=activation_peak_bytes,
        other_bytes=other_bytes,
        kv_bytes_per_token=per_token,
        kv_cache_tokens=tokens,
        block_size=block_size,
        profiled_s=profiled_s,
        method=method,
    )


def check_weights_fit(
    *, weight_bytes: int, device_bytes: int, utilization: float, dtype: torch.dtype
) -> None:
    """ValueError with the arithmetic when the weights alone do not fit one device's
    share: such a model needs more devices (tensor parallelism), not a smaller cache,
    and the start should say so before it copies a byte."""
    budget = int(device_bytes * utilization)
    if weight_bytes < budget:
        return
    raise ValueError(
        f"the weights take {weight_bytes / 1e9:.1f} GB in {str(dtype).removeprefix('torch.')} "
        f"({weight_bytes} B), more than this device's budget of {budget / 1e9:.1f} GB "
        f"({utilization:g} x {device_bytes / 1e9:.1f} GB); at least "
        f"{-(-weight_bytes // budget)} such devices are needed for the weights alone"
    )


def restore_problem(
    sizing: KvSizing, *, block_size: int, per_token: int, max_model_len: int
) -> str | None:
    """Why a recorded sizing cannot be applied to this engine (None: it can).

    The materialization key already says the recording was made for this start; this
    is the restore's own check of the figures it applies (a hand-edited or mis-keyed
    artifact must fail at start, not as a cache too short for a full context)."""
    if sizing.block_size != block_size:
        return f"recorded block size {sizing.block_size} != this engine's {block_size}"
    if sizing.kv_bytes_per_token != per_token:
        return (
            f"recorded {sizing.kv_bytes_per_token} B per token != this engine's {per_token} B"
            " (another model, dtype or layer count)"
        )
    if sizing.kv_cache_tokens % block_size:
        return f"recorded {sizing.kv_cache_tokens} tokens are not whole blocks of {block_size}"
    if sizing.kv_cache_tokens < max_model_len:
        return (
            f"recorded {sizing.kv_cache_tokens} tokens hold less than one full context"
            f" ({max_model_len})"
        )
    return None


def context_length(config: ModelConfig, max_model_len: int | None) -> int:
    limit = config.max_position_embeddings
    if max_model_len is not None and max_model_len > limit:
        log.warning("max_model_len %d > the model's %d: using %d", max_model_len, limit, limit)
        return limit
    return max_model_len or limit


def cache_config(
    config: ModelConfig,
    *,
    max_batch: int,
    max_model_len: int,
    block_size: int = DEFAULT_BLOCK_SIZE,
    kv_cache_tokens: int | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | None = None,
) -> CacheConfig:
    if kv_cache_tokens is None:
        dtype = dtype or compute_dtype(config, torch.device(device))
        per_token = kv_bytes_per_token(config, dtype, config.num_layers)
        kv_cache_tokens = min(max_batch * max_model_len, DEFAULT_KV_CACHE_BYTES // per_token)
    tokens = max(kv_cache_tokens, max_model_len)
    return CacheConfig(block_size, blocks_for(tokens, block_size))
