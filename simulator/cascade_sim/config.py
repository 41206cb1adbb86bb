"""What a simulation runs: the deployment's facts (from a ModelDeployment) and the model's
knobs (how the gateway, the engines and the clock behave).

The deployment is read exactly as the operator reads it (`AutoscaleSpec.of`, the one
mapping both use): bounds, owner, Θ/δ (unset Θ = auto), keep-alive and
HPA `behavior`; SLOs per class; the engine's max batch and whether its local autoscaler
runs (`engine.adaptiveBatch`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_autoscaler.policy_types import AutoscaleSpec
from cascade_sim.profile import CapacityProfile

INTERACTIVE = "interactive"
BATCH = "batch"
CLASSES = (INTERACTIVE, BATCH)

Routing = Literal["gateway", "pack"]
LocalMode = Literal["auto", "adaptive", "fixed"]


@dataclass(frozen=True)
class Slo:
    """One class's bounds: TTFT, and the request's mean ITL (None: unbounded)."""

    ttft_s: float
    itl_s: float | None


@dataclass(frozen=True)
class Deployment:
    """The ModelDeployment as the simulator needs it."""

    spec: AutoscaleSpec  # what the Cascade policy gets
    replicas: int  # spec.replicas at the start (instances ready at t = 0)
    engine_max_batch: int  # engine.maxBatchSize: the cap's ceiling
    adaptive_batch: bool  # engine.adaptiveBatch: the local autoscaler moves the cap
    prefill_budget: int  # engine.maxPrefillTokensPerStep (chunked prefill)
    slos: Mapping[str, Slo]
    max_replicas: int | None = None  # as written; unset: a fixed count someone else owns

    @property
    def bounded_max(self) -> int:
        """maxReplicas, or spec.replicas when unset (what fixed_max provisions)."""
        return self.max_replicas if self.max_replicas is not None else self.replicas


def from_spec(spec: ModelDeploymentSpec) -> Deployment:
    """The simulator's view of a parsed ModelDeployment spec."""
    slos = {
        INTERACTIVE: Slo(spec.slo.interactive.ttft_ms / 1e3, spec.slo.interactive.itl_ms / 1e3),
        BATCH: Slo(spec.slo.batch.ttft_ms / 1e3, spec.slo.batch.itl_ms / 1e3),
    }
    return Deployment(
        spec=AutoscaleSpec.of(spec),
        replicas=spec.replicas,
        engine_max_batch=spec.engine.max_batch_size,
        adaptive_batch=spec.engine.adaptive_batch,
        slos=slos,
        max_replicas=spec.scaling.max_replicas,
        prefill_budget=spec.engine.max_prefill_tokens_per_step,
    )


@dataclass(frozen=True)
class SimConfig:
    """The model's knobs; defaults follow the gateway's, the worker's and the bench's."""

    time_to_ready_s: float = 20.0  # scale order to a serving instance (plan + engine start)
    tick_s: float = 2.0  # global policy period (the operator's autoscaler tick)
    local_tick_s: float = 0.5  # local autoscaler period (worker --adaptive-batch-tick-seconds)
    local: LocalMode = "auto"  # auto: adaptive for LOCAL_CONTROL policies if adaptiveBatch
    routing: Routing = "gateway"  # gateway: as cascade_gateway.router; pack: oldest first
    slack: int = 2  # gateway --backend-slack: in flight up to cap + slack per instance
    prefill_tokens_per_s: float | None = None  # None: the profile's (measured, else peak)
    interactive_queue: int = 256  # gateway --interactive-queue: more waiting -> 429
    batch_queue: int = 4096  # gateway --batch-queue
    client_timeout_s: float = 600.0  # replay --timeout-s: a request still queued is given up
    drain_s: float = 600.0  # after the last arrival, time left for requests to finish
    arrival_interval_s: float = 10.0  # gateway arrival counts, for auto Θ
    arrival_intervals: int = 30  # how many intervals the gateway reports
    kpa_target: float | None = None  # KPA concurrency per instance; None: 0.7 x max batch
    timeline: bool = True  # sample the fleet and queues every tick

    def prefill_rate(self, profile: CapacityProfile) -> float:
        """Prompt tokens/s of prefill: the override, else the profile's."""
        return self.prefill_tokens_per_s or profile.prefill_tokens_per_s

    def __post_init__(self) -> None:
        if self.time_to_ready_s < 0 or self.tick_s <= 0 or self.local_tick_s <= 0:
            raise ValueError("time-to-ready must be >= 0 and ticks > 0")
        if self.slack < 0:
            raise ValueError("slack must be >= 0")
        if self.prefill_tokens_per_s is not None and self.prefill_tokens_per_s <= 0:
            raise ValueError("prefill tokens/s must be > 0")
