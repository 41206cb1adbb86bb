"""One tick's `AutoscaleContext`, from the spec, the worker pods and the gateways' reports.

Pure: the API objects arrive parsed (`PodView`), the gateway reports typed
(`GatewayLoad`), `now` is the operator's monotonic clock, and the gateway's relative
times (ages, time left) are turned into it here. Decisions made where a report is silent:

- **Instance throughput** (Algorithm 2's Θ): the highest tokens/s any backend has
  reported so far (the caller keeps it), an instance's measured capacity under real
  load; before any report, `DEFAULT_INSTANCE_TOKENS_PER_S`.
- **Unknown output lengths** with no finished request yet: each queued request is
  assumed to use its whole `max_tokens` (the cautious end; the CLT model takes over once
  the gateway has samples).
- **Mixed spare capacity** for batch work counts 0: interactive arrivals may claim it
  at any moment, so batch deadlines are planned on batch instances alone.
- **Time to ready**: the median, over pods that became ready, of creation to Ready;
  `DEFAULT_TIME_TO_READY_S` before any did.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from datetime import datetime, timedelta

from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_autoscaler.batch_queue import BatchQueueContext, QueuedBatchRequest
from cascade_autoscaler.interactive import occupancy
from cascade_autoscaler.policy_types import Arrivals, AutoscaleContext, AutoscaleSpec, Fleet, Load
from cascade_operator.observed import PodView
from cascade_protocol.gateway_load import GatewayLoad
from cascade_protocol.generate import RequestClass
from cascade_protocol.roles import InstanceRole

DEFAULT_INSTANCE_TOKENS_PER_S = 100.0
DEFAULT_TIME_TO_READY_S = 60.0


def alive(pods: Sequence[PodView]) -> list[PodView]:
    """Pods that count as instances: not on their way out, not failed."""
    return [p for p in pods if not p.terminating and not p.failed]


# A pod not Ready this long after its creation is stuck (unschedulable, failing to
# start), not starting: it must not hold back scale-down (the policy holds while
# instances start) for ever.
STUCK_AFTER = timedelta(minutes=5)


def fleet(replicas: int, pods: Sequence[PodView], wall: datetime | None = None) -> Fleet:
    """The instances by role; `wall` (the cluster's clock) tells starting from stuck."""
    live = alive(pods)
    by_role = {r: sum(1 for p in live if p.role is r) for r in InstanceRole}

    def starting(p: PodView) -> bool:
        young = wall is None or p.created is None or wall - p.created < STUCK_AFTER
        return not p.ready and young

    return Fleet(
        replicas=replicas,
        interactive=by_role[InstanceRole.INTERACTIVE],
        mixed=by_role[InstanceRole.MIXED],
        batch=by_role[InstanceRole.BATCH],
        starting=sum(1 for p in live if starting(p)),
    )


def load(loads: Sequence[GatewayLoad], now: float, default_cap: int) -> Load:
    """IBP's B (occupancy of interactive + mixed backends over their latency room,
    waiting requests included), the interactive queue, everything in flight, and the
    latest arrival. `default_cap` (engine.maxBatchSize) sizes the queue while no backend
    reports its cap."""
    interactive = RequestClass.INTERACTIVE.value
    queued = sum(g.classes[interactive].queued for g in loads if interactive in g.classes)
    used: dict[str, int] = {}
    caps: dict[str, int] = {}
    for b in (b for g in loads for b in g.backends if b.role is not InstanceRole.BATCH):
        if not b.ready:  # a starting worker reports the engine's placeholder cap (1)
            continue
        key = b.pod or b.url  # several gateways report the same backend: add their shares
        used[key] = used.get(key, 0) + b.interactive_in_flight
        caps[key] = max(b.max_batch, b.batch_room)  # the room a cap lowered for throughput left
    ages = [g.demand.last_arrival_age_s for g in loads if g.demand.last_arrival_age_s is not None]
    return Load(
        busy=occupancy(((used[k], caps[k]) for k in caps), queued, default_cap),
        queued=queued,
        in_flight=sum(c.in_flight for g in loads for c in g.classes.values()),
        last_arrival_s=now - min(ages) if ages else None,
    )


def batch_context(
    loads: Sequence[GatewayLoad], fleet_now: Fleet, now: float, tokens_per_s: float
) -> BatchQueueContext:
    queue = tuple(
        sorted(
            (
                QueuedBatchRequest(
                    now - q.age_s, now + q.deadline_in_s, q.prompt_tokens, q.max_tokens
                )
                for g in loads
                for q in g.demand.batch_queue
            ),
            key=lambda r: r.arrival_s,
        )
    )
    samples = [g.demand for g in loads if g.demand.output_samples > 0]
    if samples:
        total = sum(d.output_samples for d in samples)
        mean = sum(d.output_tokens_mean * d.output_samples for d in samples) / total
        std = max(d.output_tokens_std for d in samples)
    else:
        mean, std = float(max((r.max_tokens for r in queue), default=0)), 0.0
    running = sum(b.in_flight for g in loads for b in g.backends if b.role is InstanceRole.BATCH)
    return BatchQueueContext(
        now_s=now,
        queue=queue,
        instance_tokens_per_s=tokens_per_s,
        batch_instances=fleet_now.batch,
        batch_running=running,
        output_mean_tokens=mean,
        output_std_tokens=std,
    )


def arrivals(loads: Sequence[GatewayLoad], time_to_ready_s: float) -> Arrivals:
    """Interactive arrivals per interval, summed over gateways bucket by bucket."""
    if not loads:
        return Arrivals(time_to_ready_s=time_to_ready_s)
    width = max(len(g.demand.interactive_arrivals) for g in loads)
    counts = [0.0] * width
    for g in loads:
        series = g.demand.interactive_arrivals
        for i, n in enumerate(series, start=width - len(series)):
            counts[i] += n
    return Arrivals(tuple(counts), loads[0].demand.arrival_interval_s, time_to_ready_s)


def in_flight(loads: Sequence[GatewayLoad]) -> dict[str, int]:
    """Requests in flight per worker pod, summed over the gateways that count them."""
    counts: dict[str, int] = {}
    for load in loads:
        for b in load.backends:
            if b.pod:
                counts[b.pod] = counts.get(b.pod, 0) + b.in_flight
    return counts


def peak_tokens_per_s(loads: Sequence[GatewayLoad], previous: float | None) -> float:
    """The highest per-instance throughput seen so far (Algorithm 2's Θ)."""
    seen = [b.tokens_per_s for g in loads for b in g.backends]
    best = max([*seen, previous or 0.0])
    return best if best > 0 else DEFAULT_INSTANCE_TOKENS_PER_S


def time_to_ready(pods: Sequence[PodView]) -> float:
    """Median seconds from creation to Ready over pods that got there."""
    spans = [
        (p.ready_since - p.created).total_seconds()
        for p in pods
        if p.ready_since is not None and p.created is not None and p.ready_since >= p.created
    ]
    return statistics.median(spans) if spans else DEFAULT_TIME_TO_READY_S


def context(
    now: float,
    spec: ModelDeploymentSpec,
    pods: Sequence[PodView],
    loads: Sequence[GatewayLoad],
    tokens_per_s: float,
    wall: datetime | None = None,
) -> AutoscaleContext:
    f = fleet(spec.replicas, pods, wall)
    return AutoscaleContext(
        now=now,
        spec=AutoscaleSpec.of(spec),
        fleet=f,
        load=load(loads, now, spec.engine.max_batch_size),
        batch=batch_context(loads, f, now, tokens_per_s),
        arrivals=arrivals(loads, time_to_ready(pods)),
    )
