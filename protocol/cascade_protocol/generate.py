"""What the gateway and a worker say to each other about one generation.

The gateway speaks OpenAI to clients and this small protocol to workers: it POSTs a
`GenerateRequest` to a worker's `/v1/generate` and reads newline-delimited JSON
`GenerateChunk`s back (one per engine step that produced tokens, the last one with a
`finish_reason`). The worker's engine takes the same request objects, so a field added
here reaches the sampler without a translation layer. Wire names are snake_case (the
OpenAI vocabulary the gateway maps from).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator


class RequestClass(StrEnum):
    INTERACTIVE = "interactive"  # latency-sensitive, the default
    BATCH = "batch"  # throughput work that may wait


class FinishReason(StrEnum):
    STOP = "stop"  # EOS, a stop string or a stop token
    LENGTH = "length"  # max_tokens or the context length reached
    ABORT = "abort"  # cancelled (client went away, drain deadline)
    ERROR = "error"  # the engine failed this request; `error` says why


class Message(BaseModel):
    """Unknown fields are refused: a typo must not silently mean "use the default"."""

    model_config = ConfigDict(extra="forbid")


class SamplingParams(Message):
    max_tokens: int = Field(default=16, ge=1)
    # 0 means greedy (argmax); otherwise softmax(logits / temperature).
    temperature: float = Field(default=1.0, ge=0.0, le=100.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    # Same seed, same prompt, same params => same tokens, whatever else is batched.
    seed: int | None = None
    stop: list[str] = Field(default_factory=list)
    stop_token_ids: list[int] = Field(default_factory=list)
    ignore_eos: bool = False


class ChatMessage(Message):
    role: str = Field(min_length=1)
    content: str


class GenerateRequest(Message):
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


class GenerateChunk(Message):
    request_id: str
    # New text and token ids since the previous chunk (text may lag ids by a partial
    # UTF-8 character or a possible stop-string prefix; it is flushed at the end).
    text: str = ""
    token_ids: list[int] = Field(default_factory=list)
    finish_reason: FinishReason | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0  # so far, including this chunk
    error: str | None = None
