"""Plans start as soon as targets can receive; targets that answer while a plan runs get
a follow-up plan now or wait for it, whichever the planner predicts faster. Tick by
tick, as the lifecycle sees it (test_operator_scaleplans.py's style), and the pure rule
(followup.py) on its own."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from operator_fixtures import NOW as T0
from operator_fixtures import REF, holder, md
from operator_fixtures import worker as idle

from cascade_api import constants as c
from cascade_api.base import Condition, set_condition
from cascade_api.modeldeployment import ModelDeploymentSpec
from cascade_api.scaleplan import Block, PlanPhase, ScalePlanSpec, ScalePlanStatus, Source
from cascade_operator.weights.followup import (
    busy_nodes,
    choose,
    free_sources,
    free_targets,
    remaining_s,
    sources_after,
)
from cascade_operator.weights.lifecycle import PlanDecision, PlansInput, decide_plans
from cascade_operator.weights.plans import PlanView
from cascade_operator.weights.pool import PoolInput, decide_pool
from cascade_operator.weights.progress import PlanPolicy
from cascade_operator.weights.workers import WorkerView
from cascade_planner import topology_from_nodes

B = 8
MIB = 1 << 20
# 1 GiB in 8 blocks: about 9 s over a 1000 Mbit/s NIC, so plans run long enough to matter.
BLOCKS = [
    Block(index=i, layer_start=i, layer_end=i + 1, bytes=128 * MIB, checksum="x") for i in range(B)
]


def chain() -> ModelDeploymentSpec:
    return md(multicast={"strategy": "chain"})


def topo(out_mbit: dict[int, int] | None = None) -> Any:
    """Nodes n0..n9 at 1000 Mbit/s each way; `out_mbit` slows some nodes' sending."""
    out_mbit = out_mbit or {}
    return topology_from_nodes(
        [
            {
                "metadata": {
                    "name": f"n{i}",
                    "labels": {
                        c.LABEL_NIC_IN_MBIT: "1000",
                        c.LABEL_NIC_OUT_MBIT: str(out_mbit.get(i, 1000)),
                    },
                }
            }
            for i in range(10)
        ]
    )


@dataclass
class World:
    """Workers and plans as a reconcile sees them; dispatch and completion applied as
    the workers would (sources and targets transfer, then hold the model)."""

    workers: dict[str, WorkerView]
    topo: Any = field(default_factory=topo)
    spec: ModelDeploymentSpec = field(default_factory=chain)
    plans: dict[str, PlanView] = field(default_factory=dict)
    conditions: list[Condition] = field(default_factory=list)

    def tick(self, now: datetime, apply: bool = True) -> PlanDecision:
        ws = list(self.workers.values())
        pool = decide_pool(PoolInput(ws, self.spec.host_copies))
        inp = PlansInput(REF, 1, self.spec, ws, list(self.plans.values()), self.topo, pool, BLOCKS)
        d = decide_plans(inp, now, PlanPolicy())
        if apply:
            for m in d.create:
                meta = {**m["metadata"], "creationTimestamp": now.isoformat()}
                self.plans[meta["name"]] = PlanView.of({**m, "metadata": meta})
            for p in d.patches:
                status = ScalePlanStatus.model_validate(p.status)
                self.plans[p.plan] = replace(self.plans[p.plan], status=status, last_patch=now)
            for o in d.transfers:
                self.set(o.pod, phase="transferring")
                if o.pod in o.spec.targets:
                    self.set(o.pod, model_digest="m1", blocks_total=B)
            if d.condition is not None:
                self.conditions = set_condition(self.conditions, d.condition, now)
        return d

    def set(self, pod: str, **kw: Any) -> None:
        self.workers[pod] = replace(self.workers[pod], **kw)

    def done(self, plan: PlanView) -> None:
        """Every participant of `plan` ends its transfer holding the model."""
        for pod in [s.pod for s in plan.spec.sources] + plan.spec.targets:
            self.set(pod, phase="ready", model_digest="m1", blocks_loaded=B, blocks_total=B)

    def active(self) -> list[PlanView]:
        return sorted((p for p in self.plans.values() if p.active), key=lambda p: p.name)

    def planned(self) -> Condition:
        return next(c for c in self.conditions if c.type == "Planned")


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def host(name: str, **kw: Any) -> WorkerView:
    return holder(name, host_copy=True, engine="off", **kw)


