"""The serving layer's Prometheus series: what an SLO-driven autoscaler and a person need.

Latency (TTFT, ITL) is what users feel and what Chiron-style local batch control steers
by; queue depth, running batch, KV-cache use and recent tokens/s say how loaded the
instance is; the batch cap in force and the local autoscaler's backpressure (its last
judged window, NaN before one) say why the batch is what it is. Histograms and counters
are fed by the async engine as chunks arrive; gauges are read at scrape time from
whatever engine currently serves (zeros when none), so the series survive an engine
being drained and a new one started. Block and byte counters of weight transfers live
in control/jobs.py.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Seconds. TTFT spans queueing and prefill: milliseconds on a small model, tens of
# seconds for a long prompt behind a full queue.
TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Seconds per token while decoding; interactive SLOs sit around 20-100 ms.
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.035, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5)
# The "recent" in tokens/s: long enough to smooth step jitter, short enough to follow load.
RATE_WINDOW_S = 10.0


@dataclass(frozen=True)
class LoadNow:
    """Instantaneous load, as the gauges show it."""

    serving: bool = False
    waiting: int = 0
    running: int = 0
    max_batch: int = 0  # the cap in force (the local autoscaler moves it)
    kv_cache_usage: float = 0.0
    tokens_per_s: float = 0.0
    engine_max_batch: int = 0  # the engine's own limit
    # The largest batch known to meet the ITL SLO (the local autoscaler's; 0 when off).
    batch_room: int = 0
    # The local autoscaler's last judged window; None before one (or when it is off).
    latency_backpressure: float | None = None
    throughput_backpressure: float | None = None
    backpressure: float | None = None


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else value


class TokenRate:
    """Generated tokens per second over a sliding window (timestamps are monotonic)."""

    def __init__(self, window_s: float = RATE_WINDOW_S, *, since: float = 0.0) -> None:
        self.window_s = window_s
        self.since = since  # when counting began: a young engine divides by its age
        self._samples: deque[tuple[float, int]] = deque()
        self._total = 0

    def add(self, at: float, tokens: int) -> None:
        self._samples.append((at, tokens))
        self._total += tokens

    def rate(self, now: float) -> float:
        while self._samples and self._samples[0][0] < now - self.window_s:
            self._total -= self._samples.popleft()[1]
        span = min(self.window_s, now - self.since)
        return self._total / max(span, 1.0)


class ServingMetrics:
    """All serving series of one worker app, registered in the app's own registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._load: Callable[[], LoadNow] = LoadNow
        self.ttft = Histogram(
            "cascade_worker_time_to_first_token_seconds",
            "From admission to the first generated token.",
            buckets=TTFT_BUCKETS,
            registry=registry,
        )
        self.itl = Histogram(
            "cascade_worker_inter_token_latency_seconds",
            "Time between generated tokens of one request (per token).",
            buckets=ITL_BUCKETS,
            registry=registry,
        )
        self.generated = Counter(
            "cascade_worker_generated_tokens", "Tokens generated.", registry=registry
        )
        self.prompt = Counter(
            "cascade_worker_prompt_tokens", "Prompt tokens of finished requests.", registry=registry
        )
        self.finished = Counter(
            "cascade_worker_requests",
            "Requests finished, by finish reason (stop, length, abort, error).",
            ["finish_reason"],
            registry=registry,
        )
        self.refused = Counter(
            "cascade_worker_requests_refused",
            "Requests refused before running (invalid, rejected, queue_full, not_serving).",
            ["reason"],
            registry=registry,
        )
        gauges: dict[str, tuple[str, Callable[[LoadNow], float]]] = {
            "serving": ("1 while an engine takes requests.", lambda x: float(x.serving)),
            "requests_waiting": ("Requests queued, not yet running.", lambda x: x.waiting),
            "requests_running": ("Requests in the running batch.", lambda x: x.running),
            "max_batch": ("Upper bound on the running batch, in force now.", lambda x: x.max_batch),
            "engine_max_batch": (
                "The engine's own batch limit: the local autoscaler's cap stays under it.",
                lambda x: x.engine_max_batch,
            ),
            "batch_room": (
                "Local autoscaler: the largest batch known to meet the ITL SLO; the cap "
                "sits lower where a larger batch did not pay in throughput (0 when off).",
                lambda x: x.batch_room,
            ),
            "latency_backpressure": (
                "Local autoscaler: ITL / tightest ITL SLO of the running requests "
                "(last judged window; NaN before one).",
                lambda x: _or_nan(x.latency_backpressure),
            ),
            "throughput_backpressure": (
                "Local autoscaler: throughput under the previous cap / under this one "
                "(last judged window; NaN when not comparable).",
                lambda x: _or_nan(x.throughput_backpressure),
            ),
            "backpressure": (
                "Local autoscaler: max of latency and throughput backpressure; >= 1 halves "
                "the cap (last judged window; NaN before one).",
                lambda x: _or_nan(x.backpressure),
            ),
            "kv_cache_usage_ratio": ("Fraction of KV cache in use.", lambda x: x.kv_cache_usage),
            "tokens_per_second": (
                f"Generated tokens per second over the last {RATE_WINDOW_S:g}s.",
                lambda x: x.tokens_per_s,
            ),
        }
        for name, (doc, pick) in gauges.items():
            gauge = Gauge(f"cascade_worker_{name}", doc, registry=registry)
            gauge.set_function(self._reader(pick))

    def _reader(self, pick: Callable[[LoadNow], float]) -> Callable[[], float]:
        return lambda: pick(self._load())

    def read_load_from(self, source: Callable[[], LoadNow]) -> None:
        """Where the gauges read from at scrape time (the worker's current engine)."""
        self._load = source
