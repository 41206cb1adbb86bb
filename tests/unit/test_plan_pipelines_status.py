"""A running ScalePlan's execution pipelines as their heads report them, tick by tick:
Planned until the head serves over its stages, Serving with the head's measured times,
Dissolved once it stops heading (or every member completes, or the plan ends), never
back; the write throttle lets every change through at once; the worker view reads the
head's pipeline from its status."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from operator_fixtures import BLOCKS, REF, B, holder, md
from operator_fixtures import NOW as T0
from operator_fixtures import worker as idle

from cascade_api import scaleplan as sp
from cascade_api.modeldeployment import InstanceMode
from cascade_operator.observed import PodView
from cascade_operator.weights.lifecycle import PlansInput, decide_plans
from cascade_operator.weights.plans import PlanView, pipelines, with_pipelines
from cascade_operator.weights.pool import PoolInput, decide_pool
from cascade_operator.weights.progress import PlanPolicy, aggregate, ended, should_patch
from cascade_operator.weights.workers import WorkerView
from cascade_planner import topology_from_nodes
from cascade_protocol.status import ServingMode, WorkerStatus

PLANNED, SERVING, DISSOLVED = (
    sp.PipelineState.PLANNED,
    sp.PipelineState.SERVING,
    sp.PipelineState.DISSOLVED,
)
TOPO = topology_from_nodes([{"metadata": {"name": f"n{i}"}} for i in range(8)])
POLICY = PlanPolicy()
START = T0.timestamp()  # the plan's status.startTime, as wall-clock seconds


def two_stages(head: str, stage: str, ready: float) -> sp.ExecutionPipeline:
    return sp.ExecutionPipeline(
        stages=[
            sp.Stage(pod=head, layer_start=0, layer_end=B // 2),
            sp.Stage(pod=stage, layer_start=B // 2, layer_end=B),
        ],
        ready_seconds=ready,
    )


SPEC = sp.ScalePlanSpec(
    deployment="llama",
    model_digest="m1",
    blocks=BLOCKS,
    sources=[sp.Source(pod="llama-0", tier=sp.SourceTier.GPU)],
    targets=["llama-1", "llama-2", "llama-3", "llama-4"],
    strategy=sp.PlanStrategy.CHAIN,
    chains=[sp.Chain(source="llama-0", hops=["llama-1", "llama-2", "llama-3", "llama-4"])],
    execution_pipelines=[
        two_stages("llama-1", "llama-2", 1.2),
        two_stages("llama-3", "llama-4", 1.4),
    ],
)
RUNNING = sp.ScalePlanStatus(phase=sp.PlanPhase.RUNNING, start_time=T0, target_count=4)


def receiving(name: str, **kw: Any) -> WorkerView:
    """A target half way through the plan's transfer, serving nothing."""
    fields: dict[str, Any] = {
        "phase": "transferring",
        "model_digest": "m1",
        "blocks_loaded": B // 2,
        "blocks_total": B,
        "mode": ServingMode.LOADING,
    }
    return idle(name, **(fields | kw))


def heading(name: str, covered: float | None, serving: float | None, **kw: Any) -> WorkerView:
    """A target whose engine heads its pipeline and serves; times after the plan's start."""
    fields: dict[str, Any] = {
        "engine": "serving",
        "mode": ServingMode.HEAD,
        "heads_pipeline": True,
        "covered_at": None if covered is None else START + covered,
        "serving_at": None if serving is None else START + serving,
    }
    return receiving(name, **(fields | kw))


def local(name: str) -> WorkerView:
    """A target that holds every block and serves alone."""
    return receiving(name, phase="ready", blocks_loaded=B, engine="serving", mode="local")


def workers(*ws: WorkerView) -> dict[str, WorkerView]:
    targets = {t: receiving(t) for t in SPEC.targets}
    return {"llama-0": holder("llama-0", phase="transferring")} | targets | {w.name: w for w in ws}


