"""StageModel: decoder layers [start, end) of a model with their own paged KV cache.

A stage is the unit a pipeline splits a model into: the first stage embeds token ids,
the last one applies the final norm and LM head, a middle one maps hidden states to
hidden states. Chaining stages [0, a), [a, b), [b, L) gives the same logits as one stage
[0, L) (parity-tested against transformers for every split). A stage holds no scheduling
state: positions and block tables arrive with each `StageBatch`, so stages in separate
processes only need the same `CacheConfig` as the scheduler that fills the tables.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Protocol

import torch
import torch.nn.functional as F

from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.device import torch_device
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.kv_cache import KVCache
from cascade_worker.engine.layers import (
    AttentionMeta,
    apply_rope,
    attention,
    rms_norm,
    rope_cos_sin,
    swiglu,
)
from cascade_worker.engine.weights import StageWeights, load_stage_weights

# attend(layer index within the stage, q [T, H, D], k, v [T, KVH, D]) -> [T, H * D]
Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


class CompiledRange(Protocol):
    """The stage's whole range compiled (compiled.CompiledLayers): x, meta -> hidden."""

    def __call__(self, x: torch.Tensor, meta: AttentionMeta) -> torch.Tensor: ...


class StageModel:
    def __init__(
        self,
        config: ModelConfig,
        weights: StageWeights,
        cache: CacheConfig,
        device: torch.device,
        kv: KVCache | None = None,
    ) -> None:
        """`kv`: a cache allocated ahead (a live scale-up's head), of this geometry."""
        self.config = config
        self.weights = weights
        self.start, self.end = weights.start, weights.end
        self.device = device
        self.dtype = weights.layers[0].q.dtype
        self.cache = (
            kv
            if kv is not None
            else KVCache(
                self.end - self.start,
                cache,
                config.kv_heads,
                config.head_dim,
                dtype=self.dtype,
                device=device,
            )
        )
        if self.cache.config != cache or len(self.cache.k) < self.end - self.start:
            raise ValueError("the KV cache given does not fit this stage")
        self.compiled: CompiledRange | None = None  # set by compiled.compile_stage
        self.rope = config.rope_params
        self._inv_freq = self.rope.inv_freq(0, device)  # all but dynamic RoPE: fixed
        self._rope_scaling = self.rope.attention_scaling  # fixed for every type

    def inv_freq(self, longest: int) -> torch.Tensor:
        """RoPE's inverse frequencies for a step whose longest context is `longest`."""
        if self.rope.kind == "dynamic" and longest > self.rope.max_positions:
            return self.rope.inv_freq(longest, self.device)
        return self._inv_freq

    @classmethod
    def load(
        cls,
        source: BlockStore | dict[str, torch.Tensor],
        config: ModelConfig,
        start: int,
        end: int,
        cache: CacheConfig,
        *,
        device: torch.device | str = "cpu",
        dtype: torch.dtype | None = None,
        kv: KVCache | None = None,
    ) -> StageModel:
        device = torch_device(device)
        weights = load_stage_weights(source, config, start, end, device=device, dtype=dtype)
        return cls(config, weights, cache, device, kv)

    @property
    def is_first(self) -> bool:
        return self.start == 0

    @property
    def is_last(self) -> bool:
        return self.end == self.config.num_layers

    def extend(self, more: StageWeights) -> None:
        """Append the layers that follow (a cooperating target's weights as they land,
        pipeline/cooperative.py); its KV cache must have been allocated for them."""
        if more.start != self.end or len(self.cache.k) < more.end - self.start:
            raise ValueError(f"cannot extend [{self.start}, {self.end}) by {more.start}..")
        self.weights.layers.extend(more.layers)
        self.weights.end = self.end = more.end
        self.weights.norm, self.weights.lm_head = more.norm, more.lm_head
        self.compiled = None  # compiled for the old range

    @torch.inference_mode()
    def forward(self, batch: StageBatch, layers: tuple[int, int] | None = None) -> torch.Tensor:
        """Hidden states [T, hidden] out; or, for the last stage, float32 logits
        [B, vocab] of each sequence's last new token ([T, vocab] with all_logits).
        `layers`: only [a, b) of this stage's (cooperative execution moves the split
        per batch); the embedding runs when a is 0, the norm and LM head when b is L.
        The whole range runs compiled when `compiled` is set and takes the step."""
        c, w = self.config, self.weights
        lo, hi = layers or (self.start, self.end)
        if not self.start <= lo < hi <= self.end:
            raise ValueError(f"layers [{lo}, {hi}) outside this stage's [{self.start}, {self.end})")
        x = batch.input.to(self.device, non_blocking=True)  # a blocking copy syncs the stream
        meta = AttentionMeta.build(batch, self.cache.config.block_size, self.device)
        if self.compiled is not None and (lo, hi) == (self.start, self.end):
            x = self.compiled(x, meta)
        else:
            attend = partial(self.attend, meta)
            x = self.run_layers(x, meta.positions, lo, hi, attend, self.inv_freq(meta.longest))
        if hi != c.num_layers:
            return x
        assert w.norm is not None and w.lm_head is not None
        if not batch.all_logits:
            x = x.index_select(0, meta.last_index)
        return w.lm_head(rms_norm(x, w.norm, c.rms_norm_eps)).float()

    def run_layers(
        self, x: torch.Tensor, positions: torch.Tensor, lo: int, hi: int, attend: Attend,
        inv_freq: torch.Tensor | None = None,
    ) -> torch.Tensor:  # fmt: skip
        """The embedding (when `lo` is 0) and decoder layers [lo, hi) over token ids or
        hidden states `x` at `positions`; `attend(layer, q, k, v)` does the paged part;
        `inv_freq` the step's RoPE frequencies (`inv_freq`; default: the fixed ones).
        One body for the eager and the compiled path (compiled.py), so they cannot drift."""
        c, w = self.config, self.weights
        if lo == 0:
            assert w.embed is not None
            x = F.embedding(x.long(), w.embed).to(self.dtype)
        else:
            x = x.to(self.dtype)
        inv = self._inv_freq if inv_freq is None else inv_freq
        cos, sin = rope_cos_sin(positions, inv, self._rope_scaling, self.dtype)
        tokens = x.shape[0]
        for i in range(lo - self.start, hi - self.start):
            lw = w.layers[i]
            h = rms_norm(x, lw.input_norm, c.rms_norm_eps)
            q = F.linear(h, lw.q, lw.q_bias).view(tokens, c.heads, c.head_dim)
            k = F.linear(h, lw.k, lw.k_bias).view(tokens, c.kv_heads, c.head_dim)
            v = F.linear(h, lw.v, lw.v_bias).view(tokens, c.kv_heads, c.head_dim)
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
            x = x + F.linear(attend(i, q, k, v), lw.o)
            x = x + swiglu(rms_norm(x, lw.post_norm, c.rms_norm_eps), lw.gate, lw.up, lw.down)
        return x

    def attend(
        self, meta: AttentionMeta, i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        """Layer i's new keys/values into the paged cache, then attention [T, H*D]."""
        self.cache.write(i, meta.slots, k, v)
        window = self.config.layer_windows[self.start + i]
        return attention(q, partial(self.cache.read, i), meta, window, (k, v))
