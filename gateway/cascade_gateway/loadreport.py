"""Statistics behind the gateway's load report (``GET /v1/load``), for the autoscaler.

The report's shape is :class:`cascade_protocol.gateway_load.GatewayLoad`, shared with
the operator. Chiron-style global control needs, per request class, how much is waiting
and how fast it is being served: queue depth and in-flight counts (now), time to first
token and queue wait over the last minute (p50/p90, and p99 of TTFT, as seen by clients, queueing
included), and the backends' readiness and throughput. Prometheus has the same series
as histograms; this endpoint gives the operator one cheap JSON read without a
Prometheus server. ``RecentWindow`` and ``percentile`` are pure (time is passed in);
the demand figures (arrivals, batch queue, output lengths) are
:mod:`cascade_gateway.demand`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from cascade_protocol.gateway_load import ClassLoad
from cascade_protocol.stats import nearest_rank

WINDOW_S = 60.0
MAX_SAMPLES = 4096


class RecentWindow:
    """Samples of the last ``window`` seconds (at most ``cap`` of them)."""

    def __init__(self, window: float = WINDOW_S, cap: int = MAX_SAMPLES) -> None:
        self.window = window
        self._samples: deque[tuple[float, float]] = deque(maxlen=cap)

    def add(self, now: float, value: float) -> None:
        self._samples.append((now, value))

    def values(self, now: float) -> list[float]:
        while self._samples and self._samples[0][0] < now - self.window:
            self._samples.popleft()
        return [v for _, v in self._samples]


def class_load(
    queued: int, in_flight: int, limit: int, ttft: Sequence[float], waits: Sequence[float]
) -> ClassLoad:
    return ClassLoad(
        queued=queued,
        in_flight=in_flight,
        queue_limit=limit,
        ttft_p50_s=nearest_rank(ttft, 50),
        ttft_p90_s=nearest_rank(ttft, 90),
        ttft_p99_s=nearest_rank(ttft, 99),
        queue_wait_p50_s=nearest_rank(waits, 50),
        queue_wait_p90_s=nearest_rank(waits, 90),
    )
