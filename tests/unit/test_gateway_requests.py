"""OpenAI request parsing and response shapes, as pure functions."""

from __future__ import annotations

from typing import Any

import pytest

from cascade_gateway.api_request import Endpoint, Limits, parse_chat, parse_completion
from cascade_gateway.api_response import (
    DONE,
    Envelope,
    Usage,
    full_response,
    sse,
    stream_chunk,
    usage_chunk,
)
from cascade_gateway.errors import OpenAIError
from cascade_protocol.generate import GenerateChunk, RequestClass

LIMITS = Limits(models=frozenset({"m"}), max_model_len=32)


def completion(header: str | None = None, limits: Limits = LIMITS, **body: Any) -> Any:
    return parse_completion({"model": "m", "prompt": "p"} | body, header, limits, "cmpl-1")


def chat(limits: Limits = LIMITS, **body: Any) -> Any:
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    return parse_chat(base | body, None, limits, "chatcmpl-1")


def error_of(fn: Any, *args: Any, **kwargs: Any) -> OpenAIError:
    with pytest.raises(OpenAIError) as exc:
        fn(*args, **kwargs)
    return exc.value


def test_completion_defaults() -> None:
    job = completion()
    assert job.endpoint is Endpoint.COMPLETIONS
    assert (job.model, job.stream, job.include_usage) == ("m", False, False)
    req = job.request
    assert (req.request_id, req.prompt, req.prompt_token_ids, req.messages) == (
        "cmpl-1", "p", None, None
    )  # fmt: skip
    assert req.params.max_tokens == 16
    # Unset sampling fields travel unset: the worker applies the model's defaults.
    assert (req.params.temperature, req.params.top_p, req.params.top_k) == (None, None, None)
    assert job.request_class is RequestClass.INTERACTIVE


def test_completion_prompt_forms() -> None:
    assert completion(prompt=["one"]).request.prompt == "one"
    assert completion(prompt=[[5, 6]]).request.prompt_token_ids == [5, 6]
    assert completion(prompt=[5, 6]).request.prompt_token_ids == [5, 6]
    for prompt in (["a", "b"], [[1], [2]], [], None, 3, [1, -1], [1, True], {"x": 1}):
        assert error_of(completion, prompt=prompt).param == "prompt", prompt


def test_token_prompts_are_checked_against_the_context() -> None:
    assert completion(prompt=list(range(20))).request.params.max_tokens == 12  # clamped
    assert completion(prompt=list(range(10)), max_tokens=22).request.params.max_tokens == 22
    over = error_of(completion, prompt=list(range(10)), max_tokens=23)
    assert (over.status, over.param, over.code) == (400, "max_tokens", "context_length_exceeded")
    assert "requested 33 tokens (10 in the prompt, 23 for the completion)" in over.message
    assert error_of(completion, prompt=list(range(32))).param == "prompt"
    unknown = Limits(models=frozenset())
    assert completion(prompt=list(range(99)), limits=unknown).request.params.max_tokens == 16


def test_text_prompts_longer_than_the_context_can_hold_are_refused_before_tokenizing() -> None:
    bounded = Limits(models=frozenset({"m"}), max_model_len=32, max_prompt_bytes=32 * 10)
    assert completion(prompt="x" * 320, limits=bounded).request.prompt == "x" * 320
    over = error_of(completion, prompt="x" * 321, limits=bounded)
    assert (over.status, over.param, over.code) == (400, "prompt", "context_length_exceeded")
    assert "321 bytes" in over.message and "32 tokens" in over.message
    wide = error_of(completion, prompt="é" * 161, limits=bounded)  # 322 bytes, 161 chars
    assert wide.code == "context_length_exceeded"
    messages = [{"role": "system", "content": "y" * 200}, {"role": "user", "content": "z" * 121}]
    assert error_of(chat, messages=messages, limits=bounded).param == "messages"
    assert completion(prompt="x" * 9999).request.prompt  # no bound known: the worker checks


def test_sampling_fields() -> None:
    params = completion(
        max_tokens=5, temperature=0, top_p=0.9, seed=3, stop="x", stop_token_ids=[2],
        ignore_eos=True,
    ).request.params  # fmt: skip
    assert (params.max_tokens, params.temperature, params.top_p, params.seed) == (5, 0.0, 0.9, 3)
    assert (params.stop, params.stop_token_ids, params.ignore_eos) == (["x"], [2], True)
    assert completion(stop=["a", "b"]).request.params.stop == ["a", "b"]
    assert completion(max_tokens=None, temperature=None).request.params.max_tokens == 16
    assert completion(top_k=40).request.params.top_k == 40
    assert completion(top_k=-1).request.params.top_k == 0  # vLLM's "every token"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_tokens", 0),
        ("max_tokens", 1.5),
        ("max_tokens", True),
        ("temperature", -0.1),
        ("temperature", 2.01),
        ("temperature", "hot"),
        ("top_p", 0),
        ("top_p", 1.1),
        ("top_k", -2),
        ("top_k", 1.5),
        ("seed", "1"),
        ("stop", 5),
        ("stop", ["a", 1]),
        ("stream", "yes"),
        ("ignore_eos", 1),
        ("n", 2),
        ("best_of", 3),
        ("echo", True),
        ("logprobs", 2),
        ("suffix", "s"),
        ("presence_penalty", 0.5),
        ("frequency_penalty", -1),
        ("logit_bias", {"1": 2}),
        ("request_class", "bulk"),
        ("stop_token_ids", [-1]),
    ],
)
def test_bad_fields_name_the_param(field: str, value: Any) -> None:
    error = error_of(completion, **{field: value})
    assert (error.status, error.param, error.type) == (400, field, "invalid_request_error")
    assert field in error.message