def targets_of(d: PlanDecision) -> list[list[str]]:
    return [m["spec"]["targets"] for m in d.create]


def test_one_source_a_later_target_waits_then_gets_a_plan_from_every_holder() -> None:
    w = World({"llama-0": holder("llama-0"), "llama-1": idle("llama-1")})
    # llama-1 answers: its plan is made and dispatched in the same tick.
    d = w.tick(at(0))
    assert targets_of(d) == [["llama-1"]] and {o.pod for o in d.transfers} == {"llama-0", "llama-1"}
    (first,) = w.active()
    assert first.status.phase == PlanPhase.RUNNING and first.spec.predicted_completion_seconds
    # llama-2 answers while it runs: the only holder sends, no follow-up can be made.
    w.workers["llama-2"] = idle("llama-2")
    d = w.tick(at(1))
    assert d.create == [] and d.transfers == []
    cond = w.planned()
    assert cond.reason == "PlanActive"
    assert "llama-2 wait for it: no free source for a follow-up plan" in cond.message
    # The plan completes: in the same tick, a plan from both holders, dispatched.
    w.done(first)
    d = w.tick(at(10))
    assert w.plans[first.name].status.phase == PlanPhase.COMPLETED
    assert targets_of(d) == [["llama-2"]]
    assert sorted(s["pod"] for s in d.create[0]["spec"]["sources"]) == ["llama-0", "llama-1"]
    assert {o.pod for o in d.transfers} == {"llama-0", "llama-1", "llama-2"}


def first_plan_while_the_host_copy_loads() -> tuple[World, PlanView]:
    """llama-1 answers while the host copy llama-7 still loads: llama-0 sends alone."""
    w = World(
        {
            "llama-0": holder("llama-0"),
            "llama-1": idle("llama-1"),
            "llama-7": host("llama-7", phase="loading", blocks_loaded=0),
        }
    )
    w.tick(at(0))
    (first,) = w.active()
    return w, first


def test_a_free_source_makes_a_follow_up_now_when_predicted_sooner() -> None:
    w, first = first_plan_while_the_host_copy_loads()
    assert [s.pod for s in first.spec.sources] == ["llama-0"]
    # A second later the host copy holds the model and llama-2 answers. A follow-up from
    # the host copy now (~9 s) beats waiting (~8 s left + 1 s + ~9 s): made and sent.
    w.set("llama-7", phase="ready", blocks_loaded=B)
    w.workers["llama-2"] = idle("llama-2")
    d = w.tick(at(1))
    assert targets_of(d) == [["llama-2"]]
    assert [s["pod"] for s in d.create[0]["spec"]["sources"]] == ["llama-7"]
    assert {o.pod for o in d.transfers} == {"llama-7", "llama-2"}
    assert len(w.active()) == 2  # on disjoint pods, side by side
    assert "follow-up" in w.planned().message and w.planned().reason == "PlanActive"
    # Both run to completion, each on its own; neither is cancelled as a duplicate.
    w.done(first)
    w.tick(at(10))
    assert w.plans[first.name].status.phase == PlanPhase.COMPLETED
    (second,) = w.active()
    w.done(second)
    d = w.tick(at(11))
    assert w.plans[second.name].status.phase == PlanPhase.COMPLETED
    assert w.active() == [] and w.planned().reason == "UpToDate"


def test_a_slow_free_source_waits_when_the_running_plan_ends_sooner() -> None:
    # The host copy sends at 100 Mbit/s: a follow-up from it alone takes ~90 s.
    w = World(
        {
            "llama-0": holder("llama-0"),
            "llama-1": idle("llama-1"),
            "llama-7": host("llama-7", phase="loading", blocks_loaded=0),
        },
        topo=topo({7: 100}),
    )
    w.tick(at(0))
    (first,) = w.active()
    w.set("llama-7", phase="ready", blocks_loaded=B)
    w.workers["llama-2"] = idle("llama-2")
    d = w.tick(at(2))
    assert d.create == [] and d.transfers == []
    message = w.planned().message
    assert "llama-2 wait for it: waiting for it is predicted faster" in message
    # Still waiting a second later: nothing churns (the message has no numbers).
    w.tick(at(3))
    assert w.planned().message == message
    # The plan ends: one plan from every holder, dispatched at once.
    w.done(first)
    d = w.tick(at(10))
    assert targets_of(d) == [["llama-2"]]
    sources = [s["pod"] for s in d.create[0]["spec"]["sources"]]
    assert sorted(sources) == ["llama-0", "llama-1", "llama-7"]
    assert {o.pod for o in d.transfers} == {*sources, "llama-2"}


