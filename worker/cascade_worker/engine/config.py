"""What the engine needs to know about a model, parsed once from HF config.json.

The engine runs the Llama family only (RMSNorm, rotary attention with grouped KV heads,
SwiGLU MLP): Llama, Qwen2 (q/k/v biases, optional sliding window from layer
`max_window_layers` on) and Mistral (sliding window on every layer), with RoPE default
or scaled (linear, dynamic, llama3, yarn: rope.py). Anything else -- another RoPE
scaling, another activation, an unknown architecture -- is refused here with a
ValueError naming the config field, before any weight is read, instead of producing
silently wrong tokens later.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cascade_worker.engine.rope import Rope

ARCHS = {  # config["architectures"][0] or model_type -> our name
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "MistralForCausalLM": "mistral",
    "llama": "llama",
    "qwen2": "qwen2",
    "mistral": "mistral",
}


@dataclass(frozen=True)
class ModelConfig:
    arch: str  # "llama" | "qwen2" | "mistral"
    num_layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    rope_theta: float
    rms_norm_eps: float
    max_position_embeddings: int
    attention_bias: bool  # q/k/v projections carry biases (Qwen2)
    tie_word_embeddings: bool  # no lm_head tensor: the LM head is embed_tokens
    # Per layer: attend to at most this many most recent positions (None: unbounded).
    # Mistral windows every layer; Qwen2 (use_sliding_window) from max_window_layers on.
    layer_windows: tuple[int | None, ...]
    eos_token_ids: tuple[int, ...]
    bos_token_id: int | None
    dtype: str  # the checkpoint's torch_dtype ("float16", ...)
    rope: Rope | None = None  # its RoPE scaling (None: default RoPE at rope_theta)

    @property
    def rope_params(self) -> Rope:
        return self.rope or Rope(
            "default", self.rope_theta, self.head_dim, self.max_position_embeddings
        )

    @property
    def sliding_window(self) -> int | None:
        """The window of windowed layers (None if no layer is windowed)."""
        return next((w for w in self.layer_windows if w is not None), None)

    @classmethod
    def from_hf(cls, config: dict[str, Any]) -> ModelConfig:
        """Parse HF config.json; ValueError naming the field if missing or unsupported."""
        names = [*(config.get("architectures") or []), config.get("model_type")]
        arch = next((ARCHS[n] for n in names if isinstance(n, str) and n in ARCHS), None)
        if arch is None:
            raise ValueError(
                f"architectures/model_type: {names} is not supported; "
                f"supported: {sorted(k for k in ARCHS if k[0].isupper())}"
            )
        hidden = _int(config, "hidden_size")
        heads = _int(config, "num_attention_heads")
        kv_heads = _int(config, "num_key_value_heads", heads)
        head_dim = _int(config, "head_dim", hidden // heads if hidden % heads == 0 else 0)
        if head_dim < 1 or head_dim % 2:
            raise ValueError(f"head_dim: need a positive even head size, got {head_dim}")
        if heads % kv_heads:
            raise ValueError(
                f"num_key_value_heads: {kv_heads} does not divide num_attention_heads {heads}"
            )
        act = config.get("hidden_act", "silu")
        if act != "silu":
            raise ValueError(f"hidden_act: only 'silu' is supported, got {act!r}")
        if config.get("mlp_bias"):
            raise ValueError("mlp_bias: MLP biases are not supported")
        num_layers = _int(config, "num_hidden_layers")
        eos = config.get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (int(eos),))
        bos = config.get("bos_token_id")
        rope = Rope.from_hf(config, head_dim)
        return cls(
            arch=arch,
            num_layers=num_layers,
            hidden=hidden,
            heads=heads,
            kv_heads=kv_heads,
            head_dim=head_dim,
            intermediate=_int(config, "intermediate_size"),
            vocab=_int(config, "vocab_size"),
            rope_theta=rope.theta,
            rms_norm_eps=_float(config, "rms_norm_eps", 1e-6),
            max_position_embeddings=_int(config, "max_position_embeddings", 2048),
            attention_bias=arch == "qwen2" or bool(config.get("attention_bias", False)),
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            layer_windows=_windows(config, arch, num_layers),
            eos_token_ids=eos_ids,
            bos_token_id=None if bos is None else int(bos),
            dtype=str(config.get("torch_dtype") or config.get("dtype") or "float32"),
            rope=rope,
        )


def _int(config: dict[str, Any], field: str, default: int | None = None) -> int:
    value = config.get(field, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{field}: need a positive integer, got {value!r}")
    return value


def _float(config: dict[str, Any], field: str, default: float) -> float:
    value = config.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"{field}: need a positive number, got {value!r}")
    return float(value)


def _windows(config: dict[str, Any], arch: str, num_layers: int) -> tuple[int | None, ...]:
    window = config.get("sliding_window")
    if arch == "llama" or window is None:
        return (None,) * num_layers
    window = _int(config, "sliding_window")
    if arch == "mistral":
        return (window,) * num_layers
    if not config.get("use_sliding_window", False):
        return (None,) * num_layers
    first = config.get("max_window_layers", num_layers)
    return tuple(window if i >= first else None for i in range(num_layers))
