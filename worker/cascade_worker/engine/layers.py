"""The Llama-family decoder math in plain torch, matching transformers' eager path.

RMSNorm computes in float32 and scales in the input dtype; RoPE uses HF's rotate_half
convention (the two halves of each head, not interleaved pairs) with cos/sin computed in
float32; attention is grouped-query with a causal mask, optionally limited to the last
`window` positions (Mistral: key j is visible from query i iff i - window < j <= i).

Attention over a continuous batch: one masked `scaled_dot_product_attention` call for
all the step's decodes together and one per prefill chunk (`AttentionGroup`), each over
its sequences' contexts (cached + new) gathered from the paged cache, so no query is
padded to another sequence's length. `AttentionMeta` holds those indices; it is built
once per step and shared by all layers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from cascade_worker.engine.batch import StageBatch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if x.dtype == torch.float32:  # one fused kernel, the same arithmetic in float32
        return F.rms_norm(x, weight.shape, weight, eps)
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def rope_cos_sin(
    positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [T, head_dim] for token positions [T]."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64, device=positions.device).float()
    inv_freq = 1.0 / (theta ** (exponents / head_dim))
    freqs = positions.float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [T, heads, head_dim] by per-token cos/sin [T, head_dim]."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None, :] + rotated * sin[:, None, :]


def swiglu(
    x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor
) -> torch.Tensor:
    return F.linear(F.silu(F.linear(x, gate)) * F.linear(x, up), down)


@dataclass
class AttentionGroup:
    """Sequences attended in one call: every decode (one query each) together, each
    multi-token chunk alone. One padded call over all of them would pad every decode's
    query to the longest chunk: a 180-token prefill beside 31 decodes cost 32 prefills.

    Its bounds come from the scheduler's lists, never from a device tensor, so building
    a step's indices does not wait for the device."""

    tokens: torch.Tensor  # [n] flat index of each real query, in padded row order
    valid_rows: torch.Tensor  # [n] index of each real query in the flattened [b * Qmax]
    gather: torch.Tensor  # [b, Lmax] cache slots of each sequence's context
    q_index: torch.Tensor  # [b, Qmax] flat token index of each padded query
    q_valid: torch.Tensor  # [b, Qmax] which padded queries are real
    q_pos: torch.Tensor  # [b, Qmax] position of each padded query
    ctx_len: torch.Tensor  # [b] context length after this step
    _masks: dict[int | None, torch.Tensor]
    # Every query of the step, one per sequence in order (a step of decodes only): the
    # queries and outputs are views, with no gather or scatter around the attention.
    whole: bool = False
    # One chunk with nothing cached before it (a prompt's first chunk): it attends to
    # its own new keys, causally, through SDPA's fused kernels; no gather, no mask.
    fresh: slice | None = None

    @classmethod
    def build(
        cls, rows: list[int], batch: StageBatch, offsets: list[int], block_size: int,
        device: torch.device,
    ) -> AttentionGroup:  # fmt: skip
        start = [batch.start_positions[r] for r in rows]
        num_new = [batch.num_new[r] for r in rows]
        ctx = [s + n for s, n in zip(start, num_new, strict=True)]
        qmax = max(num_new)
        width = max(len(batch.block_tables[r]) for r in rows)
        tables = [[*batch.block_tables[r], *[0] * (width - len(batch.block_tables[r]))]
                  for r in rows]  # fmt: skip
        q_valid = [[i < n for i in range(qmax)] for n in num_new]
        q_index = [[offsets[r] + i if i < n else 0 for i in range(qmax)]
                   for r, n in zip(rows, num_new, strict=True)]  # fmt: skip

        def t(values: object, dtype: torch.dtype = torch.int64) -> torch.Tensor:
            return torch.tensor(values, dtype=dtype).to(device, non_blocking=True)

        ctx_len = t(ctx)
        j = torch.arange(max(ctx), device=device)
        table = t(tables)
        gather = table[:, j // block_size] * block_size + j % block_size
        flat_valid = [v for row in q_valid for v in row]
        flat_index = [x for row in q_index for x in row]
        single = len(rows) == 1 and start[0] == 0
        return cls(
            tokens=t([x for x, v in zip(flat_index, flat_valid, strict=True) if v]),
            valid_rows=t([i for i, v in enumerate(flat_valid) if v]),
            gather=torch.where(j[None, :] < ctx_len[:, None], gather, 0),
            q_index=t(q_index),
            q_valid=t(q_valid, torch.bool),
            q_pos=t([[s + i for i in range(qmax)] for s in start]),
            ctx_len=ctx_len,
            _masks={},
            fresh=slice(offsets[rows[0]], offsets[rows[0]] + num_new[0]) if single else None,
        )

    def mask(self, window: int | None) -> torch.Tensor:
        """[b, 1, Qmax, Lmax] bool: may this query see this key (cached per window)."""
        if window not in self._masks:
            j = torch.arange(self.gather.shape[1], device=self.gather.device)[None, None, :]
            q = self.q_pos[:, :, None]
            allowed = (j <= q) & (j < self.ctx_len[:, None, None])
            if window is not None:
                allowed &= j > q - window
            # Padding queries see key 0, so their softmax rows stay finite (then dropped).
            allowed |= ~self.q_valid[:, :, None] & (j == 0)
            self._masks[window] = allowed[:, None]
        return self._masks[window]


@dataclass
class AttentionMeta:
    """A step's attention indices, built once and shared by all layers."""

    positions: torch.Tensor  # [T] position of every new token
    slots: torch.Tensor  # [T] cache slot each new token's K/V is written to
    last_index: torch.Tensor  # [B] flat index of each sequence's last new token
    groups: list[AttentionGroup]

    @classmethod
    def build(cls, batch: StageBatch, block_size: int, device: torch.device) -> AttentionMeta:
        spans = zip(batch.start_positions, batch.num_new, batch.block_tables, strict=True)
        positions: list[int] = []
        slots: list[int] = []
        for s, n, table in spans:
            if len(table) * block_size < s + n:
                raise ValueError(f"{len(table)} blocks of {block_size} cannot hold {s + n} tokens")
            positions += range(s, s + n)
            slots += [table[p // block_size] * block_size + p % block_size for p in range(s, s + n)]
        offsets = [0]
        for n in batch.num_new:
            offsets.append(offsets[-1] + n)
        decodes = [i for i, n in enumerate(batch.num_new) if n == 1]
        chunks = [[i] for i, n in enumerate(batch.num_new) if n > 1]
        rows = decode_groups(decodes, [s + 1 for s in batch.start_positions]) + chunks
        groups = [AttentionGroup.build(r, batch, offsets, block_size, device) for r in rows]
        if len(groups) == 1 and len(decodes) == batch.num_seqs:
            groups[0].whole = True  # one bucket holds every decode, in order

        def t(values: list[int]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.int64).to(device, non_blocking=True)

        return cls(
            positions=t(positions),
            slots=t(slots),
            last_index=t([o - 1 for o in offsets[1:]]),
            groups=groups,
        )


DECODE_BUCKET_TOKENS = 64  # decodes with contexts up to this long share one group


def decode_groups(rows: list[int], ctx_len: list[int]) -> list[list[int]]:
    """The step's decodes grouped by context length, in powers of two above
    `DECODE_BUCKET_TOKENS`: (0, 64], (64, 128], (128, 256], ...

    One attention call gathers every row's context padded to the group's longest, so
    one long context made all decodes gather it: 31 decodes at 16 tokens beside one at
    700 cost 125 ms a step on one CPU thread, against 15 ms for the 31 alone. Within a
    bucket a row is padded at most 2x; there are at most log2(longest / 64) + 1 calls.
    """
    buckets: dict[int, list[int]] = {}
    for i in rows:
        key = ((ctx_len[i] - 1) // DECODE_BUCKET_TOKENS).bit_length()  # ctx_len >= 1
        buckets.setdefault(key, []).append(i)
    return [buckets[k] for k in sorted(buckets)]


KVReader = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def attention(
    q: torch.Tensor, read_kv: KVReader, meta: AttentionMeta, window: int | None,
    new_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:  # fmt: skip
    """q [T, H, D] of the new tokens -> [T, H*D]; `read_kv(gather)` gives one group's
    contexts k, v [b, Lmax, KVH, D] from the cache; `new_kv` the step's own new keys and
    values [T, KVH, D], which a fresh chunk attends to directly."""
    out = q.new_empty(q.shape[0], q.shape[1], q.shape[2])
    for g in meta.groups:
        if g.fresh is not None and window is None and new_kv is not None:
            span = g.fresh
            o = F.scaled_dot_product_attention(
                q[span].transpose(0, 1)[None],
                new_kv[0][span].transpose(0, 1)[None],
                new_kv[1][span].transpose(0, 1)[None],
                is_causal=True,
                enable_gqa=q.shape[1] != new_kv[0].shape[1],
            )
            out[span] = o[0].transpose(0, 1)
            continue
        k, v = read_kv(g.gather)
        b, qmax = g.q_index.shape
        # index_select/index_copy_ with indices built once a step: a step's per-layer
        # boolean and 2-D indexing cost more than the attention itself at decode sizes.
        qp = q.view(b, 1, *q.shape[1:]) if g.whole else q.index_select(0, g.q_index.reshape(-1))
        qp = qp.view(b, qmax, *q.shape[1:]).transpose(1, 2)  # [b, H, Qmax, D]
        o = F.scaled_dot_product_attention(
            qp,
            k.transpose(1, 2),
            v.transpose(1, 2),
            attn_mask=g.mask(window),
            enable_gqa=q.shape[1] != k.shape[2],
        )
        o = o.transpose(1, 2).reshape(b * qmax, *q.shape[1:])
        if g.whole:
            return o.reshape(q.shape[0], -1)
        out.index_copy_(0, g.tokens, o.index_select(0, g.valid_rows))  # [n, H, D]
    return out.reshape(q.shape[0], -1)
