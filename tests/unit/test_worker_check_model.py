"""A checkpoint the engine cannot run is refused at the load order, before its weights
are read: 400 naming the config field (the worker keeps serving what it has)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascade_worker.control.errors import RequestError
from cascade_worker.control.load import check_model


def model(tmp_path: Path, config: dict[str, object], generation: str | None = None) -> Path:
    base = {
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "vocab_size": 300,
    }
    (tmp_path / "config.json").write_text(json.dumps({**base, **config}))
    if generation is not None:
        (tmp_path / "generation_config.json").write_text(generation)
    # Weights that could not be read at all: the check must not get that far.
    (tmp_path / "model.safetensors").write_bytes(b"not safetensors")
    return tmp_path


def test_a_runnable_config_passes(tmp_path: Path) -> None:
    check_model(model(tmp_path, {}, json.dumps({"eos_token_id": [2, 3]})))


@pytest.mark.parametrize(
    ("config", "generation", "named"),
    [
        ({"architectures": ["GPTNeoXForCausalLM"], "model_type": "gpt_neox"}, None,
         "architectures"),
        ({"rope_scaling": {"rope_type": "longrope", "factor": 8.0}}, None, "rope_scaling"),
        ({"hidden_act": "gelu"}, None, "hidden_act"),
        ({}, json.dumps({"temperature": "warm"}), "temperature"),
        ({}, "{", "generation_config.json"),
    ],
)  # fmt: skip
def test_what_the_engine_cannot_run_is_refused_naming_it(
    tmp_path: Path, config: dict[str, object], generation: str | None, named: str
) -> None:
    with pytest.raises(RequestError) as err:
        check_model(model(tmp_path, config, generation))
    assert err.value.status == 400 and named in str(err.value)
