"""The operator's pure decision: scaling, idempotency, invalid specs, conditions, events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cascade_operator.config import OperatorConfig
from cascade_operator.reconcile import Decision, decide, free_indices, scale_down_victims
from cascade_operator.view import GatewayView, MdRef, Observed, PodView

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
REF = MdRef(name="llama", namespace="models", uid="uid-1")
CFG = OperatorConfig()
GW_UP = GatewayView(deployment_exists=True, service_exists=True, available_replicas=1)


def pod(index: int, *, ready: bool = True, node: str | None = "n0", **kw: Any) -> PodView:
    defaults: dict[str, Any] = {"phase": "Running", "terminating": False}
    return PodView(name=f"llama-{index}", index=index, node=node, ready=ready, **(defaults | kw))


def observe(replicas: int = 1, pods: list[PodView] | None = None, **spec: Any) -> Observed:
    return Observed(
        ref=REF,
        generation=2,
        spec={"model": {"uri": "file:///models/tiny"}, "replicas": replicas, **spec},
        status={"observedGeneration": 2},
        pods=pods or [],
        gateway=GW_UP,
    )


def conditions(d: Decision) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in d.status["conditions"]}


GATEWAY_KINDS = ["ServiceAccount", "Role", "RoleBinding", "Deployment", "Service"]


def test_fresh_deployment_creates_pods_and_gateway() -> None:
    obs = observe(replicas=2)
    obs = Observed(**{**obs.__dict__, "status": {}, "gateway": GatewayView()})
    d = decide(obs, CFG, NOW)
    assert [m["metadata"]["name"] for m in d.create_pods] == ["llama-0", "llama-1"]
    assert [m["kind"] for m in d.gateway] == GATEWAY_KINDS
    assert d.status["selector"] == "cascade.dev/deployment=llama,app.kubernetes.io/component=worker"
    assert conditions(d)["Progressing"]["reason"] == "ScalingUp"
    assert conditions(d)["Available"]["status"] == "False"


def test_converged_is_a_no_op_and_available() -> None:
    d = decide(observe(replicas=2, pods=[pod(0), pod(1)]), CFG, NOW)
    assert (d.create_pods, d.delete_pods, d.gateway) == ([], [], [])
    cond = conditions(d)
    assert cond["Available"]["status"] == "True"
    assert cond["Progressing"]["status"] == "False"
    assert cond["Degraded"]["status"] == "False"
    assert d.status["readyReplicas"] == 2 and d.status["replicas"] == 2


def test_repeated_decision_is_stable() -> None:
    """Feeding the status back in changes nothing: no churn, no new events."""
    first = decide(observe(replicas=1, pods=[pod(0)]), CFG, NOW)
    again_obs = Observed(**{**observe(replicas=1, pods=[pod(0)]).__dict__, "status": first.status})
    second = decide(again_obs, CFG, NOW + timedelta(minutes=5))
    assert second.status == first.status
    assert second.events == []


def test_scale_up_fills_lowest_free_indices_even_around_terminating() -> None:
    pods = [pod(0), pod(1, terminating=True), pod(3)]
    d = decide(observe(replicas=4, pods=pods), CFG, NOW)
    assert [m["metadata"]["name"] for m in d.create_pods] == ["llama-2", "llama-4"]


def test_scale_down_prefers_unplaced_then_loading_then_highest_index() -> None:
    pods = [pod(0), pod(1), pod(2, ready=False), pod(3, node=None, ready=False, phase="Pending")]
    d = decide(observe(replicas=1, pods=pods), CFG, NOW)
    assert d.delete_pods == ["llama-3", "llama-2", "llama-1"]
    assert any(e.reason == "ScalingDown" for e in d.events)


def test_failed_pods_are_replaced() -> None:
    pods = [pod(0), pod(1, ready=False, crash_looping=True)]
    d = decide(observe(replicas=2, pods=pods), CFG, NOW)
    assert d.delete_pods == ["llama-1"]
    assert [m["metadata"]["name"] for m in d.create_pods] == ["llama-2"]
    assert conditions(d)["Degraded"]["reason"] == "InstancesFailing"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"scaling": {"minReplicas": 5, "maxReplicas": 2}}, "spec.scaling.minReplicas"),
        ({"scaling": {"maxReplicas": 2}}, "spec.replicas"),
        ({"multicast": {"blocks": 2, "k": 4}}, "spec.multicast.k"),
    ],
)
def test_invariant_violation_marks_degraded_and_keeps_pods(
    spec: dict[str, Any], field: str
) -> None:
    d = decide(observe(replicas=3, pods=[pod(0)], **spec), CFG, NOW)
    assert (d.create_pods, d.delete_pods, d.gateway) == ([], [], [])
    degraded = conditions(d)["Degraded"]
    assert degraded["status"] == "True" and degraded["reason"] == "InvalidSpec"
    assert field in degraded["message"]
    assert any(e.type == "Warning" and e.reason == "InvalidSpec" for e in d.events)


def test_schema_level_error_names_the_field() -> None:
    d = decide(observe(replicas=1, engine={"maxBatchSize": "lots"}), CFG, NOW)
    assert "spec.engine.maxBatchSize" in conditions(d)["Degraded"]["message"]


def test_unschedulable_pod_is_reported() -> None:
    stuck = pod(1, node=None, ready=False, phase="Pending", unschedulable="0/4 nodes: gpu")
    d = decide(observe(replicas=2, pods=[pod(0), stuck]), CFG, NOW)
    progressing = conditions(d)["Progressing"]
    assert progressing["reason"] == "Unschedulable" and "0/4 nodes" in progressing["message"]


def test_available_needs_gateway_and_minimum() -> None:
    obs = observe(replicas=3, pods=[pod(0), pod(1, ready=False), pod(2, ready=False)])
    assert conditions(decide(obs, CFG, NOW))["Available"]["status"] == "True"
    no_gw = Observed(**{**obs.__dict__, "gateway": GatewayView(True, True, 0)})
    assert conditions(decide(no_gw, CFG, NOW))["Available"]["status"] == "False"


def test_scaled_to_zero_is_not_available() -> None:
    d = decide(observe(replicas=0, scaling={"minReplicas": 0}), CFG, NOW)
    assert conditions(d)["Available"]["reason"] == "ScaledToZero"


def test_condition_transition_time_only_moves_on_flip() -> None:
    first = decide(observe(replicas=1, pods=[pod(0, ready=False)]), CFG, NOW)
    later = NOW + timedelta(minutes=1)
    obs = Observed(**{**observe(replicas=1, pods=[pod(0)]).__dict__, "status": first.status})
    second = decide(obs, CFG, later)
    c1, c2 = conditions(first), conditions(second)
    assert c2["Available"]["lastTransitionTime"] != c1["Available"]["lastTransitionTime"]
    assert c2["Degraded"]["lastTransitionTime"] == c1["Degraded"]["lastTransitionTime"]


def test_spec_change_refreshes_gateway() -> None:
    obs = Observed(**{**observe(replicas=1, pods=[pod(0)]).__dict__, "generation": 3})
    assert [m["kind"] for m in decide(obs, CFG, NOW).gateway] == GATEWAY_KINDS


def test_helpers() -> None:
    assert free_indices([pod(0), pod(2)], 3) == [1, 3, 4]
    assert [p.name for p in scale_down_victims([pod(0), pod(5)], 1)] == ["llama-5"]


def test_event_types_flag_only_bad_news() -> None:
    fresh = decide(observe(replicas=1, pods=[pod(0, ready=False)]), CFG, NOW)
    assert {e.type for e in fresh.events} == {"Normal"}  # a new deployment is not bad news
    up = decide(
        Observed(**{**observe(replicas=1, pods=[pod(0)]).__dict__, "status": fresh.status}),
        CFG,
        NOW,
    )
    assert [(e.type, e.reason) for e in up.events if e.reason == "ReplicasReady"] == [
        ("Normal", "ReplicasReady")
    ]
    lost = decide(
        Observed(
            **{**observe(replicas=1, pods=[pod(0, ready=False)]).__dict__, "status": up.status}
        ),
        CFG,
        NOW,
    )
    assert ("Warning", "MinimumReplicasUnavailable") in [(e.type, e.reason) for e in lost.events]
