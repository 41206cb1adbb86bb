"""The gateway's Prometheus series and the recent-latency windows behind ``/v1/load``.

Latencies are observed at the gateway, so they are what clients see: time to first
token includes queueing and retries; inter-token latency is the gap between token
chunks divided by the tokens they carry. Queue depth, in-flight and ready backends are
read from the scheduler and the pool at scrape time (callback gauges), so they cannot
drift from the truth. Labels stay low-cardinality: endpoint, HTTP code, request class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from cascade_gateway.config import GatewayConfig
from cascade_gateway.loadreport import RecentWindow
from cascade_protocol.generate import RequestClass

TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
MIGRATION_REASONS = ("drain", "failure", "stall")
WAIT_BUCKETS = (0.001, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


@dataclass
class GatewayMetrics:
    requests: Counter
    ttft: Histogram
    itl: Histogram
    queue_wait: Histogram
    generated_tokens: Counter
    prompt_tokens: Counter
    backend_failures: Counter
    migrations: Counter
    backend_stalls: Counter
    queue_depth: Gauge
    in_flight: Gauge
    backends_ready: Gauge
    slo_met: Counter  # TTFT within the class's SLO: attainment = its rate / ttft's count rate
    ttft_slo_s: dict[RequestClass, float] = field(default_factory=dict)
    # Last minute of samples per class, for /v1/load percentiles.
    recent_ttft: dict[RequestClass, RecentWindow] = field(
        default_factory=lambda: {c: RecentWindow() for c in RequestClass}
    )
    recent_wait: dict[RequestClass, RecentWindow] = field(
        default_factory=lambda: {c: RecentWindow() for c in RequestClass}
    )

    def __post_init__(self) -> None:
        # Series exist from the start (at zero), so dashboards and rate() see every class.
        for cls in RequestClass:
            for family in (
                self.ttft, self.itl, self.queue_wait, self.generated_tokens, self.prompt_tokens,
                self.slo_met,
            ):  # fmt: skip
                family.labels(cls.value)
        for reason in MIGRATION_REASONS:
            self.migrations.labels(reason)

    def bind(
        self,
        depth: Callable[[RequestClass], int],
        in_flight: Callable[[RequestClass], int],
        ready: Callable[[], int],
    ) -> None:
        """Read the live gauges from the scheduler and the pool at scrape time."""
        for cls in RequestClass:
            self.queue_depth.labels(cls.value).set_function(partial(depth, cls))
            self.in_flight.labels(cls.value).set_function(partial(in_flight, cls))
        self.backends_ready.set_function(ready)

    def observe_ttft(self, cls: RequestClass, now: float, seconds: float) -> None:
        self.ttft.labels(cls.value).observe(seconds)
        if cls in self.ttft_slo_s and seconds <= self.ttft_slo_s[cls]:
            self.slo_met.labels(cls.value).inc()
        self.recent_ttft[cls].add(now, seconds)

    def observe_wait(self, cls: RequestClass, now: float, seconds: float) -> None:
        self.queue_wait.labels(cls.value).observe(seconds)
        self.recent_wait[cls].add(now, seconds)


def register_metrics(registry: CollectorRegistry, config: GatewayConfig) -> GatewayMetrics:
    info = Info(
        "cascade_gateway", "Which model and deployment this gateway serves.", registry=registry
    )
    info.info({"model": config.model_name, "deployment": config.deployment})
    up = Gauge("cascade_gateway_up", "1 while the gateway process is serving.", registry=registry)
    up.set(1)
    cls = ["class"]
    return GatewayMetrics(
        requests=Counter(
            "cascade_gateway_requests",
            "OpenAI API requests by endpoint, HTTP status code and request class.",
            ["endpoint", "code", "class"],
            registry=registry,
        ),
        ttft=Histogram(
            "cascade_gateway_time_to_first_token_seconds",
            "Request arrival to first generated token, queueing and retries included.",
            cls,
            buckets=TTFT_BUCKETS,
            registry=registry,
        ),
        itl=Histogram(
            "cascade_gateway_inter_token_latency_seconds",
            "Gap between token chunks from a backend, per token.",
            cls,
            buckets=ITL_BUCKETS,
            registry=registry,
        ),
        queue_wait=Histogram(
            "cascade_gateway_queue_wait_seconds",
            "Request arrival to dispatch to a backend.",
            cls,
            buckets=WAIT_BUCKETS,
            registry=registry,
        ),
        generated_tokens=Counter(
            "cascade_gateway_generated_tokens",
            "Tokens generated for clients.",
            cls,
            registry=registry,
        ),
        prompt_tokens=Counter(
            "cascade_gateway_prompt_tokens",
            "Prompt tokens of served requests.",
            cls,
            registry=registry,
        ),
        backend_failures=Counter(
            "cascade_gateway_backend_failures",
            "Backend failures of a request; `retried` says whether another backend took it.",
            ["retried"],
            registry=registry,
        ),
        migrations=Counter(
            "cascade_gateway_migrations",
            "Requests moved to another backend mid-generation and resumed there; `reason`: "
            "drain (the worker handed it back), failure (its stream broke after tokens) or "
            "stall (its backend made no progress for the stall bound).",
            ["reason"],
            registry=registry,
        ),
        backend_stalls=Counter(
            "cascade_gateway_backend_stalls",
            "Times a backend made no progress on any of its streams for the stall bound while "
            "others were healthy: its streams were moved and it was skipped.",
            registry=registry,
        ),
        queue_depth=Gauge(
            "cascade_gateway_queue_depth",
            "Requests waiting for a backend.",
            cls,
            registry=registry,
        ),
        in_flight=Gauge(
            "cascade_gateway_in_flight",
            "Requests dispatched and not finished.",
            cls,
            registry=registry,
        ),
        backends_ready=Gauge(
            "cascade_gateway_backends_ready",
            "Backends that are ready, not draining and not cooling down.",
            registry=registry,
        ),
        slo_met=Counter(
            "cascade_gateway_ttft_slo_met",
            "Requests whose time to first token met their class's SLO (spec.slo).",
            cls,
            registry=registry,
        ),
        ttft_slo_s={c: config.ttft_slo_s(c) for c in RequestClass},
    )
