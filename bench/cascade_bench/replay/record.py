"""What the benchmark keeps of one request: times, counts and how it ended.

Times are seconds since the replay started (one monotonic clock for all requests), so a
record is comparable with the schedule (`scheduled_s`) and with any other record. The
client appends events as they arrive; metrics only read finished records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cascade_bench.replay.sse import Event


@dataclass
class RequestRecord:
    index: int  # trace row index
    request_class: str
    scheduled_s: float  # when the schedule said to send it
    prompt_tokens: int  # token ids sent
    max_tokens: int  # output tokens asked for
    sent_s: float | None = None  # first attempt: TTFT and E2E count from here (retries included)
    token_times: list[float] = field(default_factory=list)  # each chunk with text
    end_s: float | None = None  # stream ended, failed or was given up
    status: int | None = None  # HTTP status of the last attempt
    error: str | None = None  # 'kind: detail'; None if it completed
    rejected: bool = False  # ended in a 429 (after any retries)
    usage_tokens: int | None = None  # usage.completion_tokens, when the server sent it
    done: bool = False  # saw [DONE]
    attempts: int = 0

    def add(self, event: Event, t: float) -> None:
        """Fold one stream event arriving at time t into the record."""
        if event.text:
            self.token_times.append(t)
        if event.completion_tokens is not None:
            self.usage_tokens = event.completion_tokens
        if event.error is not None:
            self.error = event.error
            self.rejected = event.rejected
        if event.done:
            self.done = True

    @property
    def ok(self) -> bool:
        return self.error is None and not self.rejected and self.end_s is not None

    @property
    def output_tokens(self) -> int:
        """usage.completion_tokens when sent (exact); else one per chunk with text."""
        return self.usage_tokens if self.usage_tokens is not None else len(self.token_times)

    @property
    def ttft_s(self) -> float | None:
        if self.sent_s is None or not self.token_times:
            return None
        return self.token_times[0] - self.sent_s

    @property
    def e2e_s(self) -> float | None:
        if self.sent_s is None or self.end_s is None:
            return None
        return self.end_s - self.sent_s

    @property
    def error_kind(self) -> str | None:
        if self.rejected:
            return "429"
        return None if self.error is None else self.error.split(":", 1)[0]

    def to_json(self) -> dict[str, Any]:
        """A compact per-request row (token times omitted: they are in the percentiles)."""
        return {
            "index": self.index,
            "class": self.request_class,
            "scheduled_s": self.scheduled_s,
            "sent_s": self.sent_s,
            "ttft_s": self.ttft_s,
            "e2e_s": self.e2e_s,
            "prompt_tokens": self.prompt_tokens,
            "max_tokens": self.max_tokens,
            "output_tokens": self.output_tokens,
            "chunks": len(self.token_times),
            "status": self.status,
            "rejected": self.rejected,
            "error": self.error,
            "attempts": self.attempts,
        }
