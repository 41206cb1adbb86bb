"""Run-time bounds on what a pipeline peer asks us to allocate, before we allocate it.

The frames' own bounds (frames.py) are static ceilings that hold for any model. What a
real head can ask of a stage depends on the model: its KV cache geometry comes from
`engine.sizing.cache_config`, its micro-batches fit that cache, and its hidden states
are [tokens, hidden]; a stage's results are [rows, vocab] float32 logits. A peer that
asks for more (an Attach for 10^15 KV slots, a Work announcing a tensor larger than
its batch) is refused with a `FrameError` naming the field, and nothing is allocated.
"""

from __future__ import annotations

from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.kv_blocks import CacheConfig, blocks_for
from cascade_worker.engine.sizing import DEFAULT_KV_CACHE_BYTES
from cascade_worker.pipeline.frames import Attach, TensorSpec, Work
from cascade_worker.transport.frames import FrameError

# The narrowest dtype a KV cache is kept in (float16/bfloat16): the most tokens fit.
MIN_KV_ITEMSIZE = 2


def max_cache_tokens(config: ModelConfig) -> int:
    """The largest KV cache (positions per layer) a head of this model sizes for its
    stages: `cache_config`'s cap over every layer at the narrowest dtype, and never
    less than one full context."""
    per_token = 2 * config.num_layers * config.kv_heads * config.head_dim * MIN_KV_ITEMSIZE
    return max(DEFAULT_KV_CACHE_BYTES // per_token, config.max_position_embeddings)


def check_attach(attach: Attach, config: ModelConfig) -> CacheConfig:
    """The cache geometry `attach` asks for, if this stage may allocate it."""
    max_tokens = max_cache_tokens(config)
    limit = blocks_for(max_tokens, attach.block_size) + 1  # a head rounds up to a block
    if attach.num_blocks > limit:
        raise FrameError(
            f"attach.num_blocks: {attach.num_blocks} blocks of {attach.block_size} tokens "
            f"exceed this stage's KV cache limit of {limit} blocks ({max_tokens} tokens "
            f"for this model)"
        )
    return CacheConfig(attach.block_size, attach.num_blocks)


def check_work(work: Work, cache: CacheConfig, hidden: int) -> None:
    """A micro-batch fits the session's cache and its tensor is [tokens, hidden] (or
    [tokens] token ids, for a stage that starts at the embedding)."""
    batch, tensor = work.batch, work.tensor
    n = len(batch.seq_ids)
    lengths = (len(batch.start_positions), len(batch.num_new), len(batch.block_tables))
    if any(length != n for length in lengths):
        raise FrameError(
            f"work.batch: seq_ids, start_positions, num_new and block_tables differ in "
            f"length ({n}, {', '.join(map(str, lengths))})"
        )
    capacity = cache.capacity_tokens
    for start, new, table in zip(
        batch.start_positions, batch.num_new, batch.block_tables, strict=True
    ):
        if start + new > capacity or len(table) > cache.num_blocks:
            raise FrameError(
                f"work.batch: a sequence of {start + new} tokens in {len(table)} blocks "
                f"exceeds the session's KV cache ({capacity} tokens, {cache.num_blocks} blocks)"
            )
        if any(not 0 <= block < cache.num_blocks for block in table):
            last = cache.num_blocks - 1
            raise FrameError(f"work.batch.block_tables: a block id outside 0..{last}")
    tokens = sum(batch.num_new)
    if tensor.shape not in ((tokens, hidden), (tokens,)):  # hidden states, or token ids
        raise FrameError(
            f"work.tensor.shape: {tensor.shape}, expected ({tokens}, {hidden}) or ({tokens},)"
        )


def check_result(tensor: TensorSpec, rows: int | None, vocab: int | None) -> None:
    """A result answers a pending micro-batch with [rows, vocab] float32 logits."""
    if rows is None:
        raise FrameError("result.step: no micro-batch of this step is pending")
    if tensor.dtype != "float32" or len(tensor.shape) != 2 or tensor.shape[0] != rows:
        raise FrameError(f"result.tensor: {tensor.dtype}{list(tensor.shape)}, "
                         f"expected float32[{rows}, vocab]")  # fmt: skip
    if vocab is not None and tensor.shape[1] != vocab:
        raise FrameError(f"result.tensor.shape: {tensor.shape}, expected ({rows}, {vocab})")