def tick(status: sp.ScalePlanStatus, *ws: WorkerView, at: float = 1.0) -> sp.ScalePlanStatus:
    return aggregate(SPEC, status, workers(*ws), T0 + timedelta(seconds=at))


def states(status: sp.ScalePlanStatus) -> list[str]:
    return [p.state for p in status.pipelines]


def test_planned_serving_dissolved_tick_by_tick() -> None:
    # Dispatched: one entry per spec pipeline, in order, named by its head.
    s = tick(RUNNING, at=0)
    assert [(p.head, p.state) for p in s.pipelines] == [("llama-1", PLANNED), ("llama-3", PLANNED)]
    assert s.pipeline_summary == "2 planned"
    # The head's engine heads the pipeline but is still starting: not serving yet.
    s = tick(s, heading("llama-1", 1.1, None, engine="starting"))
    assert states(s) == [PLANNED, PLANNED]
    # It serves over its stages: Serving, with the head's own times.
    s = tick(s, heading("llama-1", 1.25, 1.37), at=2)
    first = s.pipelines[0]
    assert first.state == SERVING and s.pipeline_summary == "1 serving, 1 planned"
    assert (first.covered_seconds, first.serving_seconds) == (1.25, 1.37)
    assert first.serving_delay_seconds == pytest.approx(0.12) and first.serving_delay_seconds <= 0.5
    # Its status unread this tick: nothing changes.
    assert tick(s, replace(receiving("llama-1"), phase=None), at=3).pipelines == s.pipelines
    # Switching to local (the head role still there): still Serving, never back to Planned.
    s = tick(s, heading("llama-1", 1.25, 1.37, engine="starting"), at=3)
    assert states(s) == [SERVING, PLANNED]
    # The head serves alone: Dissolved, its measurements kept.
    s = tick(s, local("llama-1"), at=4)
    assert states(s) == [DISSOLVED, PLANNED]
    assert s.pipelines[0].model_dump() == first.model_copy(update={"state": DISSOLVED}).model_dump()
    assert s.pipeline_summary == "1 planned, 1 dissolved"
    # A dissolved pipeline never comes back, even if the pod heads one again.
    s = tick(s, heading("llama-1", 9.0, 9.1), at=5)
    assert s.pipelines[0].state == DISSOLVED and s.pipelines[0].covered_seconds == 1.25


def test_a_pipeline_that_never_served_dissolves_once_its_members_complete() -> None:
    s = tick(RUNNING, local("llama-3"))
    assert states(s) == [PLANNED, PLANNED], "one complete member: the other one may still form"
    s = tick(s, local("llama-3"), local("llama-4"))
    assert states(s) == [PLANNED, DISSOLVED]
    assert s.pipelines[1].covered_seconds is None and s.pipelines[1].serving_seconds is None


def test_a_source_stage_counts_as_complete() -> None:
    """A source may take a pipeline's last seat; it holds every block all along."""
    spec = SPEC.model_copy(update={"execution_pipelines": [two_stages("llama-1", "llama-0", 1)]})
    ws = workers(local("llama-1"))
    assert [p.state for p in pipelines(spec, RUNNING, ws, set())] == [PLANNED]
    assert [p.state for p in pipelines(spec, RUNNING, ws, {"llama-1"})] == [DISSOLVED]


def test_the_plan_ending_dissolves_every_pipeline() -> None:
    s = tick(RUNNING, heading("llama-1", 1.0, 1.1))
    done = ended(s, sp.PlanPhase.COMPLETED, "AllTargetsComplete", "m", T0 + timedelta(seconds=9))
    assert states(done) == [DISSOLVED, DISSOLVED] and done.pipeline_summary == "2 dissolved"
    assert done.pipelines[0].serving_seconds == 1.1
    # A plan cancelled before dispatch has no pipelines to dissolve.
    assert (
        ended(sp.ScalePlanStatus(), sp.PlanPhase.CANCELLED, "Superseded", "m", T0).pipelines == []
    )


