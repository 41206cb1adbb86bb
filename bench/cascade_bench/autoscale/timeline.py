"""What the sampler saw each second, and what the bill and the scaling log come from.

The bench lists the run's worker pods and reads its `spec.replicas` once a second. A
`Sample` is one such reading, with time in seconds since the replay started (the same
clock as the replay's records). From the samples:

- instance-seconds: pods that *exist* (starting, ready, or terminating: they hold their
  node until gone) integrated over the replay, from its start to its last request's
  end, each sample's count held until the next sample (left rectangles), as a bill
  counts a node from the moment it is taken; the simulator integrates the same span;
- scaling events: the times `spec.replicas` changed, from what to what (whoever wrote
  it: the operator for Cascade, the bench for the KPA baseline);
- time to ready: per pod created during the replay, creation to its first Ready sample
  (for the simulator's `--time-to-ready`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cascade_protocol.gateway_load import ClassLoad, GatewayLoad
from cascade_protocol.stats import percentile


@dataclass(frozen=True)
class Sample:
    t: float  # seconds since the replay started
    replicas: int  # the ModelDeployment's spec.replicas
    pods: int  # worker pods that exist (any phase, terminating included)
    ready: int  # of those, Ready and not terminating
    starting: int = 0  # not Ready, not terminating
    terminating: int = 0  # deletionTimestamp set, still there
    ready_pods: tuple[str, ...] = field(default=(), compare=False)  # names, for time to ready
    # The gateway's view at the same second (`serving_view`), None when it did not answer.
    serving: dict[str, Any] | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "t": round(self.t, 3),
            "replicas": self.replicas,
            "pods": self.pods,
            "ready": self.ready,
            "starting": self.starting,
            "terminating": self.terminating,
        }
        if self.serving is not None:
            doc.update(self.serving)
        return doc


def serving_view(load: GatewayLoad) -> dict[str, Any]:
    """What the gateway queues and what each backend runs: the columns the simulator's
    timeline has (queues, in flight, mean cap), plus per backend [max_batch, running,
    waiting, in_flight] of the routable ones, to compare a burst second by second."""
    live = [b for b in load.backends if b.ready]
    caps = [b.max_batch for b in live]
    return {
        "queued_interactive": _cls(load, "interactive").queued,
        "queued_batch": _cls(load, "batch").queued,
        "in_flight": sum(c.in_flight for c in load.classes.values()),
        "mean_cap": round(sum(caps) / len(caps), 1) if caps else 0,
        "backends": [[b.max_batch, b.running, b.waiting, b.in_flight] for b in live],
    }


def _cls(load: GatewayLoad, name: str) -> ClassLoad:
    return load.classes.get(name) or ClassLoad(queued=0, in_flight=0, queue_limit=0)


def instance_seconds(samples: Sequence[Sample], start: float, end: float) -> float:
    """Pods integrated over [start, end]; each sample holds until the next one, the
    first one also back to `start` (the pods at the replay's start existed before)."""
    if end <= start or not samples:
        return 0.0
    ordered = sorted(samples, key=lambda s: s.t)
    total = 0.0
    for i, s in enumerate(ordered):
        lo = start if i == 0 else max(start, s.t)
        hi = min(end, ordered[i + 1].t) if i + 1 < len(ordered) else end
        if hi > lo:
            total += s.pods * (hi - lo)
    return total


def mean_and_peak(samples: Sequence[Sample], start: float, end: float) -> tuple[float, int]:
    """Mean pods over [start, end] and the most pods any sample in it saw."""
    span = end - start
    inside = [s.pods for s in samples if start <= s.t <= end]
    mean = instance_seconds(samples, start, end) / span if span > 0 else 0.0
    return mean, max(inside, default=0)


def scaling_events(samples: Sequence[Sample]) -> list[dict[str, Any]]:
    """Each change of spec.replicas between successive samples: {t, from, to}."""
    events: list[dict[str, Any]] = []
    ordered = sorted(samples, key=lambda s: s.t)
    for prev, cur in itertools.pairwise(ordered):
        if cur.replicas != prev.replicas:
            events.append({"t": round(cur.t, 3), "from": prev.replicas, "to": cur.replicas})
    return events


def times_to_ready(created: dict[str, float], samples: Sequence[Sample]) -> list[float]:
    """Creation to first Ready sample, for pods created at or after t = 0 (scale-ups in
    the run; the initial pods were made before the replay and waited for)."""
    first_ready: dict[str, float] = {}
    for s in sorted(samples, key=lambda s: s.t):
        for name in s.ready_pods:
            first_ready.setdefault(name, s.t)
    return sorted(
        first_ready[name] - t0
        for name, t0 in created.items()
        if t0 >= 0 and name in first_ready and first_ready[name] >= t0
    )


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 50)