def test_accepted_defaults_of_unsupported_features() -> None:
    job = completion(
        n=1, best_of=1, echo=False, logprobs=None, presence_penalty=0, frequency_penalty=0.0,
        logit_bias={}, user="u", suffix=None,
    )  # fmt: skip
    assert job.request.prompt == "p"


def test_model_checks() -> None:
    missing = error_of(parse_completion, {"prompt": "p"}, None, LIMITS, "id")
    assert (missing.status, missing.param) == (400, "model")
    unknown = error_of(completion, model="gpt")
    assert (unknown.status, unknown.code, unknown.param) == (404, "model_not_found", "model")
    assert error_of(completion, model=3).param == "model"
    assert completion(model="any", limits=Limits(models=frozenset())).model == "any"
    assert error_of(parse_completion, ["x"], None, LIMITS, "id").status == 400


def test_request_class_from_body_or_header() -> None:
    assert completion(request_class="batch").request_class is RequestClass.BATCH
    assert completion("batch").request_class is RequestClass.BATCH
    assert completion(" Batch ").request_class is RequestClass.BATCH
    assert completion("batch", request_class="interactive").request_class.value == "interactive"
    assert error_of(completion, "later").param == "X-Request-Class"


def test_stream_options() -> None:
    job = completion(stream=True, stream_options={"include_usage": True})
    assert (job.stream, job.include_usage) == (True, True)
    assert error_of(completion, stream_options={"include_usage": True}).param == "stream_options"
    assert error_of(completion, stream=True, stream_options=[]).param == "stream_options"


def test_chat_messages_and_max_tokens() -> None:
    job = chat(
        messages=[
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": t} for t in "ab"]},
            {"role": "assistant", "content": None},
        ]
    )  # fmt: skip
    assert job.endpoint is Endpoint.CHAT
    assert [(m.role, m.content) for m in job.request.messages] == [
        ("system", "s"), ("user", "ab"), ("assistant", "")
    ]  # fmt: skip
    assert job.request.params.max_tokens == 31  # default 256, capped by the context
    assert chat(limits=Limits(frozenset())).request.params.max_tokens == 256
    assert chat(max_tokens=7).request.params.max_tokens == 7
    assert chat(max_tokens=7, max_completion_tokens=9).request.params.max_tokens == 9
    assert error_of(chat, max_completion_tokens=0).param == "max_completion_tokens"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": []}, "messages"),
        ({"messages": "hi"}, "messages"),
        ({"messages": ["hi"]}, "messages[0]"),
        ({"messages": [{"content": "hi"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
         "messages[0].content"),
        ({"logprobs": True}, "logprobs"),
        ({"tools": [{"type": "function"}]}, "tools"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
    ],
)  # fmt: skip
def test_bad_chat_requests(body: dict[str, Any], param: str) -> None:
    assert error_of(chat, **body).param == param


def test_response_shapes() -> None:
    comp, cht = completion(), chat()
    env = Envelope("id-1", 1700000000, "m", Usage(3, 2))
    assert full_response(comp, env, "hi", "stop") == {
        "id": "id-1",
        "object": "text_completion",
        "created": 1700000000,
        "model": "m",
        "choices": [{"text": "hi", "index": 0, "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    assert full_response(cht, env, "hi", "length")["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hi"},
            "logprobs": None,
            "finish_reason": "length",
        }
    ]
    first = stream_chunk(cht, env, "", None, first=True)
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "usage" not in first
    assert stream_chunk(cht, env, "x", None)["choices"][0]["delta"] == {"content": "x"}
    assert stream_chunk(cht, env, "", "stop")["choices"][0] == {
        "index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"
    }  # fmt: skip
    with_usage = completion(stream=True, stream_options={"include_usage": True})
    assert stream_chunk(with_usage, env, "x", None)["usage"] is None
    assert usage_chunk(with_usage, env)["choices"] == []
    assert usage_chunk(with_usage, env)["usage"]["total_tokens"] == 5
    assert sse({"a": 1}) == b'data: {"a":1}\n\n'
    assert DONE == b"data: [DONE]\n\n"


def test_usage_follows_cumulative_counts() -> None:
    usage = Usage()
    for n in (1, 2, 3):
        usage.add(GenerateChunk(request_id="r", prompt_tokens=4, completion_tokens=n))
    usage.add(GenerateChunk(request_id="r"))  # a chunk without counts changes nothing
    assert usage.body() == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}
