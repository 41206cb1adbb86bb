"""The ScalePlan lifecycle, tick by tick: create, dispatch, throttled progress, complete
and serve; failure and repair; supersede and cancel; restart idempotence; no sources."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from operator_fixtures import BLOCKS, REF, B, holder, md
from operator_fixtures import NOW as T0
from operator_fixtures import worker as idle

from cascade_api import constants as c
from cascade_api.base import Condition, set_condition
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_api.scaleplan import Block, PlanPhase, ScalePlanStatus
from cascade_operator.events import EventNote, transition_events
from cascade_operator.weights.lifecycle import (
    PlanDecision,
    PlansInput,
    decide_plans,
    manifest_source,
)
from cascade_operator.weights.plans import ATTEMPT_LABEL, PlanView
from cascade_operator.weights.pool import PoolInput, decide_pool
from cascade_operator.weights.progress import PlanPolicy
from cascade_operator.weights.workers import WorkerView
from cascade_planner import topology_from_nodes

TOPO = topology_from_nodes([{"metadata": {"name": f"n{i}"}} for i in range(8)])
POLICY = PlanPolicy()


@dataclass
class World:
    """The API objects and worker statuses a reconcile observes, and what it does to them."""

    workers: dict[str, WorkerView]
    spec: ModelDeploymentSpec = field(default_factory=md)
    plans: dict[str, PlanView] = field(default_factory=dict)
    conditions: list[Condition] = field(default_factory=list)
    told: list[EventNote] = field(
        default_factory=list
    )  # Planned transitions, as the status tells them
    blocks: list[Block] | None = field(default_factory=lambda: list(BLOCKS))
    policy: PlanPolicy = POLICY

    def tick(self, now: datetime, apply: bool = True, deliver: bool = True) -> PlanDecision:
        """One reconcile; `deliver=False`: its transfer orders did not reach the workers,
        so (as the driver does) their plans keep the status they had (a new one: Pending)."""
        ws = list(self.workers.values())
        pool = decide_pool(PoolInput(ws, self.spec.host_copies))
        inp = PlansInput(
            REF,
            1,
            self.spec,
            ws,
            list(self.plans.values()),
            TOPO,
            pool,
            self.blocks,
        )
        d = decide_plans(inp, now, self.policy)
        if apply:
            lost = {o.plan for o in d.transfers} if not deliver else set()
            sent = [o for o in d.transfers if o.plan not in lost]
            patches = [p for p in d.patches if p.plan not in lost]
            self.apply(replace(d, transfers=sent, patches=patches), now)
        return d

    def apply(self, d: PlanDecision, now: datetime) -> None:
        for m in d.create:
            m = {**m, "metadata": {**m["metadata"], "creationTimestamp": now.isoformat()}}
            self.plans[m["metadata"]["name"]] = PlanView.of(m)
        for p in d.patches:
            status = ScalePlanStatus.model_validate(p.status)
            self.plans[p.plan] = replace(self.plans[p.plan], status=status, last_patch=now)
        for o in d.transfers:
            if o.pod in o.spec.targets:
                self.set(o.pod, phase="transferring", model_digest="m1", blocks_total=B)
        for s in d.serve:
            self.set(s.pod, engine="starting")
        for name in d.delete:
            del self.plans[name]
        if d.condition is not None:
            before = self.conditions
            self.conditions = set_condition(self.conditions, d.condition, now)
            self.told = transition_events(before, self.conditions)

    def set(self, pod: str, **kw: Any) -> None:
        self.workers[pod] = replace(self.workers[pod], **kw)

    def only(self) -> PlanView:
        (view,) = [p for p in self.plans.values() if p.active]
        return view

    def planned(self) -> Condition:
        return next(c for c in self.conditions if c.type == "Planned")


def world(*workers: WorkerView, **kw: Any) -> World:
    return World({w.name: w for w in workers}, **kw)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_create_dispatch_throttled_progress_complete_serve() -> None:
    w = world(holder("llama-0"), idle("llama-1"), idle("llama-2"))
    # Tick 1: a plan for the two empty pods, dispatched at once (created before its
    # orders go out): every participant gets its order; the plan runs.
    d = w.tick(at(1))
    assert len(d.create) == 1
    m = d.create[0]
    assert m["kind"] == c.SP_KIND and m["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert m["metadata"]["labels"][c.LABEL_DEPLOYMENT] == "llama"
    assert m["metadata"]["labels"][ATTEMPT_LABEL] == "1"
    assert m["metadata"]["name"].startswith("llama-g1-")
    assert m["spec"]["targets"] == ["llama-1", "llama-2"]
    assert d.current_plan == m["metadata"]["name"]
    assert (w.planned().status, w.planned().reason) == ("True", "PlanCreated")
    assert [e.reason for e in d.events] == ["ScalePlanCreated", "ScalePlanDispatched"]
    assert sorted(o.pod for o in d.transfers) == ["llama-0", "llama-1", "llama-2"]
    order = d.transfers[0]
    assert order.pod == "llama-0" and order.address == f"10.0.0.0:{c.WORKER_PORT}"
    assert order.peers["llama-2"] == f"10.0.0.2:{c.DATA_PORT}"
    assert order.body()["plan"]["targets"] == ["llama-1", "llama-2"]
    plan = w.only()
    assert plan.status.phase == PlanPhase.RUNNING and plan.status.start_time == at(1)
    assert plan.status.progress == "0/2" and plan.status.target_count == 2
    # Progress: 2 of 16 target-blocks (12.5 %) is worth a write...
    w.set("llama-1", blocks_loaded=2, bytes_received=2 << 20)
    assert len(w.tick(at(2)).patches) == 1
    assert w.only().status.targets[0].blocks_received == 2
    # ... one more block (6 %) a second later is not; no status churn per block.
    w.set("llama-1", blocks_loaded=3)
    d = w.tick(at(3))
    assert d.patches == [] and d.transfers == [] and d.create == []
    # After the interval anything that moved is written.
    assert len(w.tick(at(3 + POLICY.patch_interval_s)).patches) == 1
    assert w.tick(at(30)).patches == []  # nothing moved, nothing written
    # A target completes: written at once, and it is told to serve.
    w.set("llama-1", phase="ready", blocks_loaded=B)
    d = w.tick(at(31))
    assert len(d.patches) == 1 and w.only().status.progress == "1/2"
    assert [s.pod for s in d.serve] == ["llama-1"]
    assert d.serve[0].body() == {"maxBatch": 64, "maxModelLen": 4096}
    # The last one holds every block but its transfer has not ended (still forwarding):
    # complete, not yet Completed, so its measured time makes it into the record.
    w.set("llama-2", blocks_loaded=B)
    w.tick(at(39))
    assert w.only().status.progress == "2/2" and w.only().status.phase == PlanPhase.RUNNING
    # The last one completes: Completed, Succeeded=True, served; the deployment is up to date.
    w.set("llama-2", phase="ready", blocks_loaded=B, transfer_s=8.5)
    d = w.tick(at(40))
    done = w.plans[plan.name].status
    assert done.phase == PlanPhase.COMPLETED and done.completion_time == at(40)
    assert done.targets[1].first_complete_time == at(39) and done.bytes_moved == 2 * B << 20
    assert done.targets[1].transfer_seconds == 8.5
    assert [(x.type, x.status, x.reason) for x in done.conditions][-1] == (
        "Succeeded",
        "True",
        "AllTargetsComplete",
    )
    assert [s.pod for s in d.serve] == ["llama-2"]
    assert "ScalePlanCompleted" in [e.reason for e in d.events]
    assert w.planned().reason == "UpToDate" and d.current_plan is None
    # Converged: a repeated tick does nothing.
    d = w.tick(at(50))
    assert (d.create, d.patches, d.transfers, d.serve, d.events) == ([], [], [], [], [])


def running(w: World, now: datetime) -> PlanView:
    """Tick once: the plan is made and dispatched, started a second later than `now`
    (the tests' timelines count from the second tick of the two it once took)."""
    w.tick(now + timedelta(seconds=1))
    return w.only()


def test_failure_repairs_from_the_holders_left_excluding_dead_peers() -> None:
    w = world(holder("llama-0"), holder("llama-3"), idle("llama-1"), idle("llama-2"))
    first = running(w, at(0))
    assert {s.pod for s in first.spec.sources} == {"llama-0", "llama-3"}
    # A source dies; one target completes, the other ends missing two blocks.
    w.set("llama-3", alive=False)
    w.set("llama-1", phase="ready", blocks_loaded=B)
    w.set("llama-2", phase="failed", blocks_loaded=6, missing=(5, 6), transfer_complete=False)
    d = w.tick(at(5))
    failed = w.plans[first.name].status
    assert failed.phase == PlanPhase.FAILED
    assert failed.conditions[-1].reason == "TargetsFailed"
    assert "llama-2: missing blocks [5, 6]" in failed.conditions[-1].message
    # The repair, in the same tick: only the incomplete target, from live holders.
    (repair,) = d.create
    assert repair["spec"]["targets"] == ["llama-2"]
    used = {s["pod"] for s in repair["spec"]["sources"]}
    assert used and used <= {"llama-0", "llama-1"}  # the dead llama-3 is no source
    assert repair["metadata"]["labels"][ATTEMPT_LABEL] == "2"
    assert repair["metadata"]["name"] != first.name
    assert [e.type for e in d.events if e.reason == "ScalePlanFailed"] == ["Warning"]


def test_repairs_are_bounded_then_the_pod_is_replaced() -> None:
    w = world(holder("llama-0"), idle("llama-1"), policy=PlanPolicy(max_repairs=1))
    plan = running(w, at(0))
    assert plan.attempt == 1 and plan.spec.targets == ["llama-1"]
    w.set("llama-1", phase="failed", missing=(7,))
    w.tick(at(10))  # failed; the repair is made and dispatched in the same tick
    assert w.plans[plan.name].status.phase == PlanPhase.FAILED
    repair = w.only()
    assert repair.attempt == 2 and repair.spec.targets == ["llama-1"]
    w.set("llama-1", phase="failed", missing=(7,))
    d = w.tick(at(20))
    assert w.plans[repair.name].status.phase == PlanPhase.FAILED
    assert d.create == [] and d.replace_pods == ["llama-1"]
    assert "ReplacingTargets" in [e.reason for e in d.events]
    # The replacement pod (same name, newer) starts afresh.
    w.set("llama-1", created=at(200), phase="idle", missing=())
    assert len(w.tick(at(201)).create) == 1


def test_lost_order_fails_after_the_grace_and_is_repaired() -> None:
    w = world(holder("llama-0"), idle("llama-1"))
    plan = running(w, at(0))
    w.set("llama-1", phase="idle")  # the worker restarted and forgot the order
    assert w.tick(at(10)).patches == []  # within the grace: wait
    d = w.tick(at(1 + POLICY.dispatch_grace_s + 1))
    assert w.plans[plan.name].status.phase == PlanPhase.FAILED
    assert d.create and d.create[0]["metadata"]["labels"][ATTEMPT_LABEL] == "2"


def test_timeout_fails_the_plan_and_replaces_stuck_targets() -> None:
    w = world(holder("llama-0"), idle("llama-1"), idle("llama-2"))
    plan = running(w, at(0))
    w.set("llama-2", phase="ready", blocks_loaded=B)
    d = w.tick(at(1 + POLICY.timeout_floor_s + 1))
    status = w.plans[plan.name].status
    assert status.phase == PlanPhase.FAILED and status.conditions[-1].reason == "Timeout"
    assert d.replace_pods == ["llama-1"] and d.create == []


def test_scale_up_supersedes_a_pending_plan() -> None:
    w = world(holder("llama-0"), idle("llama-1"))
    first = w.tick(at(0), deliver=False).create[0]["metadata"]["name"]  # stays Pending
    w.workers["llama-2"] = idle("llama-2")
    d = w.tick(at(1))
    assert w.plans[first].status.phase == PlanPhase.CANCELLED
    assert w.plans[first].status.conditions[-1].reason == "Superseded"
    assert d.create[0]["spec"]["targets"] == ["llama-1", "llama-2"]
    assert {o.plan for o in d.transfers} == {d.create[0]["metadata"]["name"]}


def test_scale_down_cancels_a_running_plan_and_replans_the_rest() -> None:
    w = world(holder("llama-0"), idle("llama-1"), idle("llama-2"))
    plan = running(w, at(0))
    del w.workers["llama-2"]  # scaled down: the pod is gone
    d = w.tick(at(3))
    status = w.plans[plan.name].status
    assert status.phase == PlanPhase.CANCELLED and status.conditions[-1].reason == "TargetsGone"
    assert d.create == []  # llama-1 still runs its transfer
    w.set("llama-1", phase="failed", missing=(3,))
    d = w.tick(at(4))
    assert d.create[0]["spec"]["targets"] == ["llama-1"]
    assert d.create[0]["metadata"]["labels"][ATTEMPT_LABEL] == "1"  # a cancel is no failure


def test_a_plan_starts_without_waiting_for_starting_pods() -> None:
    young = idle("llama-2", alive=False, starting=True, created=at(0.5), ip=None, phase=None)
    w = world(holder("llama-0"), idle("llama-1", created=at(0)), young)
    d = w.tick(at(1))  # no gather wait: llama-1 answers, so its plan starts now
    assert d.create[0]["spec"]["targets"] == ["llama-1"]
    assert {o.pod for o in d.transfers} == {"llama-0", "llama-1"}
    assert w.planned().reason == "PlanCreated"
    # Nothing to plan, a pod still starting: the condition names it.
    w2 = world(holder("llama-0"), young)
    assert w2.tick(at(1)).create == [] and w2.planned().reason == "WaitingForPods"


def test_restart_is_idempotent() -> None:
    w = world(holder("llama-0"), idle("llama-1"))
    # A crash before the create landed: the restarted operator derives the same name.
    lost = w.tick(at(0), apply=False).create[0]["metadata"]["name"]
    d = w.tick(at(5), apply=False)
    assert d.create[0]["metadata"]["name"] == lost
    # A crash after dispatch but before the status write: the plan is still Pending while
    # the workers already transfer. It is re-sent (at-least-once) and marked Running,
    # neither cancelled nor duplicated.
    w.tick(at(5), deliver=False)
    w.set("llama-1", phase="transferring", model_digest="m1", blocks_total=B)
    w.set("llama-0", phase="transferring")
    d = w.tick(at(7))
    assert d.create == [] and len(d.transfers) == 2
    assert w.only().name == lost and w.only().status.phase == PlanPhase.RUNNING


def test_names_never_collide_with_finished_plans() -> None:
    w = world(holder("llama-0"), idle("llama-1"))
    first = w.tick(at(0), deliver=False).create[0]["metadata"]["name"]
    w.set("llama-0", alive=False)  # the only source goes away before dispatch
    w.tick(at(1))
    assert w.plans[first].status.phase == PlanPhase.CANCELLED
    w.set("llama-0", alive=True)
    again = w.tick(at(2)).create[0]["metadata"]["name"]
    assert again == f"{first}-2"


def test_two_active_plans_keep_the_older() -> None:
    w = world(holder("llama-0"), idle("llama-1"))
    name = w.tick(at(0), deliver=False).create[0]["metadata"]["name"]
    dup = replace(w.plans[name], name="llama-other", created=at(1))
    w.plans[dup.name] = dup
    d = w.tick(at(2))
    assert w.plans["llama-other"].status.phase == PlanPhase.CANCELLED
    assert w.plans[name].status.phase == PlanPhase.RUNNING
    assert {o.plan for o in d.transfers} == {name}


def test_no_copy_anywhere_loads_from_storage_then_plans() -> None:
    w = world(idle("llama-0"), idle("llama-1"))
    d = w.tick(at(0))
    assert [o.pod for o in d.load] == ["llama-0"] and d.create == []
    assert (w.planned().status, w.planned().reason) == ("True", "WaitingForSources")
    assert not [e for e in d.events if e.type == "Warning"]
    w.set("llama-0", phase="loading")
    assert w.tick(at(1)).load == []
    w.set(
        "llama-0", phase="ready", engine="off", model_digest="m1", blocks_loaded=B, blocks_total=B
    )
    d = w.tick(at(2))
    assert [s.pod for s in d.serve] == ["llama-0"]
    assert d.create[0]["spec"]["sources"] == [{"pod": "llama-0", "tier": "gpu"}]


def test_insufficient_sources_is_a_condition_and_one_event_not_a_crash() -> None:
    spec = md(multicast={"strategy": "binomial", "k": 3})
    w = world(holder("llama-0"), idle("llama-1"), spec=spec)
    d = w.tick(at(0))
    assert d.create == []
    cond = w.planned()
    assert (cond.status, cond.reason) == ("False", "InsufficientSources")
    assert "k=3" in cond.message and cond.observed_generation == 1
    assert d.events == []  # the status assembler tells the transition, once
    assert [(e.type, e.reason) for e in w.told] == [("Warning", "InsufficientSources")]
    w.tick(at(1))
    assert w.told == []  # the same trouble is told once


def test_unknown_block_table_waits_without_a_plan() -> None:
    w = world(holder("llama-0"), idle("llama-1"), blocks=None)
    d = w.tick(at(0))
    assert d.create == [] and w.planned().reason == "ManifestUnavailable"


def test_manifest_source_as_soon_as_a_source_holds_the_model() -> None:
    ws = [holder("llama-0"), idle("llama-1")]
    pool = decide_pool(PoolInput(ws, 1))
    assert manifest_source(pool) == "llama-0"
    # Before any scale-up too: the first target's plan does not wait for the table.
    alone = ws[:1]
    assert manifest_source(decide_pool(PoolInput(alone, 1))) == "llama-0"
    nobody = [idle("llama-1")]
    assert manifest_source(decide_pool(PoolInput(nobody, 1))) is None


def test_finished_plans_beyond_history_are_deleted_oldest_first() -> None:
    w = world(holder("llama-0"), policy=PlanPolicy(history=2))
    status = ScalePlanStatus(phase=PlanPhase.COMPLETED)
    base = w.tick(at(0))  # nothing to do; borrow a manifest from a one-target world
    assert base.create == []
    proto = world(holder("llama-0"), idle("llama-1"))
    m = proto.tick(at(0)).create[0]
    for i in range(4):
        meta = {**m["metadata"], "name": f"old-{i}", "creationTimestamp": at(i).isoformat()}
        w.plans[f"old-{i}"] = replace(PlanView.of({**m, "metadata": meta}), status=status)
    assert w.tick(at(10)).delete == ["old-0", "old-1"]
