"""What the gateway and a worker say to each other about one generation.

The gateway speaks OpenAI to clients and this small protocol to workers: it POSTs a
`GenerateRequest` to a worker's `/v1/generate` and reads newline-delimited JSON
`GenerateChunk`s back (one per engine step that produced tokens, the last one with a
`finish_reason`). The worker's engine takes the same request objects, so a field added
here reaches the sampler without a translation layer. Wire names are snake_case (the
OpenAI vocabulary the gateway maps from).

A stream can move between instances (scale-down): a worker that is leaving ends it with
`FinishReason.MIGRATE` instead of cutting it, and the gateway sends the same request to
another worker with `resume` saying what the client already has (the tokens, and how
much of their text). That worker prefills prompt + those tokens (the engine's recompute
path), counts them against `max_tokens` and the stop rules as its own, and streams only
what comes after them, so the client sees one stream with no seam.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cascade_protocol import limits

# A vocabulary index (the engine checks it against the model's own vocabulary).
TokenId = Annotated[int, Field(ge=0, le=limits.MAX_TOKEN_ID)]
StopString = Annotated[str, Field(max_length=limits.MAX_STOP_CHARS)]


class RequestClass(StrEnum):
    INTERACTIVE = "interactive"  # latency-sensitive, the default
    BATCH = "batch"  # throughput work that may wait


class FinishReason(StrEnum):
    STOP = "stop"  # EOS, a stop string or a stop token
    LENGTH = "length"  # max_tokens or the context length reached
    ABORT = "abort"  # cancelled (the client went away, the engine stopped)
    # The instance is leaving (drain): nothing failed, resume elsewhere (`resume`).
    MIGRATE = "migrate"
    ERROR = "error"  # the engine failed this request; `error` says why


class Message(BaseModel):
    """Unknown fields are refused: a typo must not silently mean "use the default"."""

    model_config = ConfigDict(extra="forbid")


class SamplingParams(Message):
    max_tokens: int = Field(default=16, ge=1, le=limits.MAX_CONTEXT_TOKENS)
    # 0 means greedy (argmax); otherwise softmax(logits / temperature). None (unset):
    # the model's generation_config.json default, else 1.0, as vLLM does.
    temperature: float | None = Field(default=None, ge=0.0, le=100.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)  # None: model default, else 1
    # Sample among the k likeliest tokens; 0 keeps all. None: model default, else 0.
    top_k: int | None = Field(default=None, ge=0, le=limits.MAX_TOP_K)
    # Same seed, same prompt, same params => same tokens, whatever else is batched.
    seed: int | None = Field(default=None, ge=limits.MIN_SEED, le=limits.MAX_SEED)
    stop: list[StopString] = Field(default_factory=list, max_length=limits.MAX_STOP_STRINGS)
    stop_token_ids: list[TokenId] = Field(
        default_factory=list, max_length=limits.MAX_STOP_TOKEN_IDS
    )
    ignore_eos: bool = False


class ChatMessage(Message):
    role: str = Field(min_length=1, max_length=limits.MAX_ROLE_CHARS)
    content: str = Field(max_length=limits.MAX_PROMPT_CHARS)


class Resume(Message):
    """What a moved stream's client already has; the new instance continues from there."""

    # Every token generated so far, in order (their count is part of max_tokens).
    token_ids: list[TokenId] = Field(min_length=1, max_length=limits.MAX_CONTEXT_TOKENS)
    # Characters of those tokens' text the client received. The rest (a partial UTF-8
    # character or a possible stop-string prefix, held back) comes from the new instance.
    text_chars: int = Field(default=0, ge=0)


class GenerateRequest(Message):
    request_id: str = Field(min_length=1, max_length=limits.MAX_REQUEST_ID_CHARS)
    # Exactly one of the three. Text is tokenized by the worker (it holds the tokenizer);
    # messages are rendered with the model's own chat template (tokenizer_config.json).
    prompt: str | None = Field(default=None, max_length=limits.MAX_PROMPT_CHARS)
    prompt_token_ids: list[TokenId] | None = Field(
        default=None, max_length=limits.MAX_CONTEXT_TOKENS
    )
    messages: list[ChatMessage] | None = Field(default=None, max_length=limits.MAX_CHAT_MESSAGES)
    params: SamplingParams = Field(default_factory=SamplingParams)
    request_class: RequestClass = RequestClass.INTERACTIVE
    # Set when the gateway resumes a stream another instance handed back (MIGRATE).
    resume: Resume | None = None

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
        if self.resume is not None and len(self.resume.token_ids) >= self.params.max_tokens:
            raise ValueError("resume.token_ids must be fewer than max_tokens")
        return self

    def text_bytes(self) -> int:
        """UTF-8 bytes of the text a tokenizer would read (the prompt, or the messages'
        contents; 0 for token ids): at least this over the tokenizer's longest token
        many tokens, checked by the gateway and the worker before tokenizing."""
        texts = (
            [self.prompt] if self.prompt is not None else [m.content for m in self.messages or ()]
        )
        return sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)

    @property
    def text_param(self) -> str:
        """The field that holds the text: where an error about its length points."""
        return "messages" if self.messages is not None else "prompt"


class GenerateChunk(Message):
    request_id: str
    # New text and token ids since the previous chunk (text may lag ids by a partial
    # UTF-8 character or a possible stop-string prefix; it is flushed at the end).
    text: str = ""
    token_ids: list[int] = Field(default_factory=list)
    finish_reason: FinishReason | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0  # so far, including this chunk (and any resumed tokens)
    error: str | None = None
