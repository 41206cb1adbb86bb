"""OpenAI request bodies -> a validated ``Job`` carrying the worker's ``GenerateRequest``.

Everything a client can get wrong is caught here, before the request takes a queue
slot, and answered with a 400 naming the field (404 for an unknown model, like
OpenAI). What this server cannot do (n > 1, echo, logprobs, penalties, tools) is
refused, not silently ignored. Chat messages go to the worker as messages: it holds the
tokenizer and renders the model's own chat template. A completion prompt given as token
ids can be checked against the context length here, since backends report
``max_model_len``; text prompts are checked by the worker, whose 400 is passed through,
after a cheap bound here: a prompt with more UTF-8 bytes than the context length times
the tokenizer's longest token cannot fit, and is refused before any worker tokenizes it.
Pure: the caller passes the accepted model names and the context bounds in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import ValidationError

from cascade_gateway import fields
from cascade_gateway.errors import OpenAIError, bad_request, model_not_found
from cascade_protocol.generate import GenerateRequest, RequestClass
from cascade_protocol.limits import (
    MAX_CONTEXT_TOKENS,
    MAX_PROMPT_CHARS,
    MAX_SEED,
    MAX_TOP_K,
    MIN_SEED,
)

# OpenAI's default for /v1/completions.
DEFAULT_COMPLETION_MAX_TOKENS = 16
# Chat has no fixed default in OpenAI ("up to the context"); the gateway cannot count a
# chat prompt's tokens, so it asks for this many and the worker stops at the context end.
DEFAULT_CHAT_MAX_TOKENS = 256
CLASS_HEADER = "X-Request-Class"


class Endpoint(StrEnum):
    COMPLETIONS = "/v1/completions"
    CHAT = "/v1/chat/completions"


@dataclass(frozen=True)
class Job:
    """One accepted OpenAI request, ready to queue and dispatch."""

    endpoint: Endpoint
    # The model name to echo in responses (what the client asked for).
    model: str
    stream: bool
    # stream_options.include_usage: a final chunk with usage and no choices.
    include_usage: bool
    request: GenerateRequest

    @property
    def request_class(self) -> RequestClass:
        return self.request.request_class


@dataclass(frozen=True)
class Limits:
    """What the gateway knows about its backends when it parses a request."""

    # Model names accepted in the `model` field; empty accepts any.
    models: frozenset[str]
    # The backends' context length; 0 when no backend has reported one yet.
    max_model_len: int = 0
    # The most UTF-8 bytes a text prompt can have and fit the context; 0: no bound known.
    max_prompt_bytes: int = 0


def parse_completion(body: Any, class_header: str | None, limits: Limits, request_id: str) -> Job:
    data = _common(body, limits)
    prompt = data.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one prompt
    text: str | None = None
    ids: list[int] | None = None
    if isinstance(prompt, str):
        if len(prompt) > MAX_PROMPT_CHARS:
            raise bad_request(f"'prompt' may be at most {MAX_PROMPT_CHARS} characters "
                              "long.", "prompt")  # fmt: skip
        text = prompt
    elif isinstance(prompt, list) and prompt and all(isinstance(p, str | list) for p in prompt):
        raise bad_request("Only one prompt per request is supported; send one each.", "prompt")
    elif isinstance(prompt, list):
        ids = fields.token_ids(prompt, "prompt")
    else:
        raise bad_request("'prompt' must be a string or a list of token ids.", "prompt")
    fields.unsupported(data, "echo", (None, False))
    fields.unsupported(data, "best_of", (None, 1))
    fields.unsupported(data, "logprobs", (None,))
    fields.unsupported(data, "suffix", (None, ""))
    max_tokens = _max_tokens(data, "max_tokens")
    max_tokens = _fit_context(ids, max_tokens, DEFAULT_COMPLETION_MAX_TOKENS, limits)
    request = _request(
        request_id=request_id,
        prompt=text,
        prompt_token_ids=ids,
        params=_sampling(data, max_tokens),
        request_class=_request_class(data, class_header),
    )
    _fits_bytes(request, limits)
    return _job(Endpoint.COMPLETIONS, data, request)


def parse_chat(body: Any, class_header: str | None, limits: Limits, request_id: str) -> Job:
    data = _common(body, limits)
    messages = fields.chat_messages(data.get("messages"))
    fields.unsupported(data, "logprobs", (None, False))
    fields.unsupported(data, "top_logprobs", (None, 0))
    fields.unsupported(data, "tools", (None, []))
    response_format = data.get("response_format")
    if response_format is not None and response_format != {"type": "text"}:
        raise bad_request("Only 'response_format' {'type': 'text'} is supported.",
                          "response_format", "unsupported")  # fmt: skip
    max_tokens = _max_tokens(data, "max_completion_tokens")
    if max_tokens is None:
        max_tokens = _max_tokens(data, "max_tokens")
    if max_tokens is None:
        max_tokens = DEFAULT_CHAT_MAX_TOKENS
        if limits.max_model_len > 1:
            max_tokens = min(max_tokens, limits.max_model_len - 1)
    request = _request(
        request_id=request_id,
        messages=messages,
        params=_sampling(data, max_tokens),
        request_class=_request_class(data, class_header),
    )
    _fits_bytes(request, limits)
    return _job(Endpoint.CHAT, data, request)


def _common(body: Any, limits: Limits) -> Mapping[str, Any]:
    """Checks shared by both endpoints: a JSON object naming a served model, n = 1."""
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    model = body.get("model")
    if model is None or model == "":
        raise bad_request("You must provide a model parameter.", "model")
    if not isinstance(model, str):
        raise bad_request("'model' must be a string.", "model")
    if limits.models and model not in limits.models:
        raise model_not_found(model)
    fields.unsupported(body, "n", (None, 1))
    for penalty in ("presence_penalty", "frequency_penalty"):
        fields.unsupported(body, penalty, (None, 0, 0.0))
    fields.unsupported(body, "logit_bias", (None, {}))
    return body


def _max_tokens(data: Mapping[str, Any], name: str) -> int | None:
    return fields.optional_int(data, name, minimum=1, maximum=MAX_CONTEXT_TOKENS)


def _sampling(data: Mapping[str, Any], max_tokens: int) -> dict[str, Any]:
    """`SamplingParams` fields (validated with the request, see `_request`)."""
    return {
        "max_tokens": max_tokens,
        # Unset: the model's generation_config.json defaults (the worker applies them).
        "temperature": fields.number(data, "temperature", None, low=0.0, high=2.0),
        "top_p": fields.number(data, "top_p", None, low=0.0, high=1.0, low_open=True),
        "top_k": _top_k(data),
        "seed": fields.optional_int(data, "seed", minimum=MIN_SEED, maximum=MAX_SEED),
        "stop": fields.string_list(data, "stop"),
        "stop_token_ids": fields.optional_token_ids(data, "stop_token_ids"),
        "ignore_eos": fields.flag(data, "ignore_eos"),
    }


def _top_k(data: Mapping[str, Any]) -> int | None:
    """vLLM's extension: -1 (and 0) keep every token."""
    top_k = fields.optional_int(data, "top_k", minimum=-1, maximum=MAX_TOP_K)
    return None if top_k is None else max(top_k, 0)


