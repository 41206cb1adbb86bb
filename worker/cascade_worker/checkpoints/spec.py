"""Model shapes: from a few CLI numbers to HF config.json and parameter shapes (pure).

Three Llama-family layouts share one parameter set (RMSNorm, rotary attention with
grouped KV heads, SwiGLU MLP, untied LM head): Llama; Qwen2, whose q/k/v projections
carry biases; Mistral, which adds sliding-window attention. `resolve_spec` fills
defaults and, for `--target-mb`, picks the layer count (or, when layers are fixed, the
hidden size) so the checkpoint comes out near the requested size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

ARCHS: dict[str, tuple[str, str]] = {  # --arch -> (architectures[0], model_type)
    "llama": ("LlamaForCausalLM", "llama"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2"),
    "mistral": ("MistralForCausalLM", "mistral"),
}
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
HIDDEN_STEP = 64
# RoPE scaling types `cascade model init --rope-scaling` writes, with their usual factor
# (Llama-3.1's llama3 8, Qwen2.5's yarn 4).
ROPE_FACTORS = {"default": 1.0, "linear": 2.0, "dynamic": 2.0, "llama3": 8.0, "yarn": 4.0}
SLIDING_WINDOW = 4096


@dataclass(frozen=True)
class ModelSpec:
    arch: str = "llama"
    layers: int = 4
    hidden: int = 256
    heads: int = 8
    kv_heads: int = 4
    intermediate: int = 704
    vocab: int = 1024
    max_positions: int = 2048
    dtype: str = "float16"
    seed: int = 0
    # RoPE scaling written into config.json (engine/rope.py reads it): default, linear,
    # dynamic, llama3 or yarn; the pre-training length is max_positions / rope_factor.
    rope_scaling: str = "default"
    rope_factor: float = 0.0  # 0: the type's usual (llama3 8, yarn 4, linear/dynamic 2)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def validate(self) -> ModelSpec:
        if self.arch not in ARCHS:
            raise ValueError(f"unknown arch {self.arch!r}; choose from {sorted(ARCHS)}")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"unknown dtype {self.dtype!r}; choose from {sorted(DTYPE_BYTES)}")
        for field in ("layers", "hidden", "heads", "kv_heads", "intermediate", "vocab"):
            if getattr(self, field) < 1:
                raise ValueError(f"{field} must be >= 1")
        if self.hidden % self.heads or self.head_dim % 2:
            raise ValueError(f"hidden {self.hidden} must be heads {self.heads} x an even head_dim")
        if self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} must be a multiple of kv_heads {self.kv_heads}")
        if self.rope_scaling not in ROPE_FACTORS:
            raise ValueError(
                f"unknown rope scaling {self.rope_scaling!r}; choose from {sorted(ROPE_FACTORS)}"
            )
        if self.rope_factor and self.rope_factor < 1:
            raise ValueError(f"rope factor must be >= 1, got {self.rope_factor}")
        return self


def default_intermediate(hidden: int) -> int:
    """Llama's SwiGLU width: about 8/3 of hidden, rounded up to a multiple of 64."""
    return -(-(hidden * 8 // 3) // 64) * 64


def param_shapes(spec: ModelSpec) -> list[tuple[str, tuple[int, ...]]]:
    """HF parameter names and shapes, in checkpoint order."""
    h, q, kv, i = (
        spec.hidden,
        spec.heads * spec.head_dim,
        spec.kv_heads * spec.head_dim,
        spec.intermediate,
    )
    shapes: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (spec.vocab, h))]
    for n in range(spec.layers):
        p = f"model.layers.{n}."
        shapes += [
            (p + "input_layernorm.weight", (h,)),
            (p + "self_attn.q_proj.weight", (q, h)),
            (p + "self_attn.k_proj.weight", (kv, h)),
            (p + "self_attn.v_proj.weight", (kv, h)),
        ]
        if spec.arch == "qwen2":
            shapes += [
                (p + "self_attn.q_proj.bias", (q,)),
                (p + "self_attn.k_proj.bias", (kv,)),
                (p + "self_attn.v_proj.bias", (kv,)),
            ]
        shapes += [
            (p + "self_attn.o_proj.weight", (h, q)),
            (p + "post_attention_layernorm.weight", (h,)),
            (p + "mlp.gate_proj.weight", (i, h)),
            (p + "mlp.up_proj.weight", (i, h)),
            (p + "mlp.down_proj.weight", (h, i)),
        ]
    shapes += [("model.norm.weight", (h,)), ("lm_head.weight", (spec.vocab, h))]
    return shapes


