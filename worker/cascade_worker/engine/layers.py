"""The Llama-family decoder math in plain torch, matching transformers' eager path.

Tensors are indexed by explicit ops (narrow, unsqueeze, index_select), not Python
subscripts: the same ops, and a FakeTensorMode test can place a step on a `cuda` device
on a machine without one (tests/unit/test_engine_fake_cuda.py).

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
    positions: torch.Tensor, inv_freq: torch.Tensor, scaling: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [T, head_dim] for token positions [T], from float32 inverse frequencies
    (rope.py) and the scaling that multiplies both (1 but for YaRN)."""
    freqs = positions.float().unsqueeze(1) * inv_freq.unsqueeze(0)
    emb = torch.cat((freqs, freqs), dim=-1)
    if scaling != 1.0:
        return (emb.cos() * scaling).to(dtype), (emb.sin() * scaling).to(dtype)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [T, heads, head_dim] by per-token cos/sin [T, head_dim]."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x.narrow(-1, half, half), x.narrow(-1, 0, half)), dim=-1)
    return x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1)


def swiglu(
    x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor
) -> torch.Tensor:
    return F.linear(F.silu(F.linear(x, gate)) * F.linear(x, up), down)


class Upload:
    """A step's index lists, sent to the device as one int64 tensor (from pinned memory
    on CUDA, so the copy is asynchronous: a blocking copy would make the host wait for
    the stream), then handed out as views."""

    def __init__(self) -> None:
        self._flat: list[int] = []
        self._parts: list[tuple[int, int, tuple[int, ...]]] = []

    def add(self, values: list[int], shape: tuple[int, ...] | None = None) -> int:
        """Queue `values` (row-major for `shape`); the index of its tensor in `send`."""
        self._parts.append((len(self._flat), len(values), shape or (len(values),)))
        self._flat += values
        return len(self._parts) - 1

    def send(self, device: torch.device) -> list[torch.Tensor]:
        host = torch.tensor(self._flat, dtype=torch.int64)
        if device.type == "cuda" and torch.cuda.is_available():
            host = host.pin_memory()
        flat = host.to(device, non_blocking=True)
        return [flat.narrow(0, a, n).view(shape) for a, n, shape in self._parts]


@dataclass(frozen=True)
class GroupPlan:
    parts: dict[str, int]  # each tensor's index in the step's Upload
    lmax: int  # the longest context
    fresh: tuple[int, int] | None


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
    fresh: tuple[int, int] | None = None  # (first flat token, tokens)

    @classmethod
    def plan(cls, rows: list[int], batch: StageBatch, offsets: list[int], up: Upload) -> GroupPlan:
        """The group's index lists, added to the step's upload (pure Python)."""
        start = [batch.start_positions[r] for r in rows]
        num_new = [batch.num_new[r] for r in rows]
        ctx = [s + n for s, n in zip(start, num_new, strict=True)]
        b, qmax = len(rows), max(num_new)
        width = max(len(batch.block_tables[r]) for r in rows)
        tables: list[int] = []
        for r in rows:
            table = batch.block_tables[r]
            tables += [*table, *[0] * (width - len(table))]
        valid = [int(i < n) for n in num_new for i in range(qmax)]
        index = [offsets[r] + i if i < n else 0 for r, n in zip(rows, num_new, strict=True)
                 for i in range(qmax)]  # fmt: skip
        parts = {
            "tokens": up.add([x for x, v in zip(index, valid, strict=True) if v]),
            "valid_rows": up.add([i for i, v in enumerate(valid) if v]),
            "table": up.add(tables, (b, width)),
            "q_index": up.add(index, (b, qmax)),
            "q_valid": up.add(valid, (b, qmax)),
            "q_pos": up.add([s + i for s in start for i in range(qmax)], (b, qmax)),
            "ctx_len": up.add(ctx),
        }
        fresh = (offsets[rows[0]], num_new[0])
        return GroupPlan(parts, max(ctx), fresh if b == 1 and start[0] == 0 else None)

    @classmethod
    def build(cls, plan: GroupPlan, sent: list[torch.Tensor], block_size: int) -> AttentionGroup:
        """The group's tensors from the step's upload; the context's cache slots computed
        on the device from the block table."""
        t = {name: sent[i] for name, i in plan.parts.items()}
        j = torch.arange(plan.lmax, device=t["table"].device)
        gather = t["table"].index_select(1, j // block_size) * block_size + j % block_size
        return cls(
            tokens=t["tokens"],
            valid_rows=t["valid_rows"],
            gather=torch.where(j.unsqueeze(0) < t["ctx_len"].unsqueeze(1), gather, 0),
            q_index=t["q_index"],
            q_valid=t["q_valid"] != 0,
            q_pos=t["q_pos"],
            ctx_len=t["ctx_len"],
            _masks={},
            fresh=plan.fresh,
        )

    def mask(self, window: int | None) -> torch.Tensor:
        """[b, 1, Qmax, Lmax] bool: may this query see this key (cached per window)."""
        if window not in self._masks:
            j = torch.arange(self.gather.shape[1], device=self.gather.device).view(1, 1, -1)
            q = self.q_pos.unsqueeze(2)
            allowed = (j <= q) & (j < self.ctx_len.view(-1, 1, 1))
            if window is not None:
                allowed = allowed & (j > q - window)
            # Padding queries see key 0, so their softmax rows stay finite (then dropped).
            allowed = allowed | (self.q_valid.logical_not().unsqueeze(2) & (j == 0))
            self._masks[window] = allowed.unsqueeze(1)
        return self._masks[window]


@dataclass
class AttentionMeta:
    """A step's attention indices, built once and shared by all layers."""

    positions: torch.Tensor  # [T] position of every new token
    slots: torch.Tensor  # [T] cache slot each new token's K/V is written to
    last_index: torch.Tensor  # [B] flat index of each sequence's last new token
    groups: list[AttentionGroup]
    longest: int = 0  # the longest context after this step (dynamic RoPE reads it)

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
        up = Upload()
        parts = [up.add(positions), up.add(slots), up.add([o - 1 for o in offsets[1:]])]
        plans = [AttentionGroup.plan(r, batch, offsets, up) for r in rows]
        sent = up.send(device)
        groups = [AttentionGroup.build(p, sent, block_size) for p in plans]
        if len(groups) == 1 and len(decodes) == batch.num_seqs:
            groups[0].whole = True  # one bucket holds every decode, in order
        return cls(
            positions=sent[parts[0]],
            slots=sent[parts[1]],
            last_index=sent[parts[2]],
            groups=groups,
            longest=max(p.lmax for p in plans),
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
            a, n = g.fresh

            def heads_first(t: torch.Tensor, a: int = a, n: int = n) -> torch.Tensor:
                return t.narrow(0, a, n).transpose(0, 1).unsqueeze(0)  # [1, heads, n, D]

            o = F.scaled_dot_product_attention(
                heads_first(q), heads_first(new_kv[0]), heads_first(new_kv[1]),
                is_causal=True, enable_gqa=q.shape[1] != new_kv[0].shape[1],
            )  # fmt: skip
            rows = torch.arange(a, a + n, device=out.device)
            out.index_copy_(0, rows, o.squeeze(0).transpose(0, 1))
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
