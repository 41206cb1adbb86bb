"""What the global autoscaler needs to know about demand, kept by the gateway (pure).

The ``demand`` part of the gateway's load report (``cascade_protocol.gateway_load``):

- interactive arrivals (every valid request, also one then refused for a full queue:
  it is demand all the same) per ``interval`` (10 s) bucket, the last ``buckets`` (30) whole
  ones, oldest first: buckets are aligned to multiples of the interval on the gateway's
  clock, the current (partial) one is left out, and so is every bucket that began
  before the gateway started (they would read as idle time that was never observed);
- the age of the latest arrival of any class (keep-alive before scaling to zero);
- every queued batch request: age, time left to its TTFT deadline (arrival + the
  class's TTFT SLO), prompt tokens, max_tokens; oldest first, at most
  ``MAX_REPORTED_BATCH``;
- output length mean and standard deviation (population) over the last ``outputs``
  (512) requests that finished (stop or length; failed and abandoned ones say nothing
  about how long outputs turn out).

Prompt tokens are exact for a prompt given as token ids; the gateway holds no
tokenizer, so text and chat prompts are estimated at ``CHARS_PER_TOKEN`` characters a
token (the usual rule of thumb for English BPE vocabularies).

Times are the gateway's monotonic clock, passed in; the report holds only differences.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from cascade_protocol.gateway_load import MAX_REPORTED_BATCH, Demand, QueuedBatch
from cascade_protocol.generate import GenerateRequest, RequestClass

ARRIVAL_INTERVAL_S = 10.0
ARRIVAL_BUCKETS = 30
OUTPUT_SAMPLES = 512
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Ticket:
    """One queued request, as the load report lists it."""

    arrived: float
    deadline: float  # arrival + its class's TTFT SLO
    prompt_tokens: int
    max_tokens: int


def prompt_tokens(request: GenerateRequest) -> int:
    """Exact for token ids, else estimated from the characters (no tokenizer here)."""
    if request.prompt_token_ids is not None:
        return len(request.prompt_token_ids)
    chars = len(request.prompt or "") + sum(len(m.content) for m in request.messages or ())
    return math.ceil(chars / CHARS_PER_TOKEN)


class DemandTracker:
    """Arrival counts, the latest arrival and recent output lengths."""

    def __init__(
        self,
        started: float,
        interval: float = ARRIVAL_INTERVAL_S,
        buckets: int = ARRIVAL_BUCKETS,
        outputs: int = OUTPUT_SAMPLES,
    ) -> None:
        self.interval = interval
        self.buckets = buckets
        self._first_whole = math.floor(started / interval) + 1
        self._counts: dict[int, int] = {}
        self._last_arrival: float | None = None
        self._outputs: deque[int] = deque(maxlen=outputs)

    def _bucket(self, now: float) -> int:
        return math.floor(now / self.interval)

    def arrived(self, request_class: RequestClass, now: float) -> None:
        self._last_arrival = now
        if request_class is RequestClass.INTERACTIVE:
            bucket = self._bucket(now)
            self._counts[bucket] = self._counts.get(bucket, 0) + 1
            for old in [b for b in self._counts if b < bucket - self.buckets]:
                del self._counts[old]

    def finished(self, completion_tokens: int) -> None:
        self._outputs.append(completion_tokens)

    def arrivals(self, now: float) -> list[int]:
        """Interactive arrivals per whole bucket, oldest first (current one excluded)."""
        current = self._bucket(now)
        first = max(self._first_whole, current - self.buckets)
        return [self._counts.get(b, 0) for b in range(first, current)]

    def report(self, now: float, held: int, queued: Iterable[Ticket]) -> Demand:
        outputs = list(self._outputs)
        mean = sum(outputs) / len(outputs) if outputs else 0.0
        var = sum((x - mean) ** 2 for x in outputs) / len(outputs) if outputs else 0.0
        oldest = sorted(queued, key=lambda t: t.arrived)[:MAX_REPORTED_BATCH]
        return Demand(
            held=held,
            last_arrival_age_s=None if self._last_arrival is None else now - self._last_arrival,
            arrival_interval_s=self.interval,
            interactive_arrivals=self.arrivals(now),
            batch_queue=[
                QueuedBatch(
                    age_s=max(0.0, now - t.arrived),
                    deadline_in_s=t.deadline - now,
                    prompt_tokens=t.prompt_tokens,
                    max_tokens=t.max_tokens,
                )
                for t in oldest
            ],
            output_tokens_mean=mean,
            output_tokens_std=math.sqrt(var),
            output_samples=len(outputs),
        )
