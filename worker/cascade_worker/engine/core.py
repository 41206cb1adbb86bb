"""The engine as the serving layer sees it, and what it reports.

`EngineCore` is a synchronous, step-driven object (vLLM v1 style: the scheduler
decides, the model executes) that an async loop drives from a thread. It takes the
gateway's `GenerateRequest`s and yields `GenerateChunk`s unchanged: those messages
cross processes, so they live in the shared package (cascade_protocol.generate); what
stays here is the engine's own interface, which no other process sees.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict

from cascade_protocol.generate import GenerateChunk, GenerateRequest


class RequestRejected(ValueError):
    """The engine cannot take this request (prompt too long, bad token id); the serving
    layer answers 400 with this message. `param` names the offending request field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class EngineStats(BaseModel):
    model_config = ConfigDict(extra="forbid")

    waiting: int
    running: int
    max_batch: int
    kv_cache_usage: float
    max_model_len: int
    max_token_bytes: int = 0  # the tokenizer's longest token in bytes (0: none or unknown)
    # The last step: prompt tokens it prefilled, and its compute time (0: not measured).
    # A step with no prefill is a pure decode step, whose tokens/s is the batch's own
    # speed, which the local autoscaler compares between caps.
    prefill_tokens: int = 0
    step_s: float = 0.0


class EngineCore(Protocol):
    """A step-driven engine; not thread-safe: one thread calls all of these."""

    def tokenize(self, request: GenerateRequest) -> GenerateRequest:
        """The request with its text as prompt_token_ids (RequestRejected as add_request
        would refuse it); reads only the tokenizer, so it runs on any thread: the
        serving layer calls it off the engine thread, whose steps it would stall."""
        ...

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

    def set_max_batch(self, value: int) -> None:
        """Bound the running batch from the next step; lowering it admits nothing until
        the running set falls under it, and never cuts a running request."""
        ...

    def stats(self) -> EngineStats: ...
