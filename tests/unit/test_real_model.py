"""The real model: SmolLM2-135M-Instruct from its GGUF, through `cascade model import`.

The import is checked against transformers' own GGUF loader (the same tensors, bit for
bit in float32; the same token ids), and the engine against transformers' generate on
the converted checkpoint: greedy, 8 prompts x 64 tokens, chat-rendered and plain, batched
together in the engine and split into stages as a pipeline splits it.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from pathlib import Path

import pytest
import torch
from engine_harness import drain, request, token_ids
from real_model import NEW_TOKENS, PROMPTS, ensure_real_model, references

from cascade_protocol.generate import ChatMessage, GenerateRequest, SamplingParams
from cascade_worker.checkpoints.gguf_import import default_gguf, import_gguf
from cascade_worker.engine.core import RequestRejected
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.requests import prepare_prompt
from cascade_worker.engine.tokenizer import EngineTokenizer
from cascade_worker.serving.async_engine import AsyncEngine

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def model_dir() -> Path:
    return ensure_real_model()


def test_import_equals_transformers_gguf_loader(tmp_path: Path) -> None:
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    gguf = default_gguf()
    out = tmp_path / "f32"
    info = import_gguf(out, dtype="float32")
    assert info.config["num_hidden_layers"] == 30 and info.config["tie_word_embeddings"]
    ours = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    config = transformers.AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    with torch.device("meta"):
        skeleton = transformers.AutoModelForCausalLM.from_config(config)
    theirs = load_gguf_checkpoint(str(gguf), return_tensors=True, model_to_load=skeleton)
    mine = ours.state_dict()
    assert set(theirs["tensors"]) <= set(mine)
    for name, tensor in theirs["tensors"].items():
        assert torch.equal(mine[name], tensor.float()), name
    ref_tok = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    our_tok = transformers.AutoTokenizer.from_pretrained(out)
    texts = [*PROMPTS, "Digits 12345, 3.14159;\n\tdef f(x): return x**2  # ünïcode 日本 🙂"]
    for text in texts:
        assert our_tok(text)["input_ids"] == ref_tok(text)["input_ids"], text


@pytest.mark.parametrize("cuts", [(), (7, 19)], ids=["one-stage", "three-stages"])
def test_engine_greedy_equals_transformers(model_dir: Path, cuts: tuple[int, ...]) -> None:
    expected = references()
    engine = LLMEngine.from_model_dir(model_dir, kv_cache_tokens=8192, cuts=cuts)
    params = SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0, ignore_eos=True)
    for i, ref in enumerate(expected):
        engine.add_request(request(str(i), ref.prompt_ids, params))
    out = drain(engine)
    got = [token_ids(out[str(i)]) for i in range(len(expected))]
    assert got == [ref.token_ids for ref in expected]
    assert ["".join(c.text for c in out[str(i)]) for i in range(len(expected))] == [
        ref.text for ref in expected
    ]


def test_the_engine_renders_and_tokenizes_as_transformers(model_dir: Path) -> None:
    """The gateway sends messages and text; the worker's template and tokenizer must
    give the prompt ids transformers gives, or no output could match."""
    tokenizer = EngineTokenizer.from_model_dir(model_dir)
    assert tokenizer is not None
    for ref in references():
        if ref.kind == "chat":
            got = tokenizer.encode_chat([{"role": "user", "content": ref.prompt}])
        else:
            got = tokenizer.encode(ref.prompt)
        assert got == ref.prompt_ids, ref.prompt


def test_no_token_covers_more_bytes_than_the_bound_the_gateway_uses(model_dir: Path) -> None:
    """A prompt of B bytes needs at least B / max_token_bytes tokens, or the gateway's
    cheap context check would refuse prompts that fit."""
    tokenizer = EngineTokenizer.from_model_dir(model_dir)
    assert tokenizer is not None
    bound = tokenizer.max_token_bytes
    assert 8 < bound < 1000
    texts = [ref.prompt for ref in references()] + [" " * 5000, "-" * 5000, "é🙂x" * 999]
    for text in texts:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert len(text.encode()) <= len(ids) * bound, text[:40]


def test_the_worker_refuses_text_too_long_for_the_context_without_tokenizing_it(
    model_dir: Path,
) -> None:
    tokenizer = EngineTokenizer.from_model_dir(model_dir)
    assert tokenizer is not None
    text = ("The quick brown fox jumps over the lazy dog. " * 20_000)[:900_000]
    assert tokenizer.max_token_bytes  # found once, as the engine's first stats do at start
    for req in (
        GenerateRequest(request_id="t", prompt=text),
        GenerateRequest(request_id="c", messages=[ChatMessage(role="user", content=text)]),
    ):
        start = time.perf_counter()
        with pytest.raises(RequestRejected, match="bytes of text"):
            prepare_prompt(req, tokenizer, vocab=tokenizer.vocab_size, max_model_len=8192)
        assert time.perf_counter() - start < 0.05  # tokenizing it would take seconds
    fits = GenerateRequest(request_id="f", prompt=text[:20_000])
    assert prepare_prompt(fits, tokenizer, vocab=tokenizer.vocab_size, max_model_len=8192)


def test_a_long_prompt_tokenizes_while_the_running_requests_keep_decoding(
    model_dir: Path,
) -> None:
    """A 600 KB prompt (under the byte bound at 8,192 tokens; ~133k tokens, so refused
    once tokenized) is tokenized off the engine thread without holding the GIL: a running
    request's tokens keep coming, never more than a third of the tokenizing apart.
    Tokenized between steps, or holding the GIL, it stalled them for all of it."""
    text = ("The quick brown fox jumps over the lazy dog. " * 20_000)[:600_000]
    params = SamplingParams(max_tokens=400, temperature=0.0, ignore_eos=True)

    async def go() -> tuple[float, float]:
        engine = AsyncEngine(LLMEngine.from_model_dir(model_dir, kv_cache_tokens=1024))
        await engine.start()
        running = await engine.submit(request("d", [1, 2, 3], params))
        times: list[float] = []

        async def read() -> None:
            async for chunk in running:
                if chunk.token_ids:
                    times.append(time.monotonic())

        reader = asyncio.ensure_future(read())
        while len(times) < 5:
            await asyncio.sleep(0.01)
        began = time.monotonic()
        with pytest.raises(RequestRejected, match="133333 tokens"):
            await engine.submit(GenerateRequest(request_id="long", prompt=text))
        took = time.monotonic() - began
        await reader
        await engine.stop()
        around = [t for t in times if began - 0.1 <= t <= began + took + 0.1]
        return took, max(b - a for a, b in itertools.pairwise(around))

    took, gap = asyncio.run(go())
    print(f"tokenizing took {took:.3f} s; longest gap between decode tokens meanwhile {gap:.3f} s")
    assert gap < took / 3


def test_the_chat_answer_is_the_models(model_dir: Path) -> None:
    """Through the engine's own tokenizer, template and eos ids (no transformers)."""
    engine = LLMEngine.from_model_dir(model_dir, kv_cache_tokens=1024)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    ids = engine.tokenizer.encode_chat(messages)  # type: ignore[union-attr]
    engine.add_request(request("q", ids, SamplingParams(max_tokens=32, temperature=0.0)))
    chunks = drain(engine)["q"]
    assert "".join(c.text for c in chunks) == "The capital of France is Paris."
    assert chunks[-1].finish_reason is not None and chunks[-1].finish_reason.value == "stop"