def test_the_choice_is_made_again_each_tick_as_the_running_plan_proceeds() -> None:
    # At 250 Mbit/s a follow-up from the host copy takes ~36 s. Early in a long first
    # plan (a ~90 s one: llama-0 sends at 100 Mbit/s) that beats waiting; near its end
    # waiting wins.
    ws = {
        "llama-0": holder("llama-0"),
        "llama-1": idle("llama-1"),
        "llama-7": host("llama-7", phase="loading", blocks_loaded=0),
    }
    w = World(ws, topo=topo({0: 100, 7: 250}))
    w.tick(at(0))
    (first,) = w.active()
    assert (first.spec.predicted_completion_seconds or 0) > 80
    w.set("llama-7", phase="ready", blocks_loaded=B)
    w.workers["llama-2"] = idle("llama-2")
    late = w.tick(at(80), apply=False)
    assert (
        late.create == []
        and "waiting for it" in (late.condition or Condition(type="x", status="True")).message
    )
    early = w.tick(at(1), apply=False)
    assert [m["spec"]["targets"] for m in early.create] == [["llama-2"]]


def test_a_completed_target_that_ended_its_transfer_is_a_free_source() -> None:
    w = World(
        {"llama-0": holder("llama-0"), "llama-1": idle("llama-1"), "llama-2": idle("llama-2")}
    )
    w.spec = md(multicast={"strategy": "binomial"})
    w.tick(at(0))
    (first,) = w.active()
    # llama-1 holds every block and its transfer ended; llama-2 still receives.
    w.set("llama-1", phase="ready", blocks_loaded=B)
    w.workers["llama-3"] = idle("llama-3")
    d = w.tick(at(1))
    assert targets_of(d) == [["llama-3"]]
    assert [s["pod"] for s in d.create[0]["spec"]["sources"]] == ["llama-1"]
    # The first plan does not count llama-1, now sending for the follow-up, as still
    # forwarding its own blocks: it completes when llama-2 does.
    w.set("llama-2", phase="ready", model_digest="m1", blocks_loaded=B)
    w.set("llama-0", phase="ready")
    w.tick(at(5))
    assert w.plans[first.name].status.phase == PlanPhase.COMPLETED


def test_plans_sharing_a_pod_keep_the_older() -> None:
    w = World(
        {"llama-0": holder("llama-0"), "llama-1": idle("llama-1"), "llama-2": idle("llama-2")}
    )
    w.tick(at(0))
    (first,) = w.active()
    clash = replace(first, name="llama-clash", created=at(1))
    w.plans[clash.name] = clash
    w.tick(at(2))
    assert w.plans["llama-clash"].status.phase == PlanPhase.CANCELLED
    assert w.plans[first.name].status.phase == PlanPhase.RUNNING


# The pure rule.


def spec(predicted: float | None, sources: list[str], targets: list[str]) -> ScalePlanSpec:
    return ScalePlanSpec(
        deployment="llama",
        model_digest="m1",
        strategy="chain",
        sources=[Source(pod=s, tier="gpu") for s in sources],
        targets=targets,
        predicted_completion_seconds=predicted,
    )


def test_choose_follows_up_when_no_later_and_waits_otherwise() -> None:
    now, later = spec(9.0, ["a"], ["x"]), spec(4.0, ["a", "b"], ["x"])
    assert choose(now, later, remaining=5.0, notice_s=1.0).now  # 9 <= 5 + 1 + 4 (a tie)
    assert not choose(now, later, remaining=3.9, notice_s=1.0).now  # 9 > 8.9
    waited = choose(now, later, remaining=0.0, notice_s=1.0)
    assert (waited.follow_s, waited.wait_s) == (9.0, 5.0)
    assert not choose(None, later, remaining=0.0, notice_s=1.0).now  # no free source
    assert choose(now, None, remaining=0.0, notice_s=1.0).now  # no plan then either
    assert choose(None, later, 0.0, 1.0).why() == "no free source for a follow-up plan"