def checkpoint_bytes(spec: ModelSpec) -> int:
    """Bytes of tensor data (what the safetensors files hold, headers aside)."""
    count = 0
    for _, shape in param_shapes(spec):
        n = 1
        for d in shape:
            n *= d
        count += n
    return count * DTYPE_BYTES[spec.dtype]


def resolve_spec(
    spec: ModelSpec,
    *,
    target_mb: float | None = None,
    layers_given: bool = False,
    hidden_given: bool = False,
    intermediate_given: bool = False,
) -> ModelSpec:
    """Validate, and with `target_mb` size the model: layers if free, else hidden."""
    if not intermediate_given:
        spec = replace(spec, intermediate=default_intermediate(spec.hidden))
    if target_mb is None:
        return spec.validate()
    if target_mb <= 0:
        raise ValueError("--target-mb must be positive")
    target = int(target_mb * 1024 * 1024)
    if not layers_given:
        one = checkpoint_bytes(replace(spec, layers=1))
        per_layer = checkpoint_bytes(replace(spec, layers=2)) - one
        layers = max(1, round((target - (one - per_layer)) / per_layer))
        return replace(spec, layers=layers).validate()
    if hidden_given:
        raise ValueError("--target-mb picks --layers or --hidden; give at most one of them")
    step = HIDDEN_STEP * spec.heads // _gcd(HIDDEN_STEP, spec.heads)
    best: ModelSpec | None = None
    hidden = step
    while True:
        cand = replace(spec, hidden=hidden)
        if not intermediate_given:
            cand = replace(cand, intermediate=default_intermediate(hidden))
        if best is None or abs(checkpoint_bytes(cand) - target) < abs(
            checkpoint_bytes(best) - target
        ):
            best = cand
        if checkpoint_bytes(cand) >= target:
            return best.validate()
        hidden += step


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


def hf_config(spec: ModelSpec, ids: dict[str, int]) -> dict[str, Any]:
    """config.json for the spec; `ids` holds bos/eos/pad token ids."""
    architecture, model_type = ARCHS[spec.arch]
    config: dict[str, Any] = {
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": spec.vocab,
        "hidden_size": spec.hidden,
        "intermediate_size": spec.intermediate,
        "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.heads,
        "num_key_value_heads": spec.kv_heads,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": spec.max_positions,
        "initializer_range": 0.02,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "attention_dropout": 0.0,
        "use_cache": True,
        "tie_word_embeddings": False,
        "bos_token_id": ids["bos"],
        "eos_token_id": ids["eos"],
        "pad_token_id": ids["pad"],
        "torch_dtype": spec.dtype,
    }
    if spec.rope_scaling != "default":
        config["rope_scaling"] = rope_scaling(spec)
    if spec.arch == "llama":
        config.update(attention_bias=False, mlp_bias=False, pretraining_tp=1)
    elif spec.arch == "qwen2":
        config.update(use_sliding_window=False, sliding_window=None, max_window_layers=spec.layers)
    else:
        config.update(sliding_window=SLIDING_WINDOW)
    return config


def rope_scaling(spec: ModelSpec) -> dict[str, Any]:
    """config.json's rope_scaling for the spec, in the published checkpoints' shape."""
    factor = spec.rope_factor or ROPE_FACTORS[spec.rope_scaling]
    scaling: dict[str, Any] = {"rope_type": spec.rope_scaling, "factor": factor}
    original = max(2, int(spec.max_positions / factor))
    if spec.rope_scaling == "llama3":
        scaling.update(low_freq_factor=1.0, high_freq_factor=4.0)
    if spec.rope_scaling in ("llama3", "yarn"):
        scaling["original_max_position_embeddings"] = original
    return scaling
