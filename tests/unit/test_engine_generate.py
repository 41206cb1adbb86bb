"""LLMEngine behaviour: recompute, preemption, sampling, stop rules, rejection, abort.

References are the engine's own greedy runs of a lone request (the parity tests tie
those to transformers), so these tests need no transformers.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_harness import PROMPTS, drain, greedy, request, text, token_ids

from cascade_protocol.generate import (
    ChatMessage,
    FinishReason,
    GenerateRequest,
    RequestClass,
    SamplingParams,
)
from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.core import RequestRejected
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.executor import LocalExecutor
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.stage import StageModel

NEW = 16


def engine(model_dir: Path, **kw: object) -> LLMEngine:
    options: dict[str, object] = {"max_batch": 4, "max_model_len": 96, "block_size": 4}
    return LLMEngine.from_model_dir(model_dir, **(options | kw))


@pytest.fixture(scope="module")
def reference(model_dir: Path) -> dict[str, list[int]]:
    """Greedy tokens of each prompt run alone."""
    out = {}
    for i, prompt in enumerate(PROMPTS):
        e = engine(model_dir)
        e.add_request(request(str(i), prompt, greedy(NEW)))
        out[str(i)] = token_ids(drain(e)[str(i)])
    return out


def run(e: LLMEngine, params: SamplingParams, prompts: list[str] = PROMPTS) -> dict[str, list[int]]:
    for i, prompt in enumerate(prompts):
        e.add_request(request(str(i), prompt, params))
    return {rid: token_ids(chunks) for rid, chunks in drain(e).items()}


def test_recompute_mid_generation_continues_identically(
    model_dir: Path, reference: dict[str, list[int]]
) -> None:
    e = engine(model_dir, cuts=(2,))
    for i, prompt in enumerate(PROMPTS):
        e.add_request(request(str(i), prompt, greedy(NEW)))
    chunks: dict[str, list[int]] = {}
    for step in range(30):
        if step == 8:
            for rid in ("0", "1", "2", "3"):
                e.recompute(rid)
            assert isinstance(e.executor, LocalExecutor)
            for stage in e.executor.stages:
                stage.cache.clear()  # the dropped caches are really gone
        for c in e.step():
            chunks.setdefault(c.request_id, []).extend(c.token_ids)
    for rid, tail in drain(e).items():
        chunks.setdefault(rid, []).extend(token_ids(tail))
    assert chunks == reference


def test_mode_switch_to_another_executor(model_dir: Path, reference: dict[str, list[int]]) -> None:
    """A pipeline member that gets the whole model swaps executors mid-generation."""
    e = engine(model_dir, cuts=(1, 3))
    whole = engine(model_dir, kv_cache_tokens=512).executor
    for i, prompt in enumerate(PROMPTS):
        e.add_request(request(str(i), prompt, greedy(NEW)))
    got: dict[str, list[int]] = {}
    for _ in range(6):
        for c in e.step():
            got.setdefault(c.request_id, []).extend(c.token_ids)
    e.replace_executor(whole)
    for rid, tail in drain(e).items():
        got.setdefault(rid, []).extend(token_ids(tail))
    assert got == reference


def test_preemption_under_kv_pressure_keeps_tokens(
    model_dir: Path, reference: dict[str, list[int]]
) -> None:
    # Room for one full context only: four growing sequences must preempt each other.
    e = engine(model_dir, kv_cache_tokens=96)
    for i, prompt in enumerate(PROMPTS):
        e.add_request(request(str(i), prompt, greedy(NEW)))
    got: dict[str, list[int]] = {}
    while e.has_work():
        for c in e.step():
            got.setdefault(c.request_id, []).extend(c.token_ids)
        assert e.stats().kv_cache_usage <= 1.0
    preempted = e.num_preemptions
    assert preempted > 0
    assert got == reference
    assert e.stats().kv_cache_usage == 0.0


def test_seeded_sampling_is_reproducible_whatever_the_batch(model_dir: Path) -> None:
    params = SamplingParams(max_tokens=NEW, temperature=1.0, seed=7, ignore_eos=True)
    alone = run(engine(model_dir), params, PROMPTS[:1])["0"]
    batched = run(engine(model_dir), params)["0"]
    assert alone == batched
    other = SamplingParams(max_tokens=NEW, temperature=1.0, seed=8, ignore_eos=True)
    assert run(engine(model_dir), other, PROMPTS[:1])["0"] != alone


def test_tiny_top_p_is_greedy(model_dir: Path, reference: dict[str, list[int]]) -> None:
    params = SamplingParams(max_tokens=NEW, temperature=0.8, top_p=1e-6, seed=1, ignore_eos=True)
    assert run(engine(model_dir), params) == reference


def test_max_tokens_and_usage_counts(model_dir: Path, reference: dict[str, list[int]]) -> None:
    e = engine(model_dir)
    e.add_request(request("r", PROMPTS[1], greedy(5)))
    chunks = drain(e)["r"]
    assert token_ids(chunks) == reference["1"][:5]
    assert [c.completion_tokens for c in chunks] == [1, 2, 3, 4, 5]
    assert chunks[-1].finish_reason is FinishReason.LENGTH
    assert all(c.finish_reason is None for c in chunks[:-1])
    assert chunks[0].prompt_tokens == len(e.tokenizer.encode(PROMPTS[1]))  # type: ignore[union-attr]
    assert text(chunks) == e.tokenizer.decode(token_ids(chunks))  # type: ignore[union-attr]


def test_stop_token_and_eos(model_dir: Path, reference: dict[str, list[int]]) -> None:
    want = reference["0"]
    token = want[3]
    first = want.index(token)  # generation stops at its first occurrence
    e = engine(model_dir)
    e.add_request(request("s", PROMPTS[0], greedy(NEW, stop_token_ids=[token])))
    chunks = drain(e)["s"]
    assert token_ids(chunks) == want[: first + 1]
    assert chunks[-1].finish_reason is FinishReason.STOP

    e = engine(model_dir)
    e.eos_ids = frozenset({token})  # make the model "emit EOS" at that point
    e.add_request(request("eos", PROMPTS[0], SamplingParams(max_tokens=NEW, temperature=0)))
    e.add_request(request("ign", PROMPTS[0], greedy(NEW)))
    out = drain(e)
    assert token_ids(out["eos"]) == want[: first + 1]
    assert out["eos"][-1].finish_reason is FinishReason.STOP
    assert token_ids(out["ign"]) == want  # ignore_eos


def test_stop_string_truncates_text(model_dir: Path) -> None:
    e = engine(model_dir)
    e.add_request(request("full", PROMPTS[3], greedy(NEW)))
    full = text(drain(e)["full"])
    clean = full.replace("\ufffd", "")
    assert len(clean) >= 6, full
    stop = clean[3:6]
    cut = full.index(stop)
    e = engine(model_dir)
    e.add_request(request("s", PROMPTS[3], greedy(NEW, stop=[stop, "never-there"])))
    chunks = drain(e)["s"]
    assert text(chunks) == full[:cut]
    assert chunks[-1].finish_reason is FinishReason.STOP
    assert len(token_ids(chunks)) < NEW


def test_rejections(model_dir: Path) -> None:
    e = engine(model_dir, max_model_len=32)
    long_prompt = list(range(4, 40))
    with pytest.raises(RequestRejected) as exc:
        e.add_request(request("a", long_prompt, greedy(1)))
    assert exc.value.param == "prompt"
    with pytest.raises(RequestRejected) as exc:
        e.add_request(request("b", [1, 5, 6], greedy(30)))
    assert exc.value.param == "max_tokens"
    with pytest.raises(RequestRejected) as exc:
        e.add_request(request("c", [1, 512], greedy(1)))
    assert exc.value.param == "prompt_token_ids"
    e.add_request(request("d", [1, 5, 6], greedy(29)))  # exactly fits
    with pytest.raises(RequestRejected) as exc:
        e.add_request(request("d", [1, 5, 6], greedy(1)))
    assert exc.value.param == "request_id"
    assert e.stats().waiting == 1
    # A deployment's generic max_model_len beyond the model's context is clamped to it.
    assert engine(model_dir, max_model_len=1000).max_model_len == 256


def test_stage_needs_its_blocks(model_dir: Path) -> None:
    store = BlockStore.from_model_dir(model_dir, 4)
    config = ModelConfig.from_hf(store.manifest.config)
    partial = BlockStore(store.manifest, prefault=False)
    partial.buffer(1)[:] = store.buffer(1)
    assert partial.install(1)  # only layer 1 held
    stage = StageModel.load(partial, config, 1, 2, CacheConfig(4, 4))
    assert not stage.is_first and not stage.is_last
    with pytest.raises(ValueError, match=r"need blocks \[0\]"):
        StageModel.load(partial, config, 0, 2, CacheConfig(4, 4))


def test_abort_and_stats(model_dir: Path) -> None:
    e = engine(model_dir, max_batch=2)
    for i in range(3):
        e.add_request(request(str(i), PROMPTS[i], greedy(NEW)))
    e.step()
    stats = e.stats()
    assert (stats.running, stats.waiting, stats.max_batch) == (2, 1, 2)
    assert 0 < stats.kv_cache_usage < 1
    e.abort_request("0")
    e.abort_request("2")
    e.abort_request("nope")
    chunks = e.step()
    aborted = {c.request_id for c in chunks if c.finish_reason is FinishReason.ABORT}
    assert aborted == {"0", "2"}
    e.max_batch = 1
    assert e.stats().max_batch == 1
    out = drain(e)
    assert set(out) == {"1"} and out["1"][-1].finish_reason is FinishReason.LENGTH
    assert not e.has_work() and e.stats().kv_cache_usage == 0.0


def test_chat_messages_and_classes(model_dir: Path) -> None:
    e = engine(model_dir)
    messages = [ChatMessage(role="user", content="Hi there")]
    req = GenerateRequest(
        request_id="chat",
        messages=messages,
        params=greedy(4),
        request_class=RequestClass.BATCH,
    )
    e.add_request(req)
    chunks = drain(e)["chat"]
    assert tok_count(chunks) == 4
    rendered = e.tokenizer.render_chat([m.model_dump() for m in messages])  # type: ignore[union-attr]
    assert rendered.endswith("<|assistant|>\n") and rendered.startswith("<s>")
    assert chunks[0].prompt_tokens == len(e.tokenizer.encode(rendered, add_special_tokens=False))  # type: ignore[union-attr]


def tok_count(chunks: list[object]) -> int:
    return sum(len(c.token_ids) for c in chunks)  # type: ignore[attr-defined]
