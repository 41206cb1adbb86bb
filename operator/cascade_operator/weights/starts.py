"""New ScalePlans: the first one for targets that can receive, and follow-ups.

With no plan active, the targets that answer now get a plan at once (no gather wait;
the lifecycle dispatches it in the same tick). With plans running, targets that
answered since get a follow-up plan from the free sources when the planner predicts it
no later than waiting for the running plans and planning from every holder then
(followup.py); otherwise they wait and the Planned condition says why. Why there is no
plan (no sources, a storage load under way, no block table, the planner's refusal)
becomes the Planned condition. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from cascade_api.scaleplan import ScalePlanSpec, Source
from cascade_operator.events import EventNote
from cascade_operator.weights.decision import PlanDecision, PlansInput, planned
from cascade_operator.weights.followup import (
    choose,
    free_sources,
    free_targets,
    pool_of,
    remaining_s,
    sources_after,
)
from cascade_operator.weights.plans import PlanView, plan_manifest, plan_name
from cascade_operator.weights.progress import PlanPolicy, shape
from cascade_operator.weights.targets import Refusal, Targets, make_plan
from cascade_protocol.status import WorkerPhase


def start_plan(
    inp: PlansInput, out: PlanDecision, targets: Targets, now: datetime
) -> PlanView | None:
    """No plan is active: a plan for every target that can receive now, or why none."""
    pool = inp.pool
    if not targets.pods:
        if targets.waiting:
            starting = ", ".join(targets.waiting)
            planned(inp, out, True, "WaitingForPods", f"pods starting: {starting}")
        else:
            planned(inp, out, True, "UpToDate", "no worker waits for weights")
    elif not pool.sources and (pool.load_from_storage or pool.holders or _loading(inp)):
        planned(inp, out, True, "WaitingForSources", pool.message)
    elif not pool.sources:
        planned(inp, out, False, "NoSources", f"no worker holds the model; {pool.message}")
    elif inp.blocks is None:
        planned(inp, out, False, "ManifestUnavailable", "the sources' block table is unknown")
    else:
        made = _plan(inp, targets, pool.sources)
        if isinstance(made, Refusal):
            planned(inp, out, False, made.reason, made.message)
            return None
        view = _create(inp, out, made, targets, now)
        planned(inp, out, True, "PlanCreated", out.events[-1].message)
        return view
    return None


def follow_up(
    inp: PlansInput,
    out: PlanDecision,
    active: Sequence[PlanView],
    targets: Targets,
    now: datetime,
    policy: PlanPolicy,
) -> PlanView | None:
    """Plans run: a follow-up plan for the targets they do not name, or none (they wait);
    the Planned condition says which."""
    head = f"{active[0].name}: {shape(active[0].spec)}"
    if not targets.pods or inp.blocks is None:
        planned(inp, out, True, "PlanActive", head)
        return None
    free = free_sources(inp.pool, active, inp.workers)
    ready = replace(targets, pods=free_targets(targets.pods, inp.pool, active, inp.workers))
    follow = _plan(inp, ready, free) if free and ready.pods else None
    later = _plan(inp, targets, sources_after(inp.pool, active, inp.workers))
    remaining = max(remaining_s(v, now) for v in active)
    choice = choose(
        follow if isinstance(follow, ScalePlanSpec) else None,
        later if isinstance(later, ScalePlanSpec) else None,
        remaining,
        policy.notice_s,
    )
    pods = ", ".join(targets.pods)
    if not choice.now or not isinstance(follow, ScalePlanSpec):
        why = choice.why()
        if isinstance(follow, Refusal):
            why = f"the free sources can make no follow-up plan ({follow.reason})"
        elif not ready.pods:
            why = "the running plans use their nodes' NICs"
        planned(inp, out, True, "PlanActive", f"{head}; {pods} wait for it: {why}")
        return None
    view = _create(inp, out, follow, ready, now)
    taken = ", ".join(ready.pods)
    planned(inp, out, True, "PlanActive", f"{head}; follow-up {view.name} for {taken}")
    return view


def _plan(inp: PlansInput, targets: Targets, sources: list[Source]) -> ScalePlanSpec | Refusal:
    assert inp.blocks is not None
    pool = pool_of(inp.pool, sources)
    return make_plan(inp.ref.name, inp.spec, pool, inp.blocks, targets, inp.workers, inp.topo)


def _create(
    inp: PlansInput, out: PlanDecision, made: ScalePlanSpec, targets: Targets, now: datetime
) -> PlanView:
    """Add the plan's manifest and event to `out`; its view, for dispatch this tick."""
    taken = {p.name for p in inp.plans} | {m["metadata"]["name"] for m in out.create}
    name = plan_name(inp.ref.name, inp.generation, made.model_digest, made.targets, taken)
    attempt = 1 + max(targets.tries.get(t, 0) for t in made.targets)
    manifest = plan_manifest(inp.ref, name, made, attempt)
    out.create.append(manifest)
    out.current_plan = out.current_plan or name
    kind = "a repair" if attempt > 1 else "a plan"
    message = f"{name}: {kind} (attempt {attempt}), {shape(made)}"
    out.events.append(EventNote("Normal", "ScalePlanCreated", message))
    meta = {**manifest["metadata"], "creationTimestamp": now.isoformat()}
    return PlanView.of({**manifest, "metadata": meta})


def _loading(inp: PlansInput) -> bool:
    return any(w.alive and w.phase == WorkerPhase.LOADING for w in inp.workers)
