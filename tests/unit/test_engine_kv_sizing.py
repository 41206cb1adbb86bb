"""KV-cache sizing against a memory budget (engine/sizing.py, engine/kv_profile.py).

The arithmetic is pure and tested figure by figure; the profile runs once on a tiny
model: it measures something, sizes within the budget, and a recorded `KvSizing`
restores the same cache without profiling again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from engine_harness import drain, greedy, make_model, request, token_ids

from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.kv_profile import worst_step
from cascade_worker.engine.sizing import KvSizing, restore_problem, size_kv

MIB = 1 << 20


def sized(**kw: Any) -> KvSizing:
    args: dict[str, Any] = {
        "budget_bytes": 100 * MIB,
        "weight_bytes": 30 * MIB,
        "activation_peak_bytes": 10 * MIB,
        "other_bytes": 0,
        "per_token": 4096,
        "max_batch": 64,
        "max_model_len": 1024,
        "block_size": 16,
        "profiled_s": 0.5,
        "method": "test",
    }
    return size_kv(**(args | kw))


def test_kv_gets_the_budget_minus_weights_activations_and_others() -> None:
    s = sized()
    assert s.kv_cache_tokens == 60 * MIB // 4096  # 15360, whole blocks already
    assert sized(other_bytes=20 * MIB).kv_cache_tokens == 40 * MIB // 4096
    assert s.cache().capacity_tokens == s.kv_cache_tokens


def test_kv_is_whole_blocks() -> None:
    s = sized(per_token=3000)  # 60 MiB / 3000 B = 20971.5 tokens
    assert s.kv_cache_tokens == 20960
    assert s.kv_cache_tokens % 16 == 0


def test_kv_stops_at_max_batch_full_contexts() -> None:
    assert sized(max_batch=4).kv_cache_tokens == 4 * 1024


def test_a_budget_short_of_one_context_is_refused_with_its_figures() -> None:
    with pytest.raises(ValueError) as err:
        sized(budget_bytes=44 * MIB, per_token=8192)  # 4 MiB: 512 tokens < 1024
    message = str(err.value)
    for figure in (str(44 * MIB), str(30 * MIB), str(10 * MIB), "512 tokens", "(1024)"):
        assert figure in message
    with pytest.raises(ValueError, match="-4194304 B for the KV cache"):
        sized(budget_bytes=36 * MIB)


def test_one_context_exactly_is_enough() -> None:
    assert sized(budget_bytes=40 * MIB + 1024 * 4096).kv_cache_tokens == 1024


def test_sizing_round_trips_through_json() -> None:
    s = sized()
    assert KvSizing.from_json(json.loads(json.dumps(s.to_json()))) == s


def test_the_worst_step_is_a_full_prefill_beside_full_decodes() -> None:
    batch = worst_step(max_batch=4, max_model_len=100, prefill_budget=32, block_size=16)
    assert batch.num_new == [1, 1, 1, 32]
    assert batch.start_positions == [99, 99, 99, 68]
    assert all(s + n == 100 for s, n in zip(batch.start_positions, batch.num_new, strict=True))
    assert batch.block_tables[0] == list(range(7))
    assert batch.num_tokens == 35
    short = worst_step(max_batch=1, max_model_len=20, prefill_budget=512, block_size=16)
    assert short.num_new == [20] and short.start_positions == [0]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model(tmp_path_factory.mktemp("llama"))


def test_profiled_engine_sizes_within_its_budget_and_restores_without_profiling(
    model: Path,
) -> None:
    torch.manual_seed(0)
    kw: dict[str, Any] = {"max_batch": 4, "max_model_len": 128}
    per_token = 2 * 4 * 2 * 16 * 4  # K+V, layers, kv heads, head_dim, float32
    budget = 64 * MIB + 300 * per_token
    engine = LLMEngine.from_model_dir(model, memory_budget_bytes=budget, **kw)
    assert engine.startup is not None
    s = engine.startup.kv_sizing
    assert s is not None and s.method.startswith("cpu") and s.budget_bytes == budget
    assert s.weight_bytes > 0 and s.profiled_s > 0
    assert s.kv_bytes_per_token == per_token
    free = budget - s.weight_bytes - s.activation_peak_bytes
    assert s.kv_cache_tokens == min(free // per_token // 16 * 16, 4 * 128)
    assert engine.executor.cache == s.cache()

    restored = LLMEngine.from_model_dir(model, kv_sizing=s, **kw)
    assert restored.startup is not None and restored.startup.kv_sizing is s
    assert restored.executor.cache == engine.executor.cache
    # the restore's KV stage is measured (check + apply), and cheaper than profiling
    assert 0 < restored.startup.kv_s < engine.startup.kv_s
    params = greedy(8)
    a = token_ids(_only(drain(_with(engine, request("a", "Hello there", params)))))
    b = token_ids(_only(drain(_with(restored, request("a", "Hello there", params)))))
    assert a == b and len(a) == 8


def test_an_explicit_token_count_skips_the_profile(model: Path) -> None:
    engine = LLMEngine.from_model_dir(model, max_batch=2, max_model_len=64, kv_cache_tokens=200)
    assert engine.startup is not None and engine.startup.kv_sizing is None
    assert engine.executor.cache.capacity_tokens == 208  # whole blocks of 16


def test_a_budget_too_small_refuses_to_start(model: Path) -> None:
    # Less than the weights (about 0.8 MiB), whatever the measured peak (possibly 0 in
    # a process whose allocator already holds enough).
    with pytest.raises(ValueError, match="fewer than one full context"):
        LLMEngine.from_model_dir(model, max_model_len=128, memory_budget_bytes=256 << 10)


def _with(engine: LLMEngine, req: Any) -> LLMEngine:
    engine.add_request(req)
    return engine


def _only(chunks: dict[str, list[Any]]) -> list[Any]:
    (only,) = chunks.values()
    return only


def test_a_recorded_sizing_that_does_not_fit_this_engine_is_named() -> None:
    s = sized(max_batch=4)  # 4096 tokens of 4096 B, blocks of 16
    fit = {"block_size": 16, "per_token": 4096, "max_model_len": 1024}
    assert restore_problem(s, **fit) is None
    for change, word in (
        ({"block_size": 32}, "block size"),
        ({"per_token": 2048}, "per token"),
        ({"max_model_len": 8192}, "full context"),
    ):
        problem = restore_problem(s, **(fit | change))
        assert problem is not None and word in problem, (change, problem)
    torn = KvSizing(**(s.to_json() | {"kv_cache_tokens": 4090}))
    assert "whole blocks" in (restore_problem(torn, **fit) or "")


def test_a_restore_refuses_a_sizing_recorded_for_another_geometry(model: Path) -> None:
    kw: dict[str, Any] = {"max_batch": 2, "max_model_len": 64}
    engine = LLMEngine.from_model_dir(model, **kw)
    assert engine.startup is not None and engine.startup.kv_sizing is not None
    other = KvSizing(**(engine.startup.kv_sizing.to_json() | {"kv_bytes_per_token": 7}))
    with pytest.raises(ValueError, match="per token"):
        LLMEngine.from_model_dir(model, kv_sizing=other, **kw)
