"""Published configs sized without a byte of their weights: the engine's own loader
builds Llama-3.1-8B, Qwen2.5-32B and Llama-3.1-70B on the meta device, so the bytes per
device, the KV cache a given device memory leaves, and the packed blocks are the ones a
real start would get; a 70B on one 80 GB device is refused with the arithmetic."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from cascade_worker.blocks.pack import layout
from cascade_worker.blocks.partition import assign_tensors, partition_layers
from cascade_worker.checkpoints.spec import ModelSpec, param_shapes
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.kv_profile import planned_weight_bytes
from cascade_worker.engine.sizing import check_weights_fit, kv_bytes_per_token, size_kv

GB = 10**9
H100 = 80 * GB
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}  # fmt: skip
CONFIGS: dict[str, dict[str, Any]] = {  # the published config.json fields that size them
    "Llama-3.1-8B": {"architectures": ["LlamaForCausalLM"], "hidden_size": 4096,
                     "num_hidden_layers": 32, "num_attention_heads": 32,
                     "num_key_value_heads": 8, "intermediate_size": 14336,
                     "vocab_size": 128256, "max_position_embeddings": 131072,
                     "rope_theta": 500000.0, "rope_scaling": LLAMA3_ROPE},
    "Qwen2.5-32B": {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 5120,
                    "num_hidden_layers": 64, "num_attention_heads": 40,
                    "num_key_value_heads": 8, "intermediate_size": 27648,
                    "vocab_size": 152064, "max_position_embeddings": 32768,
                    "rope_theta": 1000000.0, "use_sliding_window": False},
    "Llama-3.1-70B": {"architectures": ["LlamaForCausalLM"], "hidden_size": 8192,
                      "num_hidden_layers": 80, "num_attention_heads": 64,
                      "num_key_value_heads": 8, "intermediate_size": 28672,
                      "vocab_size": 128256, "max_position_embeddings": 131072,
                      "rope_theta": 500000.0, "rope_scaling": LLAMA3_ROPE},
}  # fmt: skip
# Parameters as the model cards count them (embedding and LM head both, untied).
PARAMS = {"Llama-3.1-8B": 8.03e9, "Qwen2.5-32B": 32.76e9, "Llama-3.1-70B": 70.55e9}


def _shapes(name: str) -> tuple[ModelConfig, dict[str, tuple[int, ...]]]:
    hf = CONFIGS[name] | {"torch_dtype": "bfloat16"}
    config = ModelConfig.from_hf(hf)
    spec = ModelSpec(arch=config.arch, layers=config.num_layers, hidden=config.hidden,
                     heads=config.heads, kv_heads=config.kv_heads,
                     intermediate=config.intermediate, vocab=config.vocab)  # fmt: skip
    return config, dict(param_shapes(spec))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_bytes_per_device_are_the_parameters_in_bfloat16(name: str) -> None:
    config, shapes = _shapes(name)
    weights = planned_weight_bytes(config, shapes, torch.bfloat16)
    assert weights == pytest.approx(2 * PARAMS[name], rel=0.005)


def test_the_kv_cache_is_what_an_80_gb_device_leaves() -> None:
    config, shapes = _shapes("Llama-3.1-8B")
    weights = planned_weight_bytes(config, shapes, torch.bfloat16)
    per_token = kv_bytes_per_token(config, torch.bfloat16, config.num_layers)
    assert per_token == 2 * 32 * 8 * 128 * 2  # 128 KiB: K and V, 32 layers, 8 KV heads
    sizing = size_kv(budget_bytes=int(0.9 * H100), weight_bytes=weights,
                     activation_peak_bytes=2 * GB, other_bytes=0, per_token=per_token,
                     max_batch=256, max_model_len=8192, block_size=16, profiled_s=0.0,
                     method="given")  # fmt: skip
    free = int(0.9 * H100) - weights - 2 * GB
    assert sizing.kv_cache_tokens == free // per_token // 16 * 16
    assert 400_000 < sizing.kv_cache_tokens < 420_000  # ~50 full 8k contexts


def test_a_70b_on_one_80_gb_device_is_refused_with_the_arithmetic() -> None:
    config, shapes = _shapes("Llama-3.1-70B")
    weights = planned_weight_bytes(config, shapes, torch.bfloat16)
    with pytest.raises(ValueError) as refused:
        check_weights_fit(weight_bytes=weights, device_bytes=H100, utilization=0.9,
                          dtype=torch.bfloat16)  # fmt: skip
    message = str(refused.value)
    assert "141.1 GB in bfloat16" in message and "72.0 GB (0.9 x 80.0 GB)" in message
    assert "at least 2 such devices" in message
    check_weights_fit(weight_bytes=weights, device_bytes=2 * H100, utilization=0.9,
                      dtype=torch.bfloat16)  # two devices' worth holds it  # fmt: skip


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_packed_blocks_of_a_real_config(name: str) -> None:
    """A block per layer group, sized by its tensors; together the checkpoint."""
    config, shapes = _shapes(name)
    ranges = partition_layers(config.num_layers, 16)
    groups = assign_tensors(list(shapes), ranges)
    sizes = [layout([(n, "bfloat16", shapes[n]) for n in group])[1] for group in groups]
    total = sum(2 * torch.Size(s).numel() for s in shapes.values())
    assert sum(sizes) == pytest.approx(total, rel=1e-4)  # alignment padding only
    middle = sizes[1:-1]
    assert max(middle) - min(middle) <= max(middle) / (config.num_layers // 16)
