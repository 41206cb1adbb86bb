"""How long a context and how big a KV cache an engine gets, decided once for every
way of building one (one process, or a pipeline head whose stages copy its geometry).

The context is the caller's `max_model_len` clamped to the checkpoint's (a deployment's
default is generic; the checkpoint knows better). The cache holds `kv_cache_tokens`
positions per layer: by default max_batch full contexts, capped at
DEFAULT_KV_CACHE_BYTES, and never less than one full context so any request can finish.
"""

from __future__ import annotations

import logging

import torch

from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.kv_blocks import CacheConfig, blocks_for
from cascade_worker.engine.weights import compute_dtype

log = logging.getLogger(__name__)

DEFAULT_BLOCK_SIZE = 16
# Enough for small models to batch well, small enough that a few CPU workers share a
# machine.
DEFAULT_KV_CACHE_BYTES = 256 << 20


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
        itemsize = (dtype or compute_dtype(config, torch.device(device))).itemsize
        per_token = 2 * config.num_layers * config.kv_heads * config.head_dim * itemsize
        kv_cache_tokens = min(max_batch * max_model_len, DEFAULT_KV_CACHE_BYTES // per_token)
    tokens = max(kv_cache_tokens, max_model_len)
    return CacheConfig(block_size, blocks_for(tokens, block_size))
