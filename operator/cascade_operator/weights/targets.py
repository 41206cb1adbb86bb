"""Who a new ScalePlan is for, and the planner call that makes it.

A target is a worker that needs weights (idle, or failed after a transfer), is placed
and reachable, and is not the pod loading the checkpoint from storage. Its repair count
is the highest attempt label of the Failed plans that left it incomplete (plans older
than the pod do not count: a recreated pod with the same name starts afresh). Past
`max_repairs` repairs the pod is replaced instead of planned for again, and so is a pod
still transferring long after the plan that named it ended (a stuck peer).

There is no gather wait: a target is planned for as soon as its worker's control API
answers (it can receive), so the first new pod of a scale-up gets its first bytes about
a second after it listens (acceptance: ScalePlan status.startDelaySeconds). Pods still
starting are only named (`waiting`, for the Planned condition); targets that answer
while a plan runs are not in it (it is not joined mid-flight) and get a follow-up plan
or wait for it to end (followup.py). Participants of an active plan are no targets.
Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_api.scaleplan import Block, PlanPhase, PlanStrategy, ScalePlanSpec
from cascade_operator.weights.calibration import current as start_costs
from cascade_operator.weights.plans import PlanView, by_age
from cascade_operator.weights.pool import PoolDecision
from cascade_operator.weights.progress import PlanPolicy, timeout
from cascade_operator.weights.workers import WorkerView
from cascade_planner import PlanningError, PlanRequest, Topology, plan
from cascade_planner.topology import send_capped
from cascade_protocol.status import WorkerPhase


@dataclass(frozen=True)
class Targets:
    pods: list[str] = field(default_factory=list)  # a new plan's targets, by name
    waiting: list[str] = field(default_factory=list)  # pods starting (not waited for)
    tries: dict[str, int] = field(default_factory=dict)  # pod -> attempts that failed it
    replace: list[str] = field(default_factory=list)  # out of attempts, or stuck


@dataclass(frozen=True)
class Refusal:
    """The planner's PlanningError as data: a condition reason and a message."""

    reason: str
    message: str


def choose_targets(
    workers: Sequence[WorkerView],
    plans: Sequence[PlanView],
    pool: PoolDecision,
    now: datetime,
    policy: PlanPolicy,
) -> Targets:
    by_name = {w.name: w for w in workers}
    tries = failed_attempts(plans, by_name)
    busy = {p for v in plans if v.active for p in participants(v.spec)}
    pods: list[str] = []
    replace: list[str] = []
    for w in sorted(workers, key=lambda w: w.name):
        if w.name in busy:
            continue
        if w.needs_weights and w.node and w.ip and w.name != pool.load_from_storage:
            (replace if tries.get(w.name, 0) > policy.max_repairs else pods).append(w.name)
        elif w.phase == WorkerPhase.TRANSFERRING and _orphaned(w, plans, now, policy):
            replace.append(w.name)
    coming = [w.name for w in workers if w.starting]  # not placed or no address yet
    return Targets(pods, sorted(coming), tries, replace)


def participants(spec: ScalePlanSpec) -> list[str]:
    return [s.pod for s in spec.sources] + list(spec.targets)


def failed_attempts(plans: Sequence[PlanView], workers: dict[str, WorkerView]) -> dict[str, int]:
    tries: dict[str, int] = {}
    for view in plans:
        if view.status.phase != PlanPhase.FAILED:
            continue
        done = {t.pod for t in view.status.targets if t.complete}
        for pod in view.spec.targets:
            w = workers.get(pod)
            if pod in done or w is None or _older(view, w):
                continue
            tries[pod] = max(tries.get(pod, 0), view.attempt)
    return tries


def _older(view: PlanView, w: WorkerView) -> bool:
    """The plan predates this pod: it was about an earlier pod of the same name."""
    return view.created is not None and w.created is not None and view.created < w.created


def _orphaned(w: WorkerView, plans: Sequence[PlanView], now: datetime, policy: PlanPolicy) -> bool:
    """Still transferring well after the last plan that named it as a target ended."""
    named = [v for v in by_age(plans) if w.name in v.spec.targets and not _older(v, w)]
    if not named or named[-1].active or named[-1].status.completion_time is None:
        return False
    last = named[-1]
    assert last.status.completion_time is not None
    grace = policy.dispatch_grace_s
    if last.status.phase != PlanPhase.FAILED:
        grace = timeout(last.spec, policy)  # a cancelled transfer may still finish
    return now - last.status.completion_time > timedelta(seconds=grace)


def make_plan(
    deployment: str,
    spec: ModelDeploymentSpec,
    pool: PoolDecision,
    blocks: Sequence[Block],
    targets: Targets,
    workers: Sequence[WorkerView],
    topo: Topology,
) -> ScalePlanSpec | Refusal:
    """The planner's spec for these targets from the pool's sources, or why there is none.
    `multicast.k` bounds the sources of a binomial plan; chains use every usable one."""
    strategy = str(spec.multicast.strategy)
    request = PlanRequest(
        deployment=deployment,
        model_digest=pool.model_digest or "",
        blocks=list(blocks),
        sources=list(pool.sources),
        targets=list(targets.pods),
        pod_node={w.name: w.node for w in workers if w.node},
        strategy=strategy,
        k=spec.multicast.k if strategy == PlanStrategy.BINOMIAL else None,
        source_stages=spec.live_scaling.enabled,
        cooperative=spec.live_scaling.cooperating,
        pipeline_lead_s=spec.live_scaling.min_lead_seconds,
        # Live with several sources: their chains carry the blocks in shifted orders, so
        # receivers hold different layers early and cover the model together (λScale).
        # From one source the chains stay in order: a source closes the pipeline.
        shift=spec.live_scaling.enabled and len(pool.sources) > 1,
        stageless=[w.name for w in workers if w.host_copy and w.name in targets.pods],
        **start_costs(),  # per chain hop and binomial step, learned (calibration.py)
    )
    try:
        return plan(request, send_capped(topo, spec.multicast.rate_mbit))
    except PlanningError as err:
        return Refusal(str(err.reason), err.message)
