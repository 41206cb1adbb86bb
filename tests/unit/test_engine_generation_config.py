"""The model's generation_config.json: every eos id ends a sequence, and its sampling
defaults fill what a request leaves unset (never what it sets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from engine_harness import drain, make_model, request, token_ids

from cascade_protocol.generate import SamplingParams
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.generation_config import GenerationConfig
from cascade_worker.engine.sampling import SamplerState, top_k_filter


def config(**doc: object) -> GenerationConfig:
    return GenerationConfig.from_extras({"generation_config.json": json.dumps(doc)})


def test_unset_fields_take_the_models_defaults_and_set_ones_stay() -> None:
    gen = config(temperature=0.6, top_p=0.9, top_k=50, eos_token_id=[2, 7])
    assert gen.eos_token_ids == (2, 7)
    resolved = gen.apply(SamplingParams())
    assert (resolved.temperature, resolved.top_p, resolved.top_k) == (0.6, 0.9, 50)
    mine = gen.apply(SamplingParams(temperature=0.0, top_p=1.0, top_k=0))
    assert (mine.temperature, mine.top_p, mine.top_k) == (0.0, 1.0, 0)


def test_without_a_file_the_openai_defaults_apply() -> None:
    resolved = GenerationConfig.from_extras({}).apply(SamplingParams())
    assert (resolved.temperature, resolved.top_p, resolved.top_k) == (1.0, 1.0, 0)
    assert config(top_k=-1).top_k == 0


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[1]", "JSON object"),
        ("{", "not JSON"),
        (json.dumps({"eos_token_id": "x"}), "eos_token_id"),
        (json.dumps({"temperature": -1}), "temperature"),
        (json.dumps({"top_p": 0}), "top_p"),
        (json.dumps({"top_k": 0.5}), "top_k"),
    ],
)
def test_a_malformed_file_is_refused_naming_the_field(text: str, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        GenerationConfig.from_extras({"generation_config.json": text})


def test_top_k_keeps_the_k_likeliest() -> None:
    logits = torch.tensor([0.1, 3.0, 2.0, -1.0])
    kept = top_k_filter(logits, 2)
    assert torch.isinf(kept[[0, 3]]).all() and kept[1] == 3.0 and kept[2] == 2.0
    assert torch.equal(top_k_filter(logits, 0), logits)
    state = SamplerState.from_params(SamplingParams(temperature=1.0, top_k=1, seed=3))
    from cascade_worker.engine.sampling import sample

    assert {sample(logits[None], [state])[0] for _ in range(20)} == {1}


def test_every_eos_id_of_the_generation_config_ends_a_sequence(tmp_path: Path) -> None:
    path = make_model(tmp_path / "m")
    engine = LLMEngine.from_model_dir(path, kv_cache_tokens=512)
    greedy = SamplingParams(max_tokens=12, temperature=0.0)
    engine.add_request(request("a", [5, 6, 7], greedy))
    free = token_ids(drain(engine)["a"])
    stop_at = free[3]  # a token the model emits: made an eos id of the model
    (path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, stop_at]}))
    engine = LLMEngine.from_model_dir(path, kv_cache_tokens=512)
    engine.add_request(request("a", [5, 6, 7], greedy))
    assert token_ids(drain(engine)["a"]) == free[: free.index(stop_at) + 1]
