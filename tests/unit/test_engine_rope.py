"""RoPE scalings (engine/rope.py) compute what transformers computes: logits of every
position for linear, dynamic (past the pre-training length), llama3 and yarn checkpoints
made by `cascade model init --rope-scaling`, and greedy tokens for llama3 and yarn; an
unsupported scaling is refused naming the field."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from engine_harness import drain, greedy, request, token_ids

from cascade_worker.blocks.store import BlockStore
from cascade_worker.checkpoints.checkpoint import write_checkpoint
from cascade_worker.checkpoints.spec import ModelSpec
from cascade_worker.engine.batch import StageBatch
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.executor import LocalExecutor
from cascade_worker.engine.kv_blocks import CacheConfig

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
MAX_POSITIONS = 96  # dynamic: the prompt below runs past it


def _checkpoint(out: Path, kind: str, arch: str = "llama") -> Path:
    spec = ModelSpec(arch=arch, layers=2, hidden=64, heads=4, kv_heads=2, intermediate=128,
                     vocab=512, max_positions=MAX_POSITIONS, dtype="float32", seed=3,
                     rope_scaling=kind)  # fmt: skip
    write_checkpoint(out, spec)
    return out


def _hf(path: Path) -> Any:
    return transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager"
    ).eval()


@pytest.mark.parametrize(("kind", "arch"), [("linear", "llama"), ("dynamic", "llama"),
                                            ("llama3", "llama"), ("yarn", "qwen2")])  # fmt: skip
def test_logits_match_transformers(tmp_path: Path, kind: str, arch: str) -> None:
    path = _checkpoint(tmp_path, kind, arch)
    config = json.loads((path / "config.json").read_text())
    assert config["rope_scaling"]["rope_type"] == kind
    length = MAX_POSITIONS + 24 if kind == "dynamic" else 70
    ids = [(7 * i + 3) % 500 + 4 for i in range(length)]
    with torch.no_grad():
        want = _hf(path)(torch.tensor([ids])).logits[0]
    store = BlockStore.from_model_dir(path, 1)
    model = ModelConfig.from_hf(store.manifest.config)
    assert model.rope_params.kind == kind
    executor = LocalExecutor.load(store, model, CacheConfig(block_size=8, num_blocks=32))
    table = list(range((length + 7) // 8))
    got = executor.execute(
        StageBatch([0], [0], [length], [table], torch.tensor(ids), all_logits=True)
    )
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kind", ["llama3", "yarn"])
def test_greedy_tokens_match_transformers(tmp_path: Path, kind: str) -> None:
    path = _checkpoint(tmp_path, kind)
    prompt = [(5 * i + 1) % 500 + 4 for i in range(20)]
    out = _hf(path).generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False,
                             eos_token_id=None, pad_token_id=3)  # fmt: skip
    want = [int(t) for t in out[0, len(prompt) :]]
    engine = LLMEngine.from_model_dir(path, max_batch=2, kv_cache_tokens=256)
    engine.add_request(request("a", prompt, greedy(24)))
    assert token_ids(drain(engine)["a"]) == want


def test_an_unsupported_scaling_is_refused_naming_the_field() -> None:
    base = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
            "num_hidden_layers": 1, "intermediate_size": 128, "vocab_size": 512}  # fmt: skip
    with pytest.raises(ValueError, match=r"rope_scaling: RoPE type 'longrope'"):
        ModelConfig.from_hf(base | {"rope_scaling": {"rope_type": "longrope", "factor": 4}})
    with pytest.raises(ValueError, match=r"rope_parameters\.factor"):
        ModelConfig.from_hf(base | {"rope_parameters": {"rope_type": "linear", "factor": "x"}})
    with pytest.raises(ValueError, match="original_max_position_embeddings"):
        ModelConfig.from_hf(base | {"rope_scaling": {"rope_type": "llama3", "factor": 8}})
