"""Model shapes, HF configs and --target-mb sizing (pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cascade_worker.checkpoints.spec import (
    ModelSpec,
    checkpoint_bytes,
    default_intermediate,
    hf_config,
    param_shapes,
    resolve_spec,
)

IDS = {"bos": 1, "eos": 2, "pad": 3, "unk": 0}


def test_llama_shapes() -> None:
    spec = ModelSpec(layers=2, hidden=64, heads=4, kv_heads=2, intermediate=128, vocab=300)
    shapes = dict(param_shapes(spec))
    assert shapes["model.embed_tokens.weight"] == (300, 64)
    assert shapes["model.layers.1.self_attn.q_proj.weight"] == (64, 64)
    assert shapes["model.layers.1.self_attn.k_proj.weight"] == (32, 64)
    assert shapes["model.layers.0.self_attn.o_proj.weight"] == (64, 64)
    assert shapes["model.layers.0.mlp.down_proj.weight"] == (64, 128)
    assert shapes["model.norm.weight"] == (64,) and shapes["lm_head.weight"] == (300, 64)
    assert len(shapes) == 2 + 9 * 2 + 1 and not any(n.endswith(".bias") for n in shapes)


def test_qwen2_has_qkv_bias() -> None:
    spec = ModelSpec(arch="qwen2", layers=1, hidden=64, heads=4, kv_heads=2)
    biases = [n for n, _ in param_shapes(spec) if n.endswith(".bias")]
    assert biases == [f"model.layers.0.self_attn.{p}_proj.bias" for p in "qkv"]


@pytest.mark.parametrize(
    ("arch", "cls", "model_type"),
    [
        ("llama", "LlamaForCausalLM", "llama"),
        ("qwen2", "Qwen2ForCausalLM", "qwen2"),
        ("mistral", "MistralForCausalLM", "mistral"),
    ],
)
def test_hf_config(arch: str, cls: str, model_type: str) -> None:
    config = hf_config(ModelSpec(arch=arch, dtype="bfloat16"), IDS)
    assert config["architectures"] == [cls] and config["model_type"] == model_type
    assert config["tie_word_embeddings"] is False and config["torch_dtype"] == "bfloat16"
    assert config["head_dim"] * config["num_attention_heads"] == config["hidden_size"]
    assert (config["bos_token_id"], config["eos_token_id"]) == (1, 2)
    assert ("sliding_window" in config) == (arch != "llama")
    if arch == "mistral":
        assert config["sliding_window"] == 4096


def test_bytes_counts_dtype() -> None:
    spec = ModelSpec(layers=1, hidden=64, heads=4, kv_heads=2, intermediate=128, vocab=300)
    n = sum(1 for _ in param_shapes(spec))
    assert n == 12
    assert checkpoint_bytes(replace(spec, dtype="float32")) == 2 * checkpoint_bytes(spec)


def test_defaults_and_intermediate() -> None:
    assert default_intermediate(256) == 704 and default_intermediate(4096) == 10944
    assert resolve_spec(ModelSpec(hidden=512)).intermediate == default_intermediate(512)
    given = resolve_spec(ModelSpec(hidden=512, intermediate=100), intermediate_given=True)
    assert given.intermediate == 100


@pytest.mark.parametrize("target", [100, 200, 400])
def test_target_mb_picks_layers(target: int) -> None:
    spec = resolve_spec(ModelSpec(hidden=1024, heads=16, kv_heads=8), target_mb=target)
    size = checkpoint_bytes(spec) / 2**20
    per_layer = checkpoint_bytes(replace(spec, layers=2)) - checkpoint_bytes(
        replace(spec, layers=1)
    )
    assert abs(size - target) <= per_layer / 2**20 / 2 + 1e-9
    assert spec.hidden == 1024


def test_target_mb_picks_hidden_when_layers_fixed() -> None:
    spec = resolve_spec(ModelSpec(layers=8, heads=8, kv_heads=4), target_mb=200, layers_given=True)
    assert spec.layers == 8 and spec.hidden % 64 == 0
    assert abs(checkpoint_bytes(spec) / 2**20 - 200) < 20


def test_target_mb_conflicts_and_minimum() -> None:
    with pytest.raises(ValueError, match="at most one"):
        resolve_spec(ModelSpec(), target_mb=10, layers_given=True, hidden_given=True)
    with pytest.raises(ValueError, match="positive"):
        resolve_spec(ModelSpec(), target_mb=0)
    assert resolve_spec(ModelSpec(), target_mb=0.001).layers == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"arch": "gpt2"}, "unknown arch"),
        ({"dtype": "int8"}, "unknown dtype"),
        ({"hidden": 100}, "head_dim"),
        ({"kv_heads": 3}, "kv_heads"),
        ({"layers": 0}, "layers"),
    ],
)
def test_validate_rejects(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        replace(ModelSpec(), **changes).validate()  # type: ignore[arg-type]
