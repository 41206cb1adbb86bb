"""Typed messages between the gateway, the worker's serving layer and the engine.

The gateway speaks OpenAI to clients and this small protocol to workers: it POSTs a
`GenerateRequest` to a worker's `/v1/generate` and reads newline-delimited JSON
`GenerateChunk`s back (one per engine step that produced tokens, the last one with a
`finish_reason`). `LoadReport` is what `GET /v1/load` answers, for routing and the
autoscaler. `EngineCore` is the engine as the serving layer sees it: a synchronous,
step-driven object (vLLM v1 style: the scheduler decides, the model executes) that an
async loop drives from a thread.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator


class RequestClass(StrEnum):
    INTERACTIVE = "interactive"  # latency-sensitive, the default
    BATCH = "batch"  # throughput work that may wait


class FinishReason(StrEnum):
    STOP = "stop"  # EOS, a stop string or a stop token
    LENGTH = "length"  # max_tokens or the context length reached
    ABORT = "abort"  # cancelled (client went away, drain deadline)
    ERROR = "error"  # the engine failed this request; `error` says why


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SamplingParams(_Message):
    max_tokens: int = Field(default=16, ge=1)
    # 0 means greedy (argmax); otherwise softmax(logits / temperature).
    temperature: float = Field(default=1.0, ge=0.0, le=100.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    # Same seed, same prompt, same params => same tokens, whatever else is batched.
    seed: int | None = None
    stop: list[str] = Field(default_factory=list)
    stop_token_ids: list[int] = Field(default_factory=list)
    ignore_eos: bool = False


class ChatMessage(_Message):
    role: str = Field(min_length=1)
    content: str


class GenerateRequest(_Message):
    request_id: str = Field(min_length=1)
    # Exactly one of the three. Text is tokenized by the worker (it holds the tokenizer);
    # messages are rendered with the model's own chat template (tokenizer_config.json).
    prompt: str | None = None
    prompt_token_ids: list[int] | None = None
    messages: list[ChatMessage] | None = None
    params: SamplingParams = Field(default_factory=SamplingParams)
    request_class: RequestClass = RequestClass.INTERACTIVE

    @model_validator(mode="after")
    def _one_prompt(self) -> GenerateRequest:
        given = [
            f for f in ("prompt", "prompt_token_ids", "messages") if getattr(self, f) is not None
        ]
        if len(given) != 1:
            raise ValueError("give exactly one of prompt, prompt_token_ids and messages")
        if self.prompt_token_ids is not None and not self.prompt_token_ids:
            raise ValueError("prompt_token_ids must not be empty")
        if self.messages is not None and not self.messages:
            raise ValueError("messages must not be empty")
        return self


class GenerateChunk(_Message):
    request_id: str
    # New text and token ids since the previous chunk (text may lag ids by a partial
    # UTF-8 character or a possible stop-string prefix; it is flushed at the end).
    text: str = ""
    token_ids: list[int] = Field(default_factory=list)
    finish_reason: FinishReason | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0  # so far, including this chunk
    error: str | None = None


class LoadReport(_Message):
    """One instance's load, for least-loaded routing and the autoscaler."""

    instance: str
    model: str
    ready: bool
    draining: bool = False
    waiting: int = 0  # queued requests not yet running
    running: int = 0  # requests in the running batch
    max_batch: int = 1
    kv_cache_usage: float = 0.0  # fraction of KV-cache slots/tokens in use
    tokens_per_s: float = 0.0  # generated tokens per second, recent average
    max_model_len: int = 0  # context length: prompt + max_tokens must fit
    layers: tuple[int, int] | None = None  # the layer range this instance runs


class RequestRejected(ValueError):
    """The engine cannot take this request (prompt too long, bad token id); the serving
    layer answers 400 with this message. `param` names the offending request field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class EngineStats(_Message):
    waiting: int
    running: int
    max_batch: int
    kv_cache_usage: float
    max_model_len: int


class EngineCore(Protocol):
    """A step-driven engine; not thread-safe: one thread calls all of these."""

    def add_request(self, request: GenerateRequest) -> None:
        """Queue a request; RequestRejected if it can never run."""
        ...

    def abort_request(self, request_id: str) -> None:
        """Drop a request (no-op if unknown); its final chunk says ABORT."""
        ...

    def step(self) -> list[GenerateChunk]:
        """Run one iteration (schedule, forward, sample); chunks of requests that moved."""
        ...

    def has_work(self) -> bool: ...

    def stats(self) -> EngineStats: ...
