"""The flow model's per-hop start cost, fitted to what plans measured.

The flow model (flow.py) adds `hop_latency_s` once per chain hop up to a target (hop j
of a chain: j+1 times) and once per binomial step, so a plan's predicted completion is
`p0 + n·h`: `p0` its prediction without start costs and `n` the start costs its slowest
target pays (`slowest_hops`). A plan made with `h` that measured `m` implies a cost of
`(m - p0) / n` per hop.

Plans of different sizes disagree on that: a large model's residual is mostly the
fabric's rate (a few % of goodput lost to headers), not start costs, and would inflate
`h` for every small plan. The acceptance is relative (measured within 15 % of
predicted), so the fit minimises relative error: each plan's implied cost is weighted
by `(n/m)²`, the weight least squares on `(m - p0 - n·h)/m` gives it. Small plans, where
start costs are a large share, decide `h`; large ones barely move it. Bounded to
`[0, MAX_HOP_LATENCY_S]`. Only network receivers count (NVLink peers are predicted
apart), and chains and binomial plans are fitted apart (`HopSample.strategy`). Pure:
the bench fits runs with it (`fit`), the operator learns online with the same weights
(cascade_operator.weights.calibration).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from cascade_api.scaleplan import PlanStrategy, ScalePlanSpec, ScalePlanStatus

MAX_HOP_LATENCY_S = 0.25  # a start cost beyond this is a fault, not a calibration
NIC_CEILING_BPS = 100e9  # 800 Gbit/s: a receiver predicted faster is on NVLink


@dataclass(frozen=True)
class HopSample:
    """One completed plan as the fit sees it."""

    measured_s: float  # status.measuredCompletionSeconds
    predicted_s: float  # spec.predictedCompletionSeconds
    hops: int  # start costs its slowest target's prediction includes
    hop_latency_s: float = 0.0  # the per-hop cost that prediction was made with
    strategy: str = PlanStrategy.CHAIN.value  # chain hops and binomial steps fit apart

    @property
    def usable(self) -> bool:
        return self.hops > 0 and self.measured_s > 0 and self.predicted_s >= 0

    @property
    def implied_s(self) -> float:
        """The per-hop cost that would have predicted this plan exactly, bounded."""
        base = self.predicted_s - self.hops * self.hop_latency_s
        return bound((self.measured_s - base) / self.hops)

    @property
    def weight(self) -> float:
        """(n/m)²: how much a plan's relative error depends on the per-hop cost."""
        return (self.hops / self.measured_s) ** 2


def bound(seconds: float) -> float:
    return min(MAX_HOP_LATENCY_S, max(0.0, seconds))


def fit(samples: Iterable[HopSample]) -> float | None:
    """The per-hop cost that minimises the plans' squared relative error (None: no plan
    has a hop to charge)."""
    used = [s for s in samples if s.usable]
    total = sum(s.weight for s in used)
    if total <= 0:
        return None
    return bound(sum(s.weight * s.implied_s for s in used) / total)


def sample(spec: ScalePlanSpec, status: ScalePlanStatus) -> HopSample | None:
    """A finished plan's sample over its network receivers (None: none, or one not
    measured). NVLink peers are left out: their own path is predicted apart (on the dev
    cluster it is loopback TCP, far slower than the NVLink it stands for)."""
    peers = nvlink_peers(spec)
    predicted = {p.pod: p.complete_seconds for p in spec.predictions if p.pod not in peers}
    measured = [t.transfer_seconds for t in status.targets if t.pod in predicted]
    if not predicted or len(measured) != len(predicted) or None in measured:
        return None
    return HopSample(
        measured_s=max(m for m in measured if m is not None),
        predicted_s=max(predicted.values()),
        hops=slowest_hops(spec, peers),
        hop_latency_s=spec.hop_latency_seconds,
        strategy=str(spec.strategy),
    )


def nvlink_peers(spec: ScalePlanSpec) -> set[str]:
    """Targets predicted over NVLink: flagged so (chains), or predicted to get the model,
    start costs aside, faster than any NIC could carry it (binomial predictions carry no
    flag)."""
    hops = _chain_hops(spec) if spec.strategy == PlanStrategy.CHAIN else _step_hops(spec)
    floor = sum(b.bytes for b in spec.blocks) / NIC_CEILING_BPS
    return {
        p.pod
        for p in spec.predictions
        if p.nvlink or p.complete_seconds - hops.get(p.pod, 0) * spec.hop_latency_seconds < floor
    }


def slowest_hops(spec: ScalePlanSpec, skip: Collection[str] = ()) -> int:
    """Start costs in the prediction of the target predicted to complete last (ties: the
    most; `skip`: targets left out): its chain position + 1, or the binomial steps up to
    its last receive."""
    hops = _chain_hops(spec) if spec.strategy == PlanStrategy.CHAIN else _step_hops(spec)
    hops = {pod: n for pod, n in hops.items() if pod not in skip}
    if not hops:
        return 0
    times = {p.pod: p.complete_seconds for p in spec.predictions if p.pod in hops}
    if not times:
        return max(hops.values())
    last = max(times.values())
    return max(hops[pod] for pod, t in times.items() if t == last)


def _chain_hops(spec: ScalePlanSpec) -> dict[str, int]:
    hops: dict[str, int] = {}
    for chain in spec.chains:
        for j, pod in enumerate(chain.hops):
            hops[pod] = max(hops.get(pod, 0), j + 1)
    return hops


def _step_hops(spec: ScalePlanSpec) -> dict[str, int]:
    """Each receiver's count of non-empty steps up to its last receive (an empty step
    adds no start cost in the model)."""
    hops: dict[str, int] = {}
    n = 0
    for step in spec.schedule:
        if not step.transfers:
            continue
        n += 1
        for t in step.transfers:
            hops[t.receiver] = n
    return hops
