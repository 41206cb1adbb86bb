"""Targets that answer while a plan runs: a follow-up plan now, or wait for it to end.

Plans start as soon as a target can receive, so later pods of the same scale-up find a
plan running that does not name them (a running plan is not joined mid-flight: its
chains and steps are fixed once the workers have them). Two ways to serve them, and
the planner's flow model predicts both (its `predictedCompletionSeconds`):

- **now**: a follow-up plan from the sources the running plans do not use (holders
  ready now: host copies, idle or serving instances, targets that completed and ended
  their transfer), predicted `follow_s`. Sources and targets alike are only pods on
  nodes whose NIC no running plan uses (`busy_nodes`); the others wait. A pod beside a
  running plan's sender or receiver shares that node's NIC, and each plan is predicted
  alone: on the dev cluster two 6.6 MiB plans from one node's pods, or into one node's
  pods, each measured 1.6x their predictions, and a flow into a node that sent for
  another plan 1.15-1.20x (its ACKs queued behind the other's data);
- **wait**: the running plans end (`remaining_s`: the slowest one's predicted seconds
  less its time so far, at least 0), the end is noticed (`notice_s`), then one plan from
  every holder then (today's sources plus every participant of the running plans),
  predicted `later_s`.

Follow up now when `follow_s <= remaining_s + notice_s + later_s` (a tie starts now:
the targets are no later, and they start receiving at once). With no free source a
follow-up is impossible and the targets wait; when no plan can be made from the
holders then either, the follow-up's own answer decides. The choice is made again
every tick: as the running plan proceeds waiting grows cheaper. Pure: the planner is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from cascade_api.scaleplan import ScalePlanSpec, Source, SourceTier
from cascade_operator.weights.plans import PlanView
from cascade_operator.weights.pool import PoolDecision
from cascade_operator.weights.workers import WorkerView


@dataclass(frozen=True)
class Choice:
    now: bool  # make the follow-up plan now
    follow_s: float | None  # predicted seconds of a follow-up now (None: none can be made)
    wait_s: float | None  # predicted seconds until they hold the model if they wait

    def why(self) -> str:
        """For the Planned condition: stable wording (no numbers, so no status churn)."""
        if self.follow_s is None:
            return "no free source for a follow-up plan"
        if self.now:
            return "a follow-up plan now is predicted no later than waiting"
        return "waiting for it is predicted faster than a follow-up plan now"


def remaining_s(view: PlanView, now: datetime) -> float:
    """Predicted seconds until `view` ends: its prediction less its time so far (a
    plan not dispatched yet has all of it ahead)."""
    predicted = view.spec.predicted_completion_seconds or 0.0
    if view.status.start_time is None:
        return predicted
    return max(0.0, predicted - (now - view.status.start_time).total_seconds())


def busy_nodes(
    pool: PoolDecision, active: Sequence[PlanView], workers: Sequence[WorkerView]
) -> set[str]:
    """Nodes whose NIC an active plan uses, either way: its sources' and its targets'
    still in the transfer (chain hops forward; binomial targets send). A target that
    completed and ended its transfer is a source again (in the pool)."""
    node = _nodes(workers)
    ready = {s.pod for s in pool.sources}
    pods = {s.pod for v in active for s in v.spec.sources}
    pods |= {t for v in active for t in v.spec.targets if t not in ready}
    return {node[p] for p in pods if p in node}


def free_sources(
    pool: PoolDecision, active: Sequence[PlanView], workers: Sequence[WorkerView]
) -> list[Source]:
    """The pool's sources that no active plan sends from (a plan not dispatched yet has
    its sources still ready, but they are spoken for), on nodes no active plan uses."""
    node, busy = _nodes(workers), busy_nodes(pool, active, workers)
    taken = {s.pod for v in active for s in v.spec.sources}
    return [s for s in pool.sources if s.pod not in taken and node.get(s.pod) not in busy]


def free_targets(
    pods: Sequence[str],
    pool: PoolDecision,
    active: Sequence[PlanView],
    workers: Sequence[WorkerView],
) -> list[str]:
    """The `pods` a follow-up may send to now: those on nodes no active plan uses."""
    node, busy = _nodes(workers), busy_nodes(pool, active, workers)
    return [p for p in pods if node.get(p) not in busy]


def _nodes(workers: Sequence[WorkerView]) -> dict[str, str]:
    return {w.name: w.node for w in workers if w.node is not None}


def sources_after(
    pool: PoolDecision, active: Sequence[PlanView], workers: Sequence[WorkerView]
) -> list[Source]:
    """Every holder once the active plans end: today's sources, their sources, then
    their targets (host tier for a host copy), preferred first, each once."""
    hosts = {w.name for w in workers if w.host_copy}
    found = list(pool.sources)
    found += [s for v in active for s in v.spec.sources]
    found += [
        Source(pod=t, tier=SourceTier.HOST if t in hosts else SourceTier.GPU)
        for v in active
        for t in v.spec.targets
    ]
    first: dict[str, Source] = {}
    for s in found:
        first.setdefault(s.pod, s)
    return list(first.values())


def choose(
    follow: ScalePlanSpec | None,
    later: ScalePlanSpec | None,
    remaining: float,
    notice_s: float,
) -> Choice:
    """The rule of the module docstring, from the two candidate plans (None: the planner
    could make none) and the running plans' remaining seconds."""
    follow_s = _seconds(follow)
    later_s = _seconds(later)
    wait_s = remaining + notice_s + later_s if later_s is not None else None
    if follow_s is None:
        return Choice(False, None, wait_s)
    return Choice(wait_s is None or follow_s <= wait_s, follow_s, wait_s)


def pool_of(pool: PoolDecision, sources: list[Source]) -> PoolDecision:
    """`pool` with these sources (what the planner is asked to send from)."""
    return replace(pool, sources=sources)


def _seconds(spec: ScalePlanSpec | None) -> float | None:
    if spec is None:
        return None
    return spec.predicted_completion_seconds or 0.0
