"""The status assembler: counts, instances with the blocks each worker holds and its
serving mode, the conditions, the lifecycle's Planned condition and currentPlan,
transition events told once, no churn on a repeated reconcile, and the merge patch with
explicit nulls."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from operator_fixtures import GW_UP, NOW, pod

from cascade_api.base import Condition, ConditionStatus
from cascade_api.modeldeployment import ModelDeploymentStatus
from cascade_operator.events import transition_events
from cascade_operator.observed import GatewayView, PodView
from cascade_operator.spec import parse_spec
from cascade_operator.status import PlanState, StatusInput, StatusUpdate, assemble
from cascade_protocol.status import ServingMode


def status_of(
    pods: Sequence[PodView],
    *,
    stored: dict[str, Any] | None = None,
    now: datetime = NOW,
    gateway: GatewayView = GW_UP,
    generation: int = 2,
    **fields: Any,
) -> StatusUpdate:
    spec = {"model": {"uri": "file:///m"}, "replicas": 1} | fields.pop("spec", {})
    inp = StatusInput(
        previous=ModelDeploymentStatus.model_validate(stored or {}),
        generation=generation,
        parsed=parse_spec(spec),
        pods=pods,
        gateway=gateway,
        selector="sel",
        endpoint="http://llama-gateway.models:8000",
        **fields,
    )
    return assemble(inp, now)


def conds(update: StatusUpdate) -> dict[str, Condition]:
    return {c.type: c for c in update.status.conditions}


def planned(ok: bool, reason: str) -> Condition:
    status = ConditionStatus.TRUE if ok else ConditionStatus.FALSE
    return Condition(type="Planned", status=status, reason=reason, message="m")


def test_converged_is_available_and_counts_instances() -> None:
    up = status_of([pod(0), pod(1)], spec={"replicas": 2})
    c = conds(up)
    assert (c["Available"].status, c["Progressing"].status, c["Degraded"].status) == (
        ConditionStatus.TRUE,
        ConditionStatus.FALSE,
        ConditionStatus.FALSE,
    )
    api = up.status.to_api()
    assert (api["replicas"], api["readyReplicas"], api["selector"]) == (2, 2, "sel")
    assert api["observedGeneration"] == 2


def test_instances_carry_the_blocks_each_worker_holds() -> None:
    first = status_of([pod(0), pod(1, ready=False)], blocks={"llama-0": 8, "llama-1": 3})
    assert [(i.pod, i.blocks_loaded) for i in first.status.instances] == [
        ("llama-0", 8),
        ("llama-1", 3),
    ]
    # A worker that did not answer this tick keeps the figure last written.
    again = status_of([pod(0), pod(1)], stored=first.status.to_api(), blocks={"llama-0": 8})
    assert [i.blocks_loaded for i in again.status.instances] == [8, 3]


def test_instances_carry_each_workers_serving_mode() -> None:
    modes = {"llama-0": ServingMode.HEAD, "llama-1": ServingMode.STAGE}
    first = status_of([pod(0), pod(1), pod(2)], modes=modes)
    assert [i.mode for i in first.status.instances] == ["head", "stage", None]
    assert "mode" not in first.status.to_api()["instances"][2]
    # A worker that did not answer this tick shows no mode (not the last one written).
    again = status_of([pod(0), pod(1)], stored=first.status.to_api(), modes={"llama-0": "local"})
    assert [i.mode for i in again.status.instances] == ["local", None]
    assert again.patch(first.status) is not None


def test_a_repeated_reconcile_writes_nothing_and_tells_nothing() -> None:
    first = status_of([pod(0)])
    second = status_of([pod(0)], stored=first.status.to_api(), now=NOW + timedelta(minutes=5))
    assert second.patch(first.status) is None
    assert second.events == []


def test_transition_time_only_moves_on_flip() -> None:
    first = status_of([pod(0, ready=False)])
    second = status_of([pod(0)], stored=first.status.to_api(), now=NOW + timedelta(minutes=1))
    c1, c2 = conds(first), conds(second)
    assert c2["Available"].last_transition_time != c1["Available"].last_transition_time
    assert c2["Degraded"].last_transition_time == c1["Degraded"].last_transition_time


def test_invalid_spec_is_degraded_naming_the_field() -> None:
    up = status_of([pod(0)], spec={"scaling": {"minReplicas": 5, "maxReplicas": 2}})
    degraded = conds(up)["Degraded"]
    assert (degraded.status, degraded.reason) == (ConditionStatus.TRUE, "InvalidSpec")
    assert "spec.scaling.minReplicas" in degraded.message
    assert ("Warning", "InvalidSpec") in [(e.type, e.reason) for e in up.events]


def test_a_model_path_that_leaves_its_root_is_degraded_naming_the_segment() -> None:
    """What a 1.20 server with an older CRD stored: the operator refuses it too."""
    up = status_of([pod(0)], spec={"model": {"uri": "pvc://claim/../../etc"}})
    degraded = conds(up)["Degraded"]
    assert (degraded.status, degraded.reason) == (ConditionStatus.TRUE, "InvalidSpec")
    assert "spec.model.uri" in degraded.message and "a '..' path segment" in degraded.message


def test_unschedulable_and_failing_instances_are_reported() -> None:
    stuck = pod(1, node=None, ready=False, phase="Pending", unschedulable="0/4 nodes: gpu")
    progressing = conds(status_of([pod(0), stuck], spec={"replicas": 2}))["Progressing"]
    assert progressing.reason == "Unschedulable" and "0/4 nodes" in progressing.message
    failing = status_of([pod(0), pod(1, crash_looping=True)], spec={"replicas": 2})
    assert conds(failing)["Degraded"].reason == "InstancesFailing"


def test_available_needs_the_gateway_and_the_minimum() -> None:
    pods = [pod(0), pod(1, ready=False), pod(2, ready=False)]
    ok = conds(status_of(pods, spec={"replicas": 3}))["Available"]
    assert ok.status == ConditionStatus.TRUE
    no_gw = status_of(pods, spec={"replicas": 3}, gateway=GatewayView(True, True, 0))
    assert conds(no_gw)["Available"].status == ConditionStatus.FALSE
    zero = status_of([], spec={"replicas": 0, "scaling": {"minReplicas": 0}})
    assert conds(zero)["Available"].reason == "ScaledToZero"


def test_planned_and_current_plan_come_from_the_lifecycle() -> None:
    running = status_of([pod(0)], plans=PlanState(planned(True, "PlanActive"), "p1"))
    assert running.status.current_plan == "p1"
    assert conds(running)["Planned"].reason == "PlanActive"
    done = status_of(
        [pod(0)], stored=running.status.to_api(), plans=PlanState(planned(True, "UpToDate"), None)
    )
    patch = done.patch(running.status)
    assert patch is not None and patch["currentPlan"] is None  # a merge patch needs the null
    # The lifecycle did not run (invalid spec): what it last said stays.
    kept = status_of([pod(0)], stored=running.status.to_api(), plans=None)
    assert kept.status.current_plan == "p1" and "Planned" in conds(kept)


def test_event_types_flag_only_bad_news() -> None:
    fresh = status_of([pod(0, ready=False)])
    assert {e.type for e in fresh.events} == {"Normal"}  # a new deployment is not bad news
    up = status_of([pod(0)], stored=fresh.status.to_api())
    assert [(e.type, e.reason) for e in up.events if e.reason == "ReplicasReady"] == [
        ("Normal", "ReplicasReady")
    ]
    lost = status_of([pod(0, ready=False)], stored=up.status.to_api())
    assert ("Warning", "MinimumReplicasUnavailable") in [(e.type, e.reason) for e in lost.events]


def test_planned_transitions_are_told_once_and_only_bad_news() -> None:
    """Good news about planning is told by ScalePlan events; a refusal is a Warning, once."""
    ok = status_of([pod(0)], plans=PlanState(planned(True, "PlanCreated"), "p1"))
    assert not [e for e in ok.events if e.reason == "PlanCreated"]
    refused = status_of(
        [pod(0)], stored=ok.status.to_api(), plans=PlanState(planned(False, "NoSources"), None)
    )
    assert [(e.type, e.message) for e in refused.events if e.reason == "NoSources"] == [
        ("Warning", "Planned=False: m")
    ]
    again = status_of(
        [pod(0)],
        stored=refused.status.to_api(),
        plans=PlanState(planned(False, "NoSources"), None),
    )
    assert again.events == []


def test_transition_events_rule() -> None:
    old = [Condition(type="Available", status=ConditionStatus.TRUE, reason="A", message="")]
    new = [Condition(type="Available", status=ConditionStatus.FALSE, reason="B", message="x")]
    assert [(e.type, e.reason) for e in transition_events(old, new)] == [("Warning", "B")]
    assert transition_events(new, new) == []