def test_without_a_start_time_only_the_delay_is_measured() -> None:
    found = pipelines(SPEC, sp.ScalePlanStatus(), workers(heading("llama-3", 2.0, 2.25)), set())
    assert found[1].state == SERVING
    assert (found[1].covered_seconds, found[1].serving_seconds) == (None, None)
    assert found[1].serving_delay_seconds == 0.25


def test_a_stored_entry_for_another_head_starts_over() -> None:
    stored = with_pipelines(RUNNING, [sp.PipelineStatus(head="elsewhere", state=DISSOLVED)])
    assert states(tick(stored)) == [PLANNED, PLANNED]


def test_a_plan_without_pipelines_shows_none() -> None:
    plain = SPEC.model_copy(update={"execution_pipelines": []})
    s = aggregate(plain, RUNNING, workers(), T0)
    assert s.pipelines == [] and s.pipeline_summary == ""
    assert "pipelineSummary" not in s.to_api()


def test_every_pipeline_change_is_written_at_once() -> None:
    before = tick(RUNNING)
    after = tick(before, heading("llama-1", 1.0, 1.1))
    now = T0 + timedelta(seconds=2)
    assert should_patch(before, after, SPEC, last_patch=now, now=now, policy=POLICY)
    assert not should_patch(after, after, SPEC, last_patch=now, now=now, policy=POLICY)


def test_the_lifecycle_writes_the_running_plans_pipelines() -> None:
    """Through decide_plans: a running plan's status patch carries its pipelines as soon
    as the head serves, well inside the write throttle's interval."""
    view = PlanView("llama-g1-x", SPEC, tick(RUNNING, at=0), created=T0, last_patch=T0)
    spec = md(replicas=5)

    def decide(*ws: WorkerView, at: float) -> list[dict[str, Any]]:
        found = list(workers(*ws).values())
        pool = decide_pool(PoolInput(found, spec.host_copies))
        inp = PlansInput(REF, 1, spec, found, [view], TOPO, pool, BLOCKS)
        out = decide_plans(inp, T0 + timedelta(seconds=at), POLICY)
        return [p.status for p in out.patches if p.plan == view.name]

    assert decide(at=1) == [], "nothing changed: no write"
    (patch,) = decide(heading("llama-1", 1.2, 1.3), at=2)
    assert patch["pipelineSummary"] == "1 serving, 1 planned"
    assert patch["pipelines"][0] == {
        "head": "llama-1",
        "state": "Serving",
        "coveredSeconds": 1.2,
        "servingSeconds": 1.3,
        "servingDelaySeconds": 0.1,
    }


def view_of(status: dict[str, Any] | None) -> WorkerView:
    pod = PodView.of(
        {
            "metadata": {"name": "llama-1", "creationTimestamp": "2026-11-22T11:00:00Z"},
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Running", "podIP": "10.1.0.7"},
        }
    )
    typed = WorkerStatus.model_validate({"pod": "llama-1"} | status) if status else None
    return WorkerView.of(pod, typed)


def test_worker_view_reads_mode_and_the_pipeline_it_heads() -> None:
    pipeline = {"stages": ["10.0.0.2:9000"], "localLayers": [0, 4], "coveredAt": 5.0}
    head = view_of({"mode": "head", "engine": "serving", "pipeline": pipeline | {"servingAt": 5.2}})
    assert (head.mode, head.heads_pipeline, head.covered_at, head.serving_at) == (
        ServingMode.HEAD,
        True,
        5.0,
        5.2,
    )
    stage = view_of({"mode": "stage", "stage": {"layers": [4, 8], "coveredAt": 4.0}})
    assert (stage.mode, stage.heads_pipeline, stage.covered_at) == (ServingMode.STAGE, False, None)
    unread = view_of(None)
    assert (unread.mode, unread.heads_pipeline) == (None, False)


def test_instance_modes_are_the_workers_serving_modes() -> None:
    assert [m.value for m in InstanceMode] == [m.value for m in ServingMode]