def _request(**values: Any) -> GenerateRequest:
    """The worker's request; a 400 naming the field for anything the checks above let by
    that the shared model refuses (its bounds are the worker's, so both ends agree)."""
    try:
        return GenerateRequest(**values)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = [str(p) for p in error["loc"] if p != "params"]
        param = ".".join(where) or None
        raise bad_request(f"'{param or 'body'}': {error['msg']}.", param) from None


def _job(endpoint: Endpoint, data: Mapping[str, Any], request: GenerateRequest) -> Job:
    stream = fields.flag(data, "stream")
    options = data.get("stream_options")
    include_usage = False
    if options is not None:
        if not stream:
            raise bad_request(
                "'stream_options' is only allowed when 'stream' is true.", "stream_options"
            )
        if not isinstance(options, dict):
            raise bad_request("'stream_options' must be an object.", "stream_options")
        include_usage = fields.flag(options, "include_usage")
    return Job(endpoint, data["model"], stream, include_usage, request)


def _request_class(data: Mapping[str, Any], header: str | None) -> RequestClass:
    """Body field first, then the X-Request-Class header; interactive by default."""
    for value, param in ((data.get("request_class"), "request_class"), (header, CLASS_HEADER)):
        if value is None or value == "":
            continue
        try:
            return RequestClass(str(value).strip().lower())
        except ValueError:
            choices = ", ".join(c.value for c in RequestClass)
            raise bad_request(f"'{param}' must be one of {choices}, got {value!r}.",
                              param) from None  # fmt: skip
    return RequestClass.INTERACTIVE


def _fit_context(ids: list[int] | None, asked: int | None, default: int, limits: Limits) -> int:
    """max_tokens for a prompt; refuses what cannot fit when the prompt length is known."""
    limit = limits.max_model_len
    if ids is None or limit <= 0:
        return default if asked is None else asked
    if asked is None:
        if len(ids) < limit:
            return max(1, min(default, limit - len(ids)))
        asked = default
    if len(ids) + asked > limit:
        raise context_exceeded(limit, len(ids), asked)
    return asked


def _fits_bytes(request: GenerateRequest, limits: Limits) -> None:
    """Refuse a text prompt too long in bytes for any tokenization to fit the context."""
    bound, size = limits.max_prompt_bytes, request.text_bytes()
    if bound > 0 and size > bound:
        raise bad_request(
            f"This model's maximum context length is {limits.max_model_len} tokens. However, "
            f"the prompt has {size} bytes of text, more than that many tokens can hold "
            f"({bound} bytes). Please reduce the prompt.",
            request.text_param,
            "context_length_exceeded",
        )


def context_exceeded(limit: int, prompt: int, completion: int) -> OpenAIError:
    param = "prompt" if prompt >= limit else "max_tokens"
    return bad_request(
        f"This model's maximum context length is {limit} tokens. However, you requested "
        f"{prompt + completion} tokens ({prompt} in the prompt, {completion} for the "
        "completion). Please reduce the prompt or the completion length.",
        param,
        "context_length_exceeded",
    )
