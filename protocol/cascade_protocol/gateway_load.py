"""The gateway's load report (`GET /v1/load` on the gateway), read by the operator.

Chiron's global autoscaler needs what only the gateway sees: per class, how much waits
and how much runs; which instances run interactive requests (IBP's B); what waits in the
batch queue and until when (Algorithm 2's request groups); how bursty interactive
arrivals are (auto Θ); how long outputs turn out (the CLT model of unknown lengths); and
whether requests are held because there is no instance at all (scale from zero).
Times are relative (ages and time-left in seconds), never clock readings: the gateway's
and the operator's clocks are different processes' monotonic clocks.
"""

from __future__ import annotations

from pydantic import Field

from cascade_protocol.generate import Message
from cascade_protocol.roles import InstanceRole

GATEWAY_LOAD_PATH = "/v1/load"
MAX_REPORTED_BATCH = 2048  # queued batch requests listed at most (the oldest first)


class ClassLoad(Message):
    queued: int  # waiting in the gateway for a backend slot
    in_flight: int  # dispatched to a backend, not finished
    queue_limit: int  # more waiting than this are refused with 429
    ttft_p50_s: float | None = None  # time to first token, arrival to first token
    ttft_p90_s: float | None = None
    ttft_p99_s: float | None = None  # the tail an SLO is written against
    queue_wait_p50_s: float | None = None  # arrival to dispatch
    queue_wait_p90_s: float | None = None


class BackendLoad(Message):
    url: str
    pod: str = ""  # the worker pod's name ("" for a static URL)
    role: InstanceRole = InstanceRole.MIXED
    ready: bool  # routable: ready, not draining, not cooling down after a failure
    draining: bool
    in_flight: int  # from this gateway, every class
    interactive_in_flight: int = 0  # of those, interactive: the instance counts in IBP's B
    running: int  # the backend's own last report
    waiting: int
    max_batch: int
    batch_room: int = 0  # the backend's latency room (LoadReport.batch_room; 0: the cap)
    kv_cache_usage: float
    tokens_per_s: float
    error: str = ""


class QueuedBatch(Message):
    """One batch request waiting in the gateway, for Algorithm 2's request groups."""

    age_s: float = Field(ge=0)  # since it arrived (FCFS order)
    deadline_in_s: float  # until its TTFT deadline; negative once missed
    prompt_tokens: int = Field(ge=0)
    max_tokens: int = Field(ge=0)


class Demand(Message):
    """What the global autoscaler reads besides counts: arrivals, queue, output lengths."""

    held: int = 0  # requests waiting because no backend exists or none is ready
    last_arrival_age_s: float | None = None  # since the latest arrival of any class
    arrival_interval_s: float = 10.0
    interactive_arrivals: list[int] = Field(default_factory=list)  # per interval, oldest first
    batch_queue: list[QueuedBatch] = Field(default_factory=list)  # oldest first, capped
    output_tokens_mean: float = 0.0  # of recently finished requests (any class)
    output_tokens_std: float = 0.0
    output_samples: int = 0  # how many finished requests the two figures stand on


class GatewayLoad(Message):
    model: str
    deployment: str
    draining: bool  # this gateway stopped admitting (SIGTERM)
    backends_total: int
    backends_ready: int
    tokens_per_s: float  # sum of the backends' reported generation rates
    classes: dict[str, ClassLoad]
    backends: list[BackendLoad]
    demand: Demand = Field(default_factory=Demand)
