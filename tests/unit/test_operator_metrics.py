"""The operator's series: what a reconcile, a tick and a plan's end leave in /metrics.

Driven through the controller against the in-memory API server where the controller
decides what to report, and through `OperatorMetrics` directly for the label rules.
"""

from __future__ import annotations

import math

import pytest
from controller_world import reconcile, run_pod, serving, world
from operator_fixtures import REF, pod
from prometheus_client import CollectorRegistry, generate_latest

from cascade_api.scaleplan import PlanPhase, PlanStrategy, ScalePlanSpec, ScalePlanStatus
from cascade_autoscaler.cause import Cause
from cascade_autoscaler.policy_types import Condition, Recommendation, Roles
from cascade_operator.metrics import OperatorMetrics, instance_rows
from cascade_operator.weights.ended import plan_ends
from cascade_operator.weights.lifecycle import StatusPatch
from cascade_operator.weights.plans import PlanView
from cascade_protocol.roles import InstanceRole
from cascade_protocol.status import (
    ServingMode,
    StartupInfo,
    StartupStage,
    WeightsFrom,
    WorkerStatus,
)

MD = {"namespace": REF.namespace, "deployment": REF.name}


def value(metrics: OperatorMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, {**MD, **labels})


def test_a_reconcile_counts_and_reports_instances_by_role_mode_and_phase() -> None:
    controller, cluster, workers = world(2)
    reconcile(controller)  # creates the pods
    reconcile(controller)  # sees them pending
    m = controller.metrics
    assert value(m, "cascade_operator_reconciles_total") == 2.0
    assert value(m, "cascade_operator_reconcile_duration_seconds_count") == 2.0
    assert value(m, "cascade_operator_instances", role="none", mode="unknown", phase="Pending") == 2
    run_pod(cluster, "llama-0", "10.0.0.1", ready=True)
    run_pod(cluster, "llama-1", "10.0.0.2", ready=False)
    workers.by_ip["10.0.0.1"] = serving("llama-0").model_copy(update={"mode": "local"})
    workers.by_ip["10.0.0.2"] = WorkerStatus(pod="llama-1", phase="idle", mode="loading")
    reconcile(controller)
    assert value(m, "cascade_operator_instances", role="none", mode="local", phase="Ready") == 1
    assert value(m, "cascade_operator_instances", role="none", mode="loading", phase="Running") == 1
    # the label set of the first reconcile is gone, not left at its old count
    assert (
        value(m, "cascade_operator_instances", role="none", mode="unknown", phase="Pending") is None
    )
    assert value(m, "cascade_operator_reconcile_errors_total") == 0.0


def test_a_reconcile_that_raises_is_counted_as_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    controller, _, _ = world(1)

    def broken(*_: object) -> None:
        raise RuntimeError("API went away")

    monkeypatch.setattr(controller.observer, "_authorize", broken)
    with pytest.raises(RuntimeError):
        reconcile(controller)
    assert value(controller.metrics, "cascade_operator_reconcile_errors_total") == 1.0
    assert value(controller.metrics, "cascade_operator_reconciles_total") == 1.0


def rec(cause: Cause, ibp: float | None) -> Recommendation:
    roles = Roles(2, 1, 1)
    ok = Condition(True, "ReadyForNewScale")
    return Recommendation(
        replicas=roles.total, roles=roles, write=False, reason="r", able_to_scale=ok,
        scaling_active=ok, scaling_limited=ok, theta=0.7, cause=cause, ibp=ibp, bbp=3,
    )  # fmt: skip


def test_the_autoscalers_reason_is_one_of_a_closed_set_and_only_the_last_is_set() -> None:
    m = OperatorMetrics(CollectorRegistry())
    m.autoscaled(REF, rec(Cause.INTERACTIVE_BACKPRESSURE, 0.93))
    m.autoscaled(REF, rec(Cause.STEADY, None))
    reasons = {
        c.value: value(m, "cascade_operator_autoscaler_reason", reason=c.value) for c in Cause
    }
    assert reasons == {c.value: 1.0 if c is Cause.STEADY else 0.0 for c in Cause}
    decisions = "cascade_operator_autoscaler_decisions_total"
    assert value(m, decisions, reason="InteractiveBackpressure") == 1.0
    assert value(m, decisions, reason="Steady") == 1.0
    ibp = value(m, "cascade_operator_autoscaler_backpressure", signal="interactive")
    assert ibp is not None and math.isnan(ibp)  # no instances: no IBP
    assert value(m, "cascade_operator_autoscaler_backpressure", signal="batch") == 3.0
    desired = "cascade_operator_autoscaler_desired_replicas"
    assert [value(m, desired, role=r.value) for r in InstanceRole] == [2.0, 1.0, 1.0]
    m.forget(REF.namespace, REF.name)
    text = generate_latest(m.registry).decode()
    assert "cascade_operator_autoscaler_reason{" not in text
    assert "cascade_operator_autoscaler_desired_replicas{" not in text
    assert 'reason="Steady"} 1.0' in text  # the counter stays: rates over the past


