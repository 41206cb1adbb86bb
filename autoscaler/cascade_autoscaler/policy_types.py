"""What the composed global policy (`policy.decide`) reads, keeps and answers.

Frozen values only: the operator builds an `AutoscaleContext` from the ModelDeployment,
its pods and the gateway's and workers' reports, keeps the `AutoscaleState` between
ticks (in memory, like the HPA controller: lost on restart, which only makes the next
ticks more cautious), and acts on the `Recommendation`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NamedTuple

from cascade_api.scaling import AutoscalerOwner, ScalingBehavior
from cascade_autoscaler.batch_queue import BatchQueueConfig, BatchQueueContext
from cascade_autoscaler.behavior import BehaviorState
from cascade_autoscaler.cause import Cause

if TYPE_CHECKING:
    from cascade_api.modeldeployment import ModelDeploymentSpec

Owner = Literal["cascade", "external"]


@dataclass(frozen=True)
class AutoscaleSpec:
    """The ModelDeployment's scaling facts; change only when a user edits the spec."""

    min_replicas: int  # 0 allows scale to zero after the keep-alive
    max_replicas: int
    behavior: ScalingBehavior = field(default_factory=ScalingBehavior)  # HPA v2 rules
    theta: float | Literal["auto"] = 0.7  # IBP target; auto: from burstiness and cold start
    delta: float = 0.1  # half-width of the IBP dead band
    batch: BatchQueueConfig | None = None  # Algorithm 2 tunables; None: up to max_replicas
    keep_alive_s: float = 300.0  # idle time before scale to zero (minReplicas 0 only)
    owner: Owner = "cascade"  # external: an HPA/KEDA/kubectl owns spec.replicas, never write

    def __post_init__(self) -> None:
        if not 0 <= self.min_replicas <= self.max_replicas or self.max_replicas < 1:
            raise ValueError(f"need 0 <= min <= max and max >= 1, got {self}")
        if self.keep_alive_s < 0:
            raise ValueError("keep_alive_s must be >= 0")

    @classmethod
    def of(cls, spec: ModelDeploymentSpec) -> AutoscaleSpec:
        """The policy's view of `spec.scaling`, the one mapping the operator and the
        simulator share: bounds, owner, Θ/δ (unset Θ = auto), keep-alive, behavior."""
        sc = spec.scaling
        ibp = sc.interactive_backpressure
        return cls(
            min_replicas=sc.min_replicas,
            max_replicas=max(1, sc.upper),
            behavior=sc.behavior,
            theta=ibp.target if ibp.target is not None else "auto",
            delta=ibp.tolerance,
            keep_alive_s=float(sc.keep_alive_seconds),
            owner="external" if sc.owner == AutoscalerOwner.EXTERNAL else "cascade",
        )

    @property
    def batch_config(self) -> BatchQueueConfig:
        return self.batch or BatchQueueConfig(max_instances=self.max_replicas)


@dataclass(frozen=True)
class Fleet:
    """The instances now, by role; counts include instances still starting."""

    replicas: int  # spec.replicas: what behavior's rate and bounds start from
    interactive: int
    mixed: int
    batch: int
    starting: int = 0  # of those, not ready yet (reported, never ordered twice: IBP counts them)

    def __post_init__(self) -> None:
        if min(self.replicas, self.interactive, self.mixed, self.batch, self.starting) < 0:
            raise ValueError(f"counts must be >= 0, got {self}")


@dataclass(frozen=True)
class Load:
    """The interactive observation (IBP's B) and what keep-alive needs to see requests."""

    busy: float  # IBP's B: interactive occupancy in instances (interactive.occupancy)
    queued: int = 0  # interactive requests the gateway holds for lack of room (or at zero)
    in_flight: int = 0  # requests of any class being served: batch on mixed counts here
    last_arrival_s: float | None = None  # the gateway's latest arrival of any class


@dataclass(frozen=True)
class Arrivals:
    """Inputs of auto Θ: how bursty arrivals are and how long a new instance takes."""

    counts: tuple[float, ...] = ()  # interactive arrivals per interval, oldest first
    interval_s: float = 10.0
    time_to_ready_s: float = 60.0  # measured: scale order to a serving instance


@dataclass(frozen=True)
class AutoscaleContext:
    """One tick's observations, `now` inside so a tick can be replayed."""

    now: float
    spec: AutoscaleSpec
    fleet: Fleet
    load: Load
    batch: BatchQueueContext  # its batch_instances and now_s must match fleet and now
    arrivals: Arrivals = field(default_factory=Arrivals)

    def __post_init__(self) -> None:
        if self.batch.batch_instances != self.fleet.batch or self.batch.now_s != self.now:
            raise ValueError("batch context must carry the fleet's batch count and now")


@dataclass(frozen=True)
class AutoscaleState:
    """Kept by the caller between ticks; start from `AutoscaleState()`."""

    behavior: BehaviorState = field(default_factory=BehaviorState)
    last_request_s: float | None = None  # last tick or arrival with any request (keep-alive)
    theta: float | None = None  # auto Θ in use; moves only by THETA_STEP or more


class Roles(NamedTuple):
    """How the final count splits; the operator labels pods with these roles."""

    interactive: int
    mixed: int
    batch: int

    @property
    def total(self) -> int:
        return self.interactive + self.mixed + self.batch


class Condition(NamedTuple):
    """One HPA-style condition: status and a CamelCase reason."""

    status: bool
    reason: str


@dataclass(frozen=True)
class Recommendation:
    """What to do now and why; `reason` is one line for status and events."""

    replicas: int  # spec.replicas wanted now, after behavior, bounds and keep-alive
    roles: Roles  # split of `replicas` (sums to it)
    write: bool  # write spec.replicas now: Cascade owns it and it differs from the current
    reason: str
    able_to_scale: Condition  # ReadyForNewScale or what a stabilization window held
    scaling_active: Condition  # False only for ScalingDisabled (at 0 with minReplicas > 0)
    scaling_limited: Condition  # rate policies, bounds or scale from zero moved the count
    theta: float  # Θ used this tick (the configured one or auto)
    details: tuple[str, ...] = ()  # each step's full reason, for events and debugging
    cause: Cause = Cause.STEADY  # `reason` as one value of a closed set (metric labels)
    ibp: float | None = None  # interactive backpressure now; None with no instances
    bbp: int = 0  # batch backpressure now: request groups expected to miss at the current count
