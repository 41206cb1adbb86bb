"""The compiled layer range (engine/compiled.py) generates transformers' greedy tokens.

Prompts are chunked by a small prefill budget and batched, so steps of 1..8 tokens
(every bucket, most padded) go through the compiled graphs, prefills included, with a
late request arriving mid-decode. The fast tests compile with dynamo's "eager" backend
(tracing, the custom attention op and the padding, without codegen); the inductor tests
compile for real and are marked slow (a minute of C++ compiles on a cold cache).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
from engine_harness import PROMPTS, greedy, make_model, request, token_ids

from cascade_worker.engine.compiled import token_buckets
from cascade_worker.engine.engine import LLMEngine

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")

NEW_TOKENS = 16


def test_token_buckets_are_powers_of_two_covering_the_limit() -> None:
    assert token_buckets(1) == (1,)
    assert token_buckets(8) == (1, 2, 4, 8)
    assert token_buckets(9) == (1, 2, 4, 8, 16)
    with pytest.raises(ValueError):
        token_buckets(0)


def _hf_greedy(path: Path, prompts: list[list[int]]) -> list[list[int]]:
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager"
    ).eval()
    out = []
    for ids in prompts:
        gen = hf.generate(
            torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
            eos_token_id=None, pad_token_id=3,
        )  # fmt: skip
        out.append([int(t) for t in gen[0, len(ids) :]])
    return out


def _compiled_greedy(path: Path, prompts: list[list[int]], backend: str) -> list[list[int]]:
    engine = LLMEngine.from_model_dir(
        path, max_batch=4, max_model_len=128, prefill_budget=5, block_size=4,
        kv_cache_tokens=512, compile=True, compile_max_tokens=8, compile_backend=backend,
    )  # fmt: skip
    compiled = engine.executor.stages[0].compiled
    assert compiled is not None and compiled.buckets == (1, 2, 4, 8)
    for i, ids in enumerate(prompts[:3]):
        engine.add_request(request(str(i), ids, greedy(NEW_TOKENS)))
    out: dict[str, list[Any]] = {}
    steps = 0
    while engine.has_work():
        if steps == 6:
            engine.add_request(request("3", prompts[3], greedy(NEW_TOKENS)))
        for chunk in engine.step():
            out.setdefault(chunk.request_id, []).append(chunk)
        steps += 1
    # Every step fits a bucket: warm-up's four and all the real ones ran compiled.
    assert compiled.steps == 4 + steps
    return [token_ids(out[str(i)]) for i in range(len(prompts))]


def _check(tmp_path: Path, arch: str, backend: str) -> None:
    path = make_model(tmp_path, arch)
    tok = transformers.AutoTokenizer.from_pretrained(path)
    prompts = [tok(p)["input_ids"] for p in PROMPTS]
    assert _compiled_greedy(path, prompts, backend) == _hf_greedy(path, prompts)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "mistral"])
def test_traced_path_matches_transformers(tmp_path: Path, arch: str) -> None:
    _check(tmp_path, arch, "eager")


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["llama", "qwen2", "mistral"])
def test_inductor_path_matches_transformers(tmp_path: Path, arch: str) -> None:
    _check(tmp_path, arch, "inductor")