def test_startup_stages_are_observed_once_per_instance_when_it_serves() -> None:
    m = OperatorMetrics(CollectorRegistry())
    p = pod(0, uid="u0")
    starting = StartupInfo(process_started_at=0.0, stages={StartupStage.PROCESS: 1.5})
    m.observed(REF, [p], {}, {p.name: starting})  # not serving yet: nothing
    stage = "cascade_operator_startup_stage_seconds_count"
    assert value(m, stage, stage="process", weights_from="peer") == 0.0  # exists, at 0
    ready = starting.model_copy(
        update={
            "stages": {StartupStage.PROCESS: 1.5, StartupStage.WEIGHTS: 4.0},
            "weights_from": WeightsFrom.PEER,
            "ready_at": 10.0,
        }
    )
    for _ in range(3):
        m.observed(REF, [p], {p.name: ServingMode.LOCAL}, {p.name: ready})
    assert value(m, stage, stage="process", weights_from="peer") == 1.0
    assert (
        value(m, "cascade_operator_startup_stage_seconds_sum", stage="weights", weights_from="peer")
        == 4.0
    )


def test_instance_rows_use_the_role_label_only_when_set() -> None:
    pods = [
        pod(0, role=InstanceRole.INTERACTIVE, labelled=True),
        pod(1),
        pod(2, terminating=True),
        pod(3, phase="Pending", ready=False, ip=None),
    ]
    rows = instance_rows(pods, {"llama-0": ServingMode.HEAD})
    assert rows == {
        ("interactive", "head", "Ready"): 1,
        ("none", "unknown", "Ready"): 1,
        ("none", "unknown", "Terminating"): 1,
        ("none", "unknown", "Pending"): 1,
    }


SPEC = ScalePlanSpec(
    deployment="llama", model_digest="m1", targets=["llama-1"], strategy=PlanStrategy.CHAIN,
    predicted_completion_seconds=9.5,
)  # fmt: skip


def final(phase: PlanPhase, measured: float | None = None) -> dict[str, object]:
    return ScalePlanStatus(phase=phase, measured_completion_seconds=measured).to_api()


def test_a_plan_ends_once_when_its_written_status_is_final() -> None:
    running = PlanView("a", SPEC, ScalePlanStatus(phase=PlanPhase.RUNNING))
    done = PlanView("b", SPEC, ScalePlanStatus(phase=PlanPhase.COMPLETED))
    patches = [
        StatusPatch("a", final(PlanPhase.COMPLETED, 8.0)),
        StatusPatch("b", final(PlanPhase.COMPLETED, 8.0)),  # was final already
    ]
    ends = plan_ends([running, done], patches)
    assert [(e.strategy, e.outcome, e.predicted_s, e.measured_s) for e in ends] == [
        ("chain", "Completed", 9.5, 8.0)
    ]
    assert plan_ends([running], patches, unwritten={"a"}) == []
    assert plan_ends([running], [StatusPatch("a", final(PlanPhase.RUNNING))]) == []
    m = OperatorMetrics(CollectorRegistry())
    m.plans_ended(REF, [*ends, *plan_ends([running], [StatusPatch("a", final(PlanPhase.FAILED))])])
    plans = "cascade_operator_scaleplans_total"
    assert value(m, plans, strategy="chain", outcome="Completed") == 1.0
    assert value(m, plans, strategy="chain", outcome="Failed") == 1.0
    transfer = "cascade_operator_scaleplan_transfer_seconds_sum"
    assert value(m, transfer, strategy="chain", estimate="predicted") == 9.5
    assert value(m, transfer, strategy="chain", estimate="measured") == 8.0
