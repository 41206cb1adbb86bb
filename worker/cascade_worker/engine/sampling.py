"""Next-token choice: greedy, temperature, top-k and top-p, batched on the logits' device.

One step samples every row together: greedy rows take the argmax; sampled rows are
scaled by their temperatures, cut to their top-k with one `topk` over the batch, turned
into probabilities, and drawn by inverse CDF in vocabulary order, with no sort of the
vocabulary. Top-p is exact by rejection (the scheme of FlashInfer's sort-free top-p
sampler): draw from the tokens above a per-row pivot; a draw whose strictly likelier
tokens already hold `top_p` of the mass is outside the nucleus, and so is every token no
likelier than it, so the pivot rises to it and the row draws again. The nucleus holds at
least `top_p` of the proposal's mass, so a row needs about 1 / top_p draws. A per-row
loop with a full sort cost 3.1 s a step at batch 64 over a 128k vocabulary on one CPU
thread (`cascade bench sampling`; bench/results/sampling-*.json).

Every request owns a `random.Random` seeded from its `seed` (or from the OS when it has
none) and each of its draws takes one uniform from it, so a seeded request draws the
same tokens whatever else shares its batch (on another device a draw that falls on a
running sum's rounding may go the other way); the draws are host floats, no torch op, so
nothing waits for the device to make them. Unset fields are the
model's defaults (engine/generation_config.py), resolved before this. The only host
synchronisations are the acceptance test of a top-p round and the step's token list.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass

import torch

from cascade_protocol.generate import SamplingParams
from cascade_worker.engine.generation_config import GenerationConfig

MAX_TOP_P_ROUNDS = 32  # then the rows still drawing take the sorted nucleus


@dataclass
class SamplerState:
    temperature: float
    top_p: float
    generator: random.Random | None  # None for greedy
    top_k: int = 0  # 0: every token

    @classmethod
    def from_params(cls, params: SamplingParams) -> SamplerState:
        """From the engine's resolved params; a field still unset gets the defaults a
        model without a generation config has (generation_config.py, one place)."""
        params = GenerationConfig().apply(params)
        assert params.temperature is not None and params.top_p is not None
        generator = None
        if params.temperature > 0:
            seed = params.seed if params.seed is not None else secrets.randbits(63)
            generator = random.Random(seed)
        return cls(params.temperature, params.top_p, generator, params.top_k or 0)

    def uniform(self) -> float:
        assert self.generator is not None
        return self.generator.random()


def top_k_filter(logits: torch.Tensor, top_k: list[int] | int) -> torch.Tensor:
    """Logits [..., vocab] with all but each row's top_k largest set to -inf (0 keeps
    all); `top_k` one count for every row or one per row of a [B, vocab] batch."""
    ks = [top_k] if isinstance(top_k, int) else top_k
    vocab = logits.shape[-1]
    if all(k <= 0 or k >= vocab for k in ks):
        return logits
    widest = max(k for k in ks if 0 < k < vocab)
    values = torch.topk(logits, widest, dim=-1).values
    index = [min(k, widest) - 1 if 0 < k < vocab else 0 for k in ks]
    kth = values.gather(-1, torch.tensor(index, device=logits.device).view(*values.shape[:-1], 1))
    keep_all = torch.tensor([k <= 0 or k >= vocab for k in ks], device=logits.device)
    kth = torch.where(keep_all.view(kth.shape), float("-inf"), kth)
    return torch.where(logits < kth, float("-inf"), logits)


def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero all but the smallest set of most likely tokens whose mass reaches top_p
    (the most likely token always stays), then renormalize. probs: [..., vocab]. The
    reference the rejection sampler is tested against, and its fallback."""
    if top_p >= 1.0:
        return probs
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    before = torch.cumsum(sorted_probs, -1) - sorted_probs  # mass of strictly likelier
    sorted_probs = torch.where(before < top_p, sorted_probs, 0.0)
    sorted_probs[..., 0] = sorted_probs[..., 0].clamp_min(torch.finfo(probs.dtype).tiny)
    kept = torch.zeros_like(probs).scatter_(-1, order, sorted_probs)
    return kept / kept.sum(-1, keepdim=True)


CPU_PASS_ELEMENTS = 1 << 20  # logits a CPU pass takes: temporaries the allocator reuses


def sample(logits: torch.Tensor, states: list[SamplerState]) -> list[int]:
    """Tokens for logits [B, vocab], row i sampled with states[i]."""
    return [int(t) for t in sample_on_device(logits, states).tolist()]


