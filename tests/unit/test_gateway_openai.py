"""The gateway through the official `openai` client: both endpoints, stream and not.

A fake worker on loopback stands in for the engine; the client talks to a real gateway
listener, so the SSE framing, the response shapes and the error mapping are checked the
way users' code will see them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import openai
import pytest
from gateway_fakes import MODEL, FakeWorker, Running, running

from cascade_protocol.generate import ChatMessage

pytestmark = pytest.mark.timeout(60)


def with_gateway(
    test: Callable[[Running, openai.AsyncOpenAI], Awaitable[None]],
    workers: list[FakeWorker] | None = None,
    **config: Any,
) -> None:
    async def go() -> None:
        async with running(workers or [FakeWorker("w")], **config) as run:
            client = openai.AsyncOpenAI(base_url=run.base_url, api_key="x", max_retries=0)
            async with client:
                await test(run, client)

    asyncio.run(go())


def test_completion_non_streaming() -> None:
    async def test(run: Running, client: openai.AsyncOpenAI) -> None:
        out = await client.completions.create(model=MODEL, prompt="hello", max_tokens=3)
        assert out.object == "text_completion"
        assert out.id.startswith("cmpl-")
        assert out.model == MODEL
        assert [c.text for c in out.choices] == ["w0 w1 w2 "]
        assert out.choices[0].finish_reason == "length"
        assert out.usage is not None
        assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (3, 3)
        assert out.usage.total_tokens == 6
        [sent] = run.workers[0].received
        assert sent.prompt == "hello"
        assert sent.params.max_tokens == 3

    with_gateway(test)


def test_the_gateway_presents_the_deployments_token_to_workers() -> None:
    token = "t" * 43  # workers that demand it (401 without) still serve through the gateway

    async def test(run: Running, client: openai.AsyncOpenAI) -> None:
        out = await client.completions.create(model=MODEL, prompt="hello", max_tokens=2)
        assert [c.text for c in out.choices] == ["w0 w1 "]
        assert run.workers[0].received  # the generate passed the worker's door

    with_gateway(test, [FakeWorker("w", token=token)], peer_token=token)


def test_completion_streaming_with_usage_and_token_ids() -> None:
    async def test(run: Running, client: openai.AsyncOpenAI) -> None:
        stream = await client.completions.create(
            model=MODEL,
            prompt=[1, 2, 3, 4],
            max_tokens=4,
            stream=True,
            stream_options={"include_usage": True},
            temperature=0,
            top_p=0.5,
            seed=7,
            stop=["\n"],
            extra_body={"ignore_eos": True},
        )
        chunks = [chunk async for chunk in stream]
        texts = "".join(c.choices[0].text for c in chunks if c.choices)
        assert texts == "w0 w1 w2 w3 "
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
        assert all(c.usage is None for c in chunks[:-1])
        assert chunks[-1].choices == []
        assert chunks[-1].usage is not None
        assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (4, 4)
        [sent] = run.workers[0].received
        assert sent.prompt_token_ids == [1, 2, 3, 4]
        assert sent.prompt is None
        params = sent.params
        assert (params.temperature, params.top_p, params.seed) == (0.0, 0.5, 7)
        assert (params.stop, params.ignore_eos, params.max_tokens) == (["\n"], True, 4)

    with_gateway(test)


def test_chat_non_streaming() -> None:
    async def test(run: Running, client: openai.AsyncOpenAI) -> None:
        out = await client.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            ],
            max_completion_tokens=2,
        )
        assert out.object == "chat.completion"
        assert out.id.startswith("chatcmpl-")
        message = out.choices[0].message
        assert (message.role, message.content) == ("assistant", "w0 w1 ")
        assert out.choices[0].finish_reason == "length"
        assert out.usage is not None and out.usage.completion_tokens == 2
        [sent] = run.workers[0].received
        assert sent.messages == [
            ChatMessage(role="system", content="be brief"),
            ChatMessage(role="user", content="hi"),
        ]
        assert sent.params.max_tokens == 2

    with_gateway(test)


def test_chat_streaming() -> None:
    async def test(run: Running, client: openai.AsyncOpenAI) -> None:
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=3,
            stream=True,
        )
        chunks = [chunk async for chunk in stream]
        assert all(c.object == "chat.completion.chunk" for c in chunks)
        assert len({c.id for c in chunks}) == 1
        assert chunks[0].choices[0].delta.role == "assistant"
        content = "".join(c.choices[0].delta.content or "" for c in chunks)
        assert content == "w0 w1 w2 "
        assert [c.choices[0].finish_reason for c in chunks][-1] == "length"
        assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
        assert all(c.usage is None for c in chunks)

    with_gateway(test)


def test_chat_default_max_tokens_fits_the_context() -> None:
    async def test(run: Running, client: openai.AsyncOpenAI) -> None:
        await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
        assert run.workers[0].received[0].params.max_tokens == 63  # max_model_len - 1

    with_gateway(test)


def test_models_and_errors_through_the_client() -> None:
    async def test(run: Running, client: openai.AsyncOpenAI) -> None:
        models = await client.models.list()
        assert [m.id for m in models.data] == [MODEL]

        with pytest.raises(openai.NotFoundError) as nf:
            await client.completions.create(model="gpt-9", prompt="x")
        assert nf.value.code == "model_not_found"
        assert "gpt-9" in nf.value.message

        cases: list[tuple[dict[str, Any], str | None]] = [
            ({"max_tokens": 0}, "max_tokens"),
            ({"max_tokens": -5}, "max_tokens"),
            ({"temperature": 2.5}, "temperature"),
            ({"top_p": 0}, "top_p"),
            ({"n": 2}, "n"),
            ({"extra_body": {"max_tokens": "ten"}}, "max_tokens"),
            ({"prompt": list(range(64))}, "prompt"),
            ({"prompt": list(range(60)), "max_tokens": 10}, "max_tokens"),
        ]
        for extra, param in cases:
            kwargs: dict[str, Any] = {"model": MODEL, "prompt": "x"} | extra
            with pytest.raises(openai.BadRequestError) as bad:
                await client.completions.create(**kwargs)
            assert bad.value.param == param, extra
            assert bad.value.type == "invalid_request_error"
        with pytest.raises(openai.BadRequestError) as long:
            await client.completions.create(model=MODEL, prompt=list(range(64)))
        assert long.value.code == "context_length_exceeded"
        assert "maximum context length is 64 tokens" in long.value.message

        # The worker's own 400 (a text prompt it measured) comes back unchanged.
        with pytest.raises(openai.BadRequestError) as passed:
            await client.completions.create(model=MODEL, prompt="too long")
        assert passed.value.body == {
            "message": "prompt too long for the worker",
            "type": "invalid_request_error",
            "param": "prompt",
            "code": "context_length_exceeded",
        }
        assert passed.value.code == "context_length_exceeded"
        assert len(run.workers[0].received) == 1  # never retried

        with pytest.raises(openai.BadRequestError) as chat:
            await client.chat.completions.create(model=MODEL, messages=[])
        assert chat.value.param == "messages"

    with_gateway(test)
