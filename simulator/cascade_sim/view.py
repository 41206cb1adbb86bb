"""What a global policy sees each tick, and the Cascade policy's context built from it.

`View` is the simulated cluster as the operator would observe it through the gateway's
load report and the pods: instances by role and readiness, the queues, what is in
flight, arrivals, output lengths. `context` turns it into `AutoscaleContext` the way
cascade_operator.autoscale.observe does, with its decisions where a report is silent:

- IBP's B: `interactive.occupancy` of the instances that are not batch-role (their
  interactive in flight over their latency room) and the gateway's interactive queue;
- Algorithm 2's instance throughput: the highest decode tokens/s any instance has
  reported so far (100 before any report); mixed spare capacity counts 0;
- output lengths: mean and deviation of recently finished requests; before any finished,
  each queued request is assumed to use its whole max_tokens;
- the batch queue: the oldest 2048 (the gateway's report is capped there).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from cascade_autoscaler.batch_queue import BatchQueueContext, QueuedBatchRequest
from cascade_autoscaler.interactive import occupancy
from cascade_autoscaler.policy_types import Arrivals, AutoscaleContext, AutoscaleSpec, Fleet, Load

DEFAULT_INSTANCE_TOKENS_PER_S = 100.0  # as the operator, before any instance reported


@dataclass(frozen=True)
class InstanceView:
    role: str  # interactive | mixed | batch
    ready: bool
    inflight: int  # requests the gateway sent there, not finished (any class)
    interactive: int  # of those, interactive
    cap: int = 1  # the local autoscaler's batch cap now
    room: int = 0  # its latency room (cascade_autoscaler.latency_room; 0: the cap)


@dataclass(frozen=True)
class View:
    now: float
    replicas: int  # spec.replicas: instances ordered and not removed
    instances: tuple[InstanceView, ...]  # those instances (starting ones included)
    draining_inflight: int  # requests still finishing on removed instances
    queued_interactive: int
    queued_batch: int
    batch_queue: tuple[QueuedBatchRequest, ...]  # the oldest MAX_REPORTED_BATCH, oldest first
    last_arrival_s: float | None
    arrivals: tuple[float, ...]  # interactive arrivals per interval, oldest first
    arrival_interval_s: float
    time_to_ready_s: float
    output_mean: float | None  # of recently finished requests; None: none finished yet
    output_std: float
    peak_tokens_per_s: float | None  # highest decode tokens/s an instance reported
    engine_max_batch: int = 1  # engine.maxBatchSize: sizes the queue before any cap report

    @property
    def ready(self) -> int:
        return sum(1 for i in self.instances if i.ready)

    @property
    def inflight(self) -> int:
        return sum(i.inflight for i in self.instances) + self.draining_inflight

    @property
    def concurrency(self) -> int:
        """Requests in the system: in flight anywhere plus queued (the KPA's metric)."""
        return self.inflight + self.queued_interactive + self.queued_batch


def context(v: View, spec: AutoscaleSpec) -> AutoscaleContext:
    """The Cascade policy's `AutoscaleContext` for this tick."""
    by_role = Counter(i.role for i in v.instances)
    fleet = Fleet(
        replicas=v.replicas,
        interactive=by_role["interactive"],
        mixed=by_role["mixed"],
        batch=by_role["batch"],
        starting=sum(1 for i in v.instances if not i.ready),
    )
    serving = [i for i in v.instances if i.role != "batch" and i.ready]
    load = Load(
        busy=occupancy(
            ((i.interactive, max(i.cap, i.room)) for i in serving),
            v.queued_interactive,
            v.engine_max_batch,
        ),
        queued=v.queued_interactive,
        in_flight=v.inflight,
        last_arrival_s=v.last_arrival_s,
    )
    if v.output_mean is None:
        mean, std = float(max((q.max_tokens for q in v.batch_queue), default=0)), 0.0
    else:
        mean, std = v.output_mean, v.output_std
    batch = BatchQueueContext(
        now_s=v.now,
        queue=v.batch_queue,
        instance_tokens_per_s=v.peak_tokens_per_s or DEFAULT_INSTANCE_TOKENS_PER_S,
        batch_instances=fleet.batch,
        batch_running=sum(i.inflight for i in v.instances if i.role == "batch"),
        output_mean_tokens=mean,
        output_std_tokens=std,
    )
    arrivals = Arrivals(v.arrivals, v.arrival_interval_s, v.time_to_ready_s)
    return AutoscaleContext(v.now, spec, fleet, load, batch, arrivals)
