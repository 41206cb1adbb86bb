"""The ScalePlan lifecycle: from one observation of a deployment's workers and plans to
the plans to create, the orders to send, the status to write. Pure, `now` passed in.

One tick, in order (each step a small function below):

1. Active plans: several may run, on disjoint pods (a follow-up beside the plan it
   follows); a younger one that shares a target or a source with an older one is
   cancelled as a Duplicate. Pending: still valid? (targets need weights, sources hold
   them, no new target appeared) → dispatch (a TransferOrder per participant) and mark
   Running; else Cancelled (Superseded) so a new plan covers the new set. Running:
   aggregate the targets' progress (progress.aggregate), decide the phase
   (progress.verdict) and write the status only when the throttle says so
   (progress.should_patch).
2. Orders that do not depend on a plan: serve every worker that holds the whole model
   with its engine off; load from storage when no copy exists (pool.py chose the pod).
   The `Planned` condition says what the lifecycle waits for; its transitions are told
   by the status assembler, like every other condition's.
3. New plans (starts.py): the targets are the workers that can receive now (placed,
   answering, not in an active plan, not out of repair attempts). With no plan active
   they get one at once; with plans running, a follow-up now or a wait, whichever the
   planner predicts faster (followup.py). A new plan is dispatched in the tick that
   makes it (the driver creates it before sending its orders). Targets of Failed plans
   come back here, so a repair is a new plan from the holders left, dead peers excluded,
   with its attempt label one higher; after `max_repairs` repairs a target's pod is
   replaced instead. The planner's PlanningError becomes `Planned=False` with its
   reason, never a crash.
4. Finished plans beyond `history` are deleted, oldest first.

Everything is derived from API objects and worker statuses, so a restarted operator
finds its plan (or re-derives its name) instead of making a second one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_api.scaleplan import PlanPhase, ScalePlanSpec, ScalePlanStatus
from cascade_operator.events import EventNote
from cascade_operator.weights.decision import Manifest, PlanDecision, PlansInput, StatusPatch
from cascade_operator.weights.followup import free_targets
from cascade_operator.weights.orders import LoadOrder, ServeOrder, addressable, transfer_orders
from cascade_operator.weights.plans import PlanView, by_age
from cascade_operator.weights.pool import PoolDecision
from cascade_operator.weights.progress import (
    PlanPolicy,
    aggregate,
    ended,
    shape,
    should_patch,
    verdict,
    with_condition,
)
from cascade_operator.weights.starts import follow_up, start_plan
from cascade_operator.weights.targets import Targets, choose_targets
from cascade_operator.weights.workers import WorkerView
from cascade_protocol.status import WorkerPhase

__all__ = ["Manifest", "PlanDecision", "PlansInput", "StatusPatch", "decide_plans"]


def manifest_source(pool: PoolDecision) -> str | None:
    """The pod whose block table the I/O layer should fetch before deciding (None: no
    source holds the model). The table is immutable per digest, so the caller caches it:
    one call per model, made as soon as a source serves rather than when a scale-up's
    first target answers (where it took 0.17 s of the plan's 1 s start budget)."""
    return pool.sources[0].pod if pool.sources else None


def decide_plans(inp: PlansInput, now: datetime, policy: PlanPolicy | None = None) -> PlanDecision:
    policy = policy or PlanPolicy()
    workers = {w.name: w for w in inp.workers}
    out = PlanDecision()
    targets = choose_targets(inp.workers, inp.plans, inp.pool, now, policy)
    live = [p for p in inp.plans if p.active]
    lent = {s.pod for v in live for s in v.spec.sources}
    active: list[PlanView] = []
    for view in by_age(live):
        older = next((a for a in active if _overlap(a.spec, view.spec)), None)
        if older is not None:
            message = f"{older.name} already covers its pods"
            _finish(out, view, view.status, PlanPhase.CANCELLED, "Duplicate", message, now)
        elif view.status.phase == PlanPhase.PENDING:
            if _pending(out, view, workers, _beside(inp, targets, active), now, policy, inp.spec):
                active.append(view)
        elif _running(out, view, workers, now, policy, lent):
            active.append(view)
    # Plans that ended this tick count as ended for choosing targets (a repair's attempt).
    ended = {p.plan: p.status for p in out.patches}
    plans = [_updated(v, ended.get(v.name)) for v in inp.plans]
    targets = choose_targets(inp.workers, plans, inp.pool, now, policy)
    out.serve = _serve_orders(inp)
    loader = workers.get(inp.pool.load_from_storage or "")
    if loader is not None and addressable(loader):
        out.load = [LoadOrder(loader.name, loader.control_address())]
    out.replace_pods += [p for p in targets.replace if p not in out.replace_pods]
    if targets.replace:
        message = f"replacing {', '.join(targets.replace)}: transfers failed or stuck"
        out.events.append(EventNote("Warning", "ReplacingTargets", message))
    if active:
        out.current_plan = active[0].name
        made = follow_up(inp, out, active, targets, now, policy)
    else:
        made = start_plan(inp, out, targets, now)
    if made is not None:  # dispatched now: its first bytes go out this tick
        _pending(out, made, workers, _beside(inp, targets, active), now, policy, inp.spec)
    out.delete = _expired(inp.plans, out, policy)
    return out


def _beside(inp: PlansInput, targets: Targets, active: Sequence[PlanView]) -> Targets:
    """The targets a plan beside `active` could take: those on nodes they leave free
    (followup.free_targets); the others do not make it stale."""
    if not active:
        return targets
    return replace(targets, pods=free_targets(targets.pods, inp.pool, active, inp.workers))


def _overlap(a: ScalePlanSpec, b: ScalePlanSpec) -> bool:
    """Two plans that may not run together: a shared target or a shared source."""
    sources = {s.pod for s in a.sources} & {s.pod for s in b.sources}
    return bool(sources or set(a.targets) & set(b.targets))


def _updated(view: PlanView, status: Manifest | None) -> PlanView:
    if status is None:
        return view
    return replace(view, status=ScalePlanStatus.model_validate(status))


def _pending(
    out: PlanDecision,
    view: PlanView,
    workers: dict[str, WorkerView],
    targets: Targets,
    now: datetime,
    policy: PlanPolicy,
    md: ModelDeploymentSpec,
) -> bool:
    spec = view.spec
    problem = _invalid(spec, workers, targets)
    if problem:
        _finish(out, view, view.status, PlanPhase.CANCELLED, "Superseded", problem, now)
        return False
    live = md.live_scaling
    orders = transfer_orders(
        view.name, spec, workers, live=live.enabled, cooperative=live.cooperative,
        send_mbit=md.multicast.rate_mbit,
    )  # fmt: skip
    if orders is None:
        age = (now - view.created).total_seconds() if view.created else 0.0
        if age > policy.dispatch_grace_s:
            message = "a participant's control API could not be reached"
            _finish(out, view, view.status, PlanPhase.CANCELLED, "Unreachable", message, now)
            return False
        return True
    out.transfers += orders
    begun = view.status.model_copy(update={"phase": PlanPhase.RUNNING, "start_time": now})
    status = with_condition(aggregate(spec, begun, workers, now), "Dispatched", shape(spec), now)
    out.patches.append(StatusPatch(view.name, status.to_api()))
    out.events.append(EventNote("Normal", "ScalePlanDispatched", f"{view.name}: {shape(spec)}"))
    return True


def _invalid(spec: ScalePlanSpec, workers: dict[str, WorkerView], targets: Targets) -> str:
    """Why a not-yet-running plan no longer fits what exists ('' when it still does).
    A participant already transferring means the plan was dispatched (a restart lost the
    status write): it is valid and gets its orders again (at-least-once)."""
    for pod in spec.targets:
        w = workers.get(pod)
        if w is None or not w.alive:
            return f"target {pod} is gone"
        if w.phase is not None and not (w.needs_weights or w.phase == WorkerPhase.TRANSFERRING):
            return f"target {pod} is {w.phase}"
    for src in spec.sources:
        w = workers.get(src.pod)
        if w is None or not w.alive:
            return f"source {src.pod} is gone"
        if w.phase is not None and not (w.complete or w.phase == WorkerPhase.TRANSFERRING):
            return f"source {src.pod} no longer holds the model"
    pods = {s.pod for s in spec.sources} | set(spec.targets)
    started = any(workers[p].phase == WorkerPhase.TRANSFERRING for p in pods)
    extra = sorted(set(targets.pods) - pods)
    if extra and not started:
        return f"new targets {', '.join(extra)}"
    return ""


def _running(
    out: PlanDecision,
    view: PlanView,
    workers: dict[str, WorkerView],
    now: datetime,
    policy: PlanPolicy,
    lent: set[str],
) -> bool:
    spec = view.spec
    status = aggregate(spec, view.status, workers, now)
    others = lent - {s.pod for s in spec.sources}  # sending in another plan
    v = verdict(spec, status, workers, now, policy, others)
    if v.phase == PlanPhase.RUNNING:
        if should_patch(view.status, status, spec, view.last_patch, now, policy):
            out.patches.append(StatusPatch(view.name, status.to_api()))
        return True
    _finish(out, view, status, v.phase, v.reason, v.message, now)
    out.replace_pods += [p for p in v.stuck if p not in out.replace_pods]
    return False


def _finish(
    out: PlanDecision,
    view: PlanView,
    status: ScalePlanStatus,
    phase: PlanPhase,
    reason: str,
    message: str,
    now: datetime,
) -> None:
    out.patches.append(StatusPatch(view.name, ended(status, phase, reason, message, now).to_api()))
    kind = "Normal" if phase != PlanPhase.FAILED else "Warning"
    out.events.append(EventNote(kind, f"ScalePlan{phase}", f"{view.name}: {reason}: {message}"))


def _serve_orders(inp: PlansInput) -> list[ServeOrder]:
    engine = inp.spec.engine
    return [
        ServeOrder(w.name, w.control_address(), engine.max_batch_size, engine.max_model_len)
        for w in inp.workers
        if w.complete
        and w.engine == "off"
        and w.holds(inp.pool.model_digest)
        and w.ip
        and not w.host_copy
    ]


def _expired(plans: Sequence[PlanView], out: PlanDecision, policy: PlanPolicy) -> list[str]:
    """Finished plans beyond the history limit, oldest first (never one written now)."""
    touched = {p.plan for p in out.patches}
    done = [p for p in by_age(plans) if not p.active and p.name not in touched]
    return [p.name for p in done[: max(0, len(done) - policy.history)]]