def test_remaining_free_and_later_sources() -> None:
    running = PlanView(
        name="p",
        spec=spec(10.0, ["llama-0"], ["llama-1", "llama-7"]),
        status=ScalePlanStatus(phase=PlanPhase.RUNNING, start_time=at(0)),
    )
    assert remaining_s(running, at(4)) == 6.0 and remaining_s(running, at(30)) == 0.0
    pending = replace(running, status=ScalePlanStatus())
    assert remaining_s(pending, at(4)) == 10.0
    ws = [holder("llama-0"), holder("llama-5"), idle("llama-1"), host("llama-7")]
    pool = decide_pool(PoolInput(ws, 0))
    # A pending plan's sources are still ready, but spoken for.
    assert [s.pod for s in free_sources(pool, [pending], ws)] == ["llama-7", "llama-5"]
    after = sources_after(pool, [running], ws)
    assert [(s.pod, s.tier) for s in after] == [
        ("llama-7", "host"), ("llama-0", "gpu"), ("llama-5", "gpu"), ("llama-1", "gpu"),
    ]  # fmt: skip


def test_follow_ups_use_no_node_whose_nic_a_running_plan_uses() -> None:
    """A holder or a target beside a running plan's sender or receiver shares its node's
    NIC: neither free. A target still receiving uses it; one that completed does not."""
    ws = [
        holder("llama-0"),
        holder("llama-2", node="n0"),  # beside the running plan's source
        holder("llama-3", node="n1"),  # beside its target, still receiving
        holder("llama-4"),  # its other target: completed, a source again
        holder("llama-6", node="n4"),  # beside that one
        holder("llama-5"),
    ]
    pool = decide_pool(PoolInput(ws, 0))
    running = PlanView(
        name="p",
        spec=spec(10.0, ["llama-0"], ["llama-1", "llama-4"]),
        status=ScalePlanStatus(phase=PlanPhase.RUNNING, start_time=at(0)),
    )
    assert sorted(s.pod for s in pool.sources) == [
        "llama-0", "llama-2", "llama-3", "llama-4", "llama-5", "llama-6",
    ]  # fmt: skip
    everyone = [*ws, idle("llama-1"), idle("llama-7"), idle("llama-8", node="n1")]
    assert busy_nodes(pool, [running], everyone) == {"n0", "n1"}
    free = free_sources(pool, [running], everyone)
    assert sorted(s.pod for s in free) == ["llama-4", "llama-5", "llama-6"]
    new = ["llama-7", "llama-8", "llama-9"]  # llama-9: not seen yet, no node known
    assert free_targets(new, pool, [running], everyone) == ["llama-7", "llama-9"]
    # With no running plan every node is free.
    assert busy_nodes(pool, [], everyone) == set() and len(free_sources(pool, [], ws)) == 6


def test_a_target_beside_a_running_plan_waits_then_gets_its_plan() -> None:
    """Tick by tick: a pod that answers on the node a running plan receives on gets no
    follow-up from the free host copy (the Planned condition says why); one that answers
    on a free node does; the first gets its plan once the running plan ends."""
    w, first = first_plan_while_the_host_copy_loads()
    w.set("llama-7", phase="ready", blocks_loaded=B)
    w.workers["llama-2"] = idle("llama-2", node="n1")  # beside llama-1, still receiving
    d = w.tick(at(1))
    assert d.create == [] and d.transfers == []
    assert "llama-2 wait for it: the running plans use their nodes' NICs" in w.planned().message
    w.workers["llama-3"] = idle("llama-3")
    d = w.tick(at(2))
    assert targets_of(d) == [["llama-3"]]
    assert [s["pod"] for s in d.create[0]["spec"]["sources"]] == ["llama-7"]
    # Dispatched at once: the target waiting beside the first plan does not make it stale.
    assert {o.pod for o in d.transfers} == {"llama-7", "llama-3"}
    assert [p.plan for p in d.patches if p.status.get("phase") == "Cancelled"] == []
    second = w.plans[d.create[0]["metadata"]["name"]]
    d = w.tick(at(3))
    assert d.create == [] and len(w.active()) == 2
    w.done(first)
    w.done(second)
    d = w.tick(at(12))
    assert targets_of(d) == [["llama-2"]]