def sample_on_device(logits: torch.Tensor, states: list[SamplerState]) -> torch.Tensor:
    """Tokens [B] (int64, on the logits' device) for logits [B, vocab]."""
    rows = [i for i, s in enumerate(states) if s.generator is not None]
    if len(rows) < len(states):
        tokens = torch.argmax(logits, dim=-1)
    else:  # every row drawn: no argmax over the vocabulary
        tokens = torch.empty(len(states), dtype=torch.int64, device=logits.device)
    if not rows:
        return tokens
    # On a CPU a fresh 128k-wide temporary costs more than the arithmetic on it (new
    # pages: 12 ms of a 32 ms step at batch 64), so passes of a few rows; one on a GPU.
    step = len(rows)
    if logits.device.type == "cpu":
        step = max(1, CPU_PASS_ELEMENTS // logits.shape[-1])
    for a in range(0, len(rows), step):
        part = rows[a : a + step]
        where = torch.tensor(part, device=logits.device)
        drawn = _draw(logits.index_select(0, where), [states[i] for i in part])
        tokens.index_copy_(0, where, drawn)
    return tokens


def _draw(logits: torch.Tensor, states: list[SamplerState]) -> torch.Tensor:
    """One token per row of [n, vocab] logits, every row sampled. A batch whose every
    row has a top-k works on the k likeliest columns alone (top-k commutes with a
    positive temperature); otherwise the scaled logits are the one full-width
    temporary, worked on in place."""
    device, vocab = logits.device, logits.shape[-1]
    scale = torch.tensor([s.temperature for s in states], device=device).unsqueeze(1)
    ks = [s.top_k for s in states]
    if all(0 < k < vocab for k in ks):
        x, columns = torch.topk(logits.float(), max(ks), dim=-1)  # likeliest first
        k = torch.tensor(ks, device=device).unsqueeze(1)
        cut = torch.arange(x.shape[1], device=device) >= k
        x = x.div_(scale).masked_fill_(cut, float("-inf"))
        return columns.gather(1, _nucleus(x, states).unsqueeze(1)).squeeze(1)
    return _nucleus(top_k_filter(logits.float() / scale, ks), states)


def _nucleus(x: torch.Tensor, states: list[SamplerState]) -> torch.Tensor:
    """One column per row of scaled logits [n, w], drawn by inverse CDF within each
    row's top-p nucleus, by rejection (module docstring)."""
    device = x.device
    w = torch.softmax(x, dim=-1)  # one fused pass; later rounds zero what they rule out
    tokens = _inverse_cdf(w, [s.uniform() for s in states])
    top_p = [s.top_p for s in states]
    active = [i for i, p in enumerate(top_p) if p < 1.0]
    if not active:
        return tokens
    limit = torch.tensor(top_p, device=device) * w.sum(-1)
    for _ in range(MAX_TOP_P_ROUNDS):
        whole = len(active) == len(states)
        rows = torch.tensor(active, device=device)
        rw = w if whole else w.index_select(0, rows)
        drawn = rw.gather(1, tokens.index_select(0, rows).unsqueeze(1))
        likelier = torch.where(rw > drawn, rw, 0.0).sum(-1)
        inside = (likelier < limit.index_select(0, rows)).tolist()
        keep = [j for j, ok in enumerate(inside) if not ok]
        if not keep:
            return tokens
        active = [active[j] for j in keep]
        redo = torch.tensor(active, device=device)
        # Every token no likelier than a draw outside the nucleus is outside it too.
        out = torch.tensor(keep, device=device)
        rw, drawn = rw.index_select(0, out), drawn.index_select(0, out)
        proposal = rw.where(rw > drawn, 0.0)
        w.index_copy_(0, redo, proposal)
        tokens.index_copy_(0, redo, _inverse_cdf(proposal, [states[i].uniform() for i in active]))
    for i in active:  # a nucleus this unlikely to be hit: the exact sorted filter
        row = top_p_filter(w[i] / w[i].sum(), top_p[i])
        tokens[i] = _inverse_cdf(row.unsqueeze(0), [states[i].uniform()]).squeeze(0)
    return tokens


CHUNK = 512  # columns per partial sum of the two-level inverse CDF


def _inverse_cdf(w: torch.Tensor, uniforms: list[float]) -> torch.Tensor:
    """One column per row of non-negative weights [n, v], each with probability in
    proportion to its weight: the first column whose running sum passes u x total. Two
    levels (sums of CHUNK columns, then the one chunk's running sum), so nothing of the
    full width is written."""
    n, v = w.shape
    u = torch.tensor(uniforms, device=w.device, dtype=w.dtype).unsqueeze(1)
    full = v // CHUNK * CHUNK
    sums = w.narrow(1, 0, full).reshape(n, -1, CHUNK).sum(-1)
    if full < v:
        sums = torch.cat([sums, w.narrow(1, full, v - full).sum(-1, keepdim=True)], dim=1)
    running = torch.cumsum(sums, dim=-1)
    target = u * running.narrow(1, running.shape[1] - 1, 1)
    chunk = torch.searchsorted(running, target, right=True).clamp_(max=sums.shape[1] - 1)
    rest = (target - running.gather(1, chunk) + sums.gather(1, chunk)).clamp_(min=0.0)
    cols = chunk * CHUNK + torch.arange(CHUNK, device=w.device)  # [n, CHUNK]
    part = w.gather(1, cols.clamp(max=v - 1)).masked_fill_(cols >= v, 0.0)
    # The chunk's last positive column bounds a pick that rounding pushed past the end.
    last = CHUNK - 1 - torch.argmax((part > 0).flip(-1).to(torch.int8), dim=-1, keepdim=True)
    pick = torch.searchsorted(torch.cumsum(part, dim=-1), rest, right=True)
    return (chunk * CHUNK + torch.minimum(pick, last)).squeeze(1)
