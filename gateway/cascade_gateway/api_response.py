"""Worker ``GenerateChunk``s -> OpenAI response objects and stream chunks, exact shapes.

Clients (the official SDKs, LangChain, vLLM's and others' benchmark scripts) parse these
with strict expectations: ``object`` names, ``choices[0].delta`` with the assistant
``role`` in the first chat chunk, ``finish_reason`` only on the last content chunk,
``usage: null`` on every chunk and a final choice-less usage chunk when
``stream_options.include_usage`` asks for it. Building them in one pure module keeps
the handlers about I/O only and lets tests compare whole dictionaries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cascade_gateway.api_request import Endpoint, Job
from cascade_protocol.generate import FinishReason, GenerateChunk

# Finish reasons a worker reports that OpenAI clients know; others are failures.
OPENAI_FINISH = {FinishReason.STOP: "stop", FinishReason.LENGTH: "length"}
DONE = b"data: [DONE]\n\n"


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, chunk: GenerateChunk) -> None:
        """Counts are cumulative in the protocol: keep the latest non-zero ones."""
        self.prompt_tokens = chunk.prompt_tokens or self.prompt_tokens
        self.completion_tokens = max(self.completion_tokens, chunk.completion_tokens)

    def body(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


@dataclass
class Envelope:
    """The per-response constants every object and chunk repeats."""

    id: str
    created: int
    model: str
    usage: Usage = field(default_factory=Usage)

    def head(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model}


def response_id(endpoint: Endpoint, unique: str) -> str:
    return ("chatcmpl-" if endpoint is Endpoint.CHAT else "cmpl-") + unique


def full_response(job: Job, env: Envelope, text: str, finish: str) -> dict[str, Any]:
    """The non-streaming response object."""
    if job.endpoint is Endpoint.CHAT:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": finish,
        }
        obj = "chat.completion"
    else:
        choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": finish}
        obj = "text_completion"
    return env.head(obj) | {"choices": [choice], "usage": env.usage.body()}


def stream_chunk(
    job: Job, env: Envelope, text: str, finish: str | None, *, first: bool = False
) -> dict[str, Any]:
    """One SSE chunk with one choice; the first chat chunk also carries the role."""
    if job.endpoint is Endpoint.CHAT:
        delta: dict[str, Any] = {"role": "assistant", "content": text} if first else {}
        if text and not first:
            delta["content"] = text
        choice: dict[str, Any] = {
            "index": 0,
            "delta": delta,
            "logprobs": None,
            "finish_reason": finish,
        }
        obj = "chat.completion.chunk"
    else:
        choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": finish}
        obj = "text_completion"
    chunk = env.head(obj) | {"choices": [choice]}
    if job.include_usage:
        chunk["usage"] = None
    return chunk


def usage_chunk(job: Job, env: Envelope) -> dict[str, Any]:
    """The last chunk of an include_usage stream: no choices, the totals."""
    obj = "chat.completion.chunk" if job.endpoint is Endpoint.CHAT else "text_completion"
    return env.head(obj) | {"choices": [], "usage": env.usage.body()}


def sse(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"
