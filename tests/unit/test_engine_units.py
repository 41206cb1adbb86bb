"""Small engine parts: config parsing, sampling, the StageBatch wire form, layers."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

from cascade_protocol.generate import SamplingParams
from cascade_worker.checkpoints.spec import ModelSpec, hf_config
from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.executor import split_ranges
from cascade_worker.engine.layers import (
    DECODE_BUCKET_TOKENS,
    AttentionMeta,
    attention,
    decode_groups,
)
from cascade_worker.engine.sampling import SamplerState, sample, top_p_filter

IDS = {"bos": 1, "eos": 2, "pad": 3}


def hf(arch: str, **changes: Any) -> dict[str, Any]:
    spec = ModelSpec(arch=arch, layers=3, hidden=64, heads=4, kv_heads=2, intermediate=128)
    return hf_config(spec, IDS) | changes


def test_config_per_arch() -> None:
    llama = ModelConfig.from_hf(hf("llama"))
    assert (llama.arch, llama.head_dim, llama.kv_heads, llama.attention_bias) == (
        "llama",
        16,
        2,
        False,
    )
    assert llama.layer_windows == (None,) * 3 and llama.eos_token_ids == (2,)
    qwen = ModelConfig.from_hf(hf("qwen2"))
    assert qwen.attention_bias and qwen.sliding_window is None
    windowed = ModelConfig.from_hf(
        hf("qwen2", use_sliding_window=True, sliding_window=32, max_window_layers=1)
    )
    assert windowed.layer_windows == (None, 32, 32)
    mistral = ModelConfig.from_hf(hf("mistral", sliding_window=8))
    assert mistral.layer_windows == (8, 8, 8)
    nested = hf("llama", rope_parameters={"rope_type": "default", "rope_theta": 5e5})
    nested.pop("rope_theta")
    assert ModelConfig.from_hf(nested).rope_theta == 5e5
    assert ModelConfig.from_hf(hf("llama", eos_token_id=[2, 7])).eos_token_ids == (2, 7)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"}, "architectures"),
        ({"hidden_size": 0}, "hidden_size"),
        ({"num_key_value_heads": 3}, "num_key_value_heads"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"rope_scaling": {"rope_type": "longrope", "factor": 4.0}}, "rope_scaling"),
        ({"head_dim": 15}, "head_dim"),
        ({"num_hidden_layers": None}, "num_hidden_layers"),
        ({"sliding_window": -1}, "sliding_window"),
    ],
)
def test_config_errors_name_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        ModelConfig.from_hf(hf("mistral") | changes)


def test_split_ranges() -> None:
    assert split_ranges(4, ()) == [(0, 4)]
    assert split_ranges(4, (1, 3)) == [(0, 1), (1, 3), (3, 4)]
    for bad in [(0,), (2, 2), (4,), (3, 1)]:
        with pytest.raises(ValueError):
            split_ranges(4, bad)


def test_stage_batch_meta_round_trips_through_json() -> None:
    batch = StageBatch([3, 9], [0, 7], [2, 1], [[4], [0, 1]], torch.zeros(3, 8), all_logits=True)
    meta = json.loads(json.dumps(batch.meta()))
    again = StageBatch.from_meta(meta, batch.input)
    assert again.meta() == batch.meta() and again.num_tokens == 3 and again.num_seqs == 2
    with pytest.raises(ValueError, match="rows"):
        StageBatch([1], [0], [2], [[0]], torch.zeros(3))
    with pytest.raises(ValueError):
        StageBatch([1], [0], [0], [[0]], torch.zeros(0))


def test_top_p_filter() -> None:
    probs = torch.tensor([0.1, 0.5, 0.15, 0.25])
    kept = top_p_filter(probs, 0.7)  # 0.5 + 0.25 reach 0.7
    torch.testing.assert_close(kept, torch.tensor([0.0, 0.5, 0.0, 0.25]) / 0.75)
    assert top_p_filter(probs, 1e-9).tolist() == [0.0, 1.0, 0.0, 0.0]
    assert top_p_filter(probs, 1.0) is probs


def test_sampling_rows_use_their_own_generators() -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 50, generator=g)

    def state(seed: int | None, temperature: float = 1.0) -> SamplerState:
        return SamplerState.from_params(
            SamplingParams(temperature=temperature, seed=seed, max_tokens=1)
        )

    def draws(states: list[SamplerState], rows: list[int], n: int = 20) -> list[list[int]]:
        return [sample(logits[rows], states) for _ in range(n)]

    alone = [d[0] for d in draws([state(5)], [1])]
    mixed = [d[1] for d in draws([state(6), state(5), state(None, 0.0)], [0, 1, 2])]
    assert alone == mixed  # seed 5 on row 1 draws the same, whatever its neighbours
    assert alone != [d[0] for d in draws([state(7)], [1])]
    greedy = draws([state(None, 0.0)], [2], 3)
    assert greedy == [[int(torch.argmax(logits[2]))]] * 3
    assert state(None, 0.0).generator is None


def test_decodes_are_grouped_by_context_length_in_powers_of_two() -> None:
    b = DECODE_BUCKET_TOKENS
    ctx = [16, b, b + 1, 2 * b, 2 * b + 1, 700, 3, 4 * b]
    assert decode_groups(list(range(len(ctx))), ctx) == [[0, 1, 6], [2, 3], [4, 7], [5]]
    assert decode_groups([1, 3], ctx) == [[1], [3]]  # only the rows asked for
    assert decode_groups([], ctx) == []


def test_a_step_of_decodes_attends_on_views_with_the_same_result() -> None:
    """A decode-only step in one bucket skips the gather/scatter around the attention;
    the same queries through the general path give the same output."""
    block, kvh, heads, dim = 4, 2, 4, 8
    batch = StageBatch([0, 1, 2], [5, 2, 7], [1, 1, 1], [[0, 1], [2], [3, 4]], torch.zeros(3))
    meta = AttentionMeta.build(batch, block, torch.device("cpu"))
    assert [g.whole for g in meta.groups] == [True]
    k_cache, v_cache = torch.randn(5 * block, kvh, dim), torch.randn(5 * block, kvh, dim)

    def read(gather: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (*gather.shape, kvh, dim)
        return k_cache[gather.reshape(-1)].view(shape), v_cache[gather.reshape(-1)].view(shape)

    q = torch.randn(3, heads, dim)
    fast = attention(q, read, meta, None)
    meta.groups[0].whole = False
    assert torch.equal(fast, attention(q, read, meta, None))
    mixed = StageBatch([0, 1], [5, 0], [1, 3], [[0, 1], [2]], torch.zeros(4))
    assert [g.whole for g in AttentionMeta.build(mixed, block, torch.device("cpu")).groups] == [
        False,
        False,
    ]
