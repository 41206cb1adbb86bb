"""Next-token choice: greedy, temperature, top-k and top-p, reproducible per request.

Every request owns a `torch.Generator` seeded from its `seed` (or from the OS when it has
none), and its row is sampled with that generator alone; so a seeded request draws the
same random numbers whatever else shares its batch, and the same seed and prompt give
the same tokens. Greedy rows (temperature 0) take the argmax and draw nothing. Unset
fields are the model's defaults (engine/generation_config.py), resolved before this.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import torch

from cascade_protocol.generate import SamplingParams
from cascade_worker.engine.generation_config import GenerationConfig


@dataclass
class SamplerState:
    temperature: float
    top_p: float
    generator: torch.Generator | None  # None for greedy
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
            generator = torch.Generator(device="cpu").manual_seed(seed)
        return cls(params.temperature, params.top_p, generator, params.top_k or 0)


def top_k_filter(logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """Logits [vocab] with all but the top_k largest set to -inf (0 keeps all)."""
    if top_k <= 0 or top_k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, top_k).values[-1]
    return torch.where(logits < kth, float("-inf"), logits)


def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero all but the smallest set of most likely tokens whose mass reaches top_p
    (the most likely token always stays), then renormalize. probs: [vocab]."""
    if top_p >= 1.0:
        return probs
    sorted_probs, order = torch.sort(probs, descending=True)
    before = torch.cumsum(sorted_probs, 0) - sorted_probs  # mass of strictly likelier tokens
    sorted_probs = torch.where(before < top_p, sorted_probs, 0.0)
    sorted_probs[0] = sorted_probs[0].clamp_min(torch.finfo(probs.dtype).tiny)
    kept = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    return kept / kept.sum()


def sample_row(logits: torch.Tensor, state: SamplerState) -> int:
    """One token from float logits [vocab] (on any device)."""
    if state.generator is None:
        return int(torch.argmax(logits))
    logits = top_k_filter(logits.float().cpu(), state.top_k)
    probs = torch.softmax(logits / state.temperature, dim=-1)
    probs = top_p_filter(probs, state.top_p)
    return int(torch.multinomial(probs, 1, generator=state.generator))


def sample(logits: torch.Tensor, states: list[SamplerState]) -> list[int]:
    """Tokens for logits [B, vocab], row i sampled with states[i]."""
    greedy = torch.argmax(logits, dim=-1).tolist()
    return [
        int(greedy[i]) if s.generator is None else sample_row(logits[i], s)
        for i, s in enumerate(states)
    ]
