"""Rotary position embeddings and their context-extension scalings, as transformers
computes them (`modeling_rope_utils`), so Llama-3.x, YaRN-extended Qwen2 and
linear/NTK-scaled checkpoints give the same logits here.

`Rope` is parsed from config.json (`rope_scaling`, or transformers 5's
`rope_parameters`) before any weight is read; an unknown type or a missing field is a
ValueError naming it. `inv_freq(seq_len)` gives the inverse frequencies: every type but
`dynamic` ignores `seq_len`; `dynamic` (NTK) stretches the base once the step's longest
context passes the pre-training length, as transformers does per forward pass with the
batch's largest position. `attention_scaling` multiplies cos and sin (YaRN's mscale).
Parsing needs no torch (config.py imports this); the frequencies do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

TYPES = ("default", "linear", "dynamic", "llama3", "yarn")


@dataclass(frozen=True)
class Rope:
    kind: str
    theta: float
    head_dim: int
    max_positions: int  # max_position_embeddings (dynamic: the pre-training length)
    factor: float = 1.0
    original_max_positions: int | None = None  # llama3, yarn
    low_freq_factor: float = 1.0  # llama3
    high_freq_factor: float = 4.0  # llama3
    beta_fast: float = 32.0  # yarn
    beta_slow: float = 1.0  # yarn
    attention_factor: float | None = None  # yarn: None = from factor (and mscale)
    mscale: float | None = None  # yarn
    mscale_all_dim: float | None = None  # yarn
    truncate: bool = True  # yarn

    @classmethod
    def from_hf(cls, config: dict[str, Any], head_dim: int) -> Rope:
        field = "rope_parameters" if config.get("rope_parameters") else "rope_scaling"
        params = config.get(field) or {}
        if not isinstance(params, dict):
            raise ValueError(f"{field}: need an object, got {params!r}")
        kind = params.get("rope_type", params.get("type", "default"))
        if kind not in TYPES:
            raise ValueError(f"{field}: RoPE type {kind!r} is not supported; supported: {TYPES}")
        theta = _number(params, field, "rope_theta", config.get("rope_theta", 10000.0))
        max_positions = int(config.get("max_position_embeddings", 2048))
        rope = cls(kind, theta, head_dim, max_positions)
        if kind == "default":
            return rope
        factor = _number(params, field, "factor", None if kind != "yarn" else 0.0)
        original = params.get("original_max_position_embeddings")
        if kind == "llama3" and original is None:
            raise ValueError(f"{field}.original_max_position_embeddings: llama3 needs it")
        if kind == "yarn":
            original = original or max_positions
            factor = factor or max_positions / original
        if factor < 1.0 and kind != "yarn":
            raise ValueError(f"{field}.factor: need >= 1, got {factor}")
        opt = {
            k: params[k] for k in ("attention_factor", "mscale", "mscale_all_dim") if params.get(k)
        }
        return cls(
            kind, theta, head_dim, max_positions, factor=float(factor),
            original_max_positions=None if original is None else int(original),
            low_freq_factor=_number(params, field, "low_freq_factor", 1.0),
            high_freq_factor=_number(params, field, "high_freq_factor", 4.0),
            beta_fast=float(params.get("beta_fast") or 32.0),
            beta_slow=float(params.get("beta_slow") or 1.0),
            truncate=bool(params.get("truncate", True)),
            **{k: float(v) for k, v in opt.items()},
        )  # fmt: skip

    @property
    def attention_scaling(self) -> float:
        if self.kind != "yarn":
            return 1.0
        if self.attention_factor is not None:
            return self.attention_factor
        if self.mscale and self.mscale_all_dim:
            return _mscale(self.factor, self.mscale) / _mscale(self.factor, self.mscale_all_dim)
        return _mscale(self.factor)

    def inv_freq(self, seq_len: int = 0, device: torch.device | None = None) -> torch.Tensor:
        """float32 [head_dim / 2]; `seq_len`: the step's longest context (dynamic only)."""
        import torch

        dim, base = self.head_dim, self.theta
        exponents = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
        if self.kind == "dynamic":
            seq = max(seq_len, self.max_positions)
            stretch = self.factor * seq / self.max_positions - (self.factor - 1)
            base = base * stretch ** (dim / (dim - 2))
        inv = 1.0 / (base**exponents)
        if self.kind == "linear":
            return inv / self.factor
        if self.kind == "llama3":
            return self._llama3(inv)
        if self.kind == "yarn":
            return self._yarn(base**exponents)
        return inv

    def _llama3(self, inv: torch.Tensor) -> torch.Tensor:
        import torch

        assert self.original_max_positions is not None
        old = self.original_max_positions
        low_wavelen, high_wavelen = old / self.low_freq_factor, old / self.high_freq_factor
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / self.factor, inv)
        smooth = (old / wavelen - self.low_freq_factor) / (
            self.high_freq_factor - self.low_freq_factor
        )
        smoothed = (1 - smooth) * scaled / self.factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        return torch.where(medium, smoothed, scaled)

    def _yarn(self, pos_freqs: torch.Tensor) -> torch.Tensor:
        import torch

        assert self.original_max_positions is not None
        dim, base, original = self.head_dim, self.theta, self.original_max_positions

        def correction_dim(rotations: float) -> float:
            return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(base))

        low, high = correction_dim(self.beta_fast), correction_dim(self.beta_slow)
        if self.truncate:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, dim - 1)
        if low == high:
            high += 0.001  # no singular ramp
        ramp = ((torch.arange(dim // 2, dtype=torch.float32, device=pos_freqs.device) - low)
                / (high - low)).clamp(0, 1)  # fmt: skip
        extrapolate = 1 - ramp
        return (1.0 / (self.factor * pos_freqs)) * (1 - extrapolate) + (
            1.0 / pos_freqs
        ) * extrapolate


def _mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _number(params: dict[str, Any], field: str, key: str, default: float | None) -> float:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"{field}.{key}: need a non-negative number, got {value!r}")
    return float(value)
