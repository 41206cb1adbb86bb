"""`cascade top`'s snapshot: roles, modes, gateway queues and plan progress from the
objects the API server and the gateways return (no cluster)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cascade_cli.top_model import build_snapshot, gateway_view, plan_view
from cascade_protocol.gateway_load import ClassLoad, GatewayLoad

NOW = datetime(2026, 11, 25, 12, 0, 30, tzinfo=UTC)


def md(name: str = "llama", ns: str = "demo", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": ns},
        "spec": {"model": {"uri": "file:///m"}, "replicas": 3},
        "status": status,
    }


def pod(
    name: str,
    component: str = "worker",
    role: str | None = None,
    ready: bool = False,
    deleting: bool = False,
    ip: str | None = None,
) -> dict[str, Any]:
    labels = {"cascade.dev/deployment": "llama", "app.kubernetes.io/component": component}
    if role:
        labels["cascade.dev/role"] = role
    meta: dict[str, Any] = {"name": name, "namespace": "demo", "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-25T12:00:00Z"
    cond = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"metadata": meta, "status": {"phase": "Running", "podIP": ip, "conditions": cond}}


def load(queued: int, in_flight: int, p50: float | None, p99: float | None) -> GatewayLoad:
    cl = ClassLoad(
        queued=queued, in_flight=in_flight, queue_limit=100, ttft_p50_s=p50, ttft_p99_s=p99
    )
    return GatewayLoad(
        model="m", deployment="llama", draining=False, backends_total=3, backends_ready=2,
        tokens_per_s=0.0, classes={"interactive": cl, "batch": cl}, backends=[],
    )  # fmt: skip


def instance(pod: str, phase: str, mode: str | None) -> dict[str, Any]:
    return {"pod": pod, "phase": phase, **({"mode": mode} if mode else {})}


def test_roles_come_from_pod_labels_and_readiness_from_the_instance_phase() -> None:
    status: dict[str, Any] = {
        "readyReplicas": 1,
        "loadingReplicas": 2,
        "instances": [
            instance("llama-0", "Ready", "local"),
            instance("llama-1", "Loading", "loading"),
            instance("llama-2", "Loading", None),
        ],
    }
    pods = [
        pod("llama-0", role="interactive", ready=False),  # the instance phase wins
        pod("llama-1"),  # unlabelled: mixed
        pod("llama-2", role="batch", ready=True),  # listed Loading: not ready
        pod("llama-3", role="batch", ready=True),  # not in status yet: the pod's condition
        pod("llama-4", role="batch", ready=True, deleting=True),  # going: left out
        pod("llama-gateway-x", component="gateway", ready=True),
    ]
    snap = build_snapshot("demo", NOW, [md(**status)], pods, [], {})
    (d,) = snap.deployments
    assert (d.spec_replicas, d.ready, d.loading) == (3, 1, 2)
    assert d.roles == {"interactive": (1, 1), "mixed": (0, 1), "batch": (1, 2)}
    assert d.modes == {"local": 1, "loading": 1, "unknown": 1}
    assert d.gateway.error == "no gateway pod"


def test_autoscaler_phrase_names_the_reason_and_the_recommendation() -> None:
    ours = {"owner": "Cascade", "reason": "InteractiveBackpressure", "desiredReplicas": 4}
    theirs = {"owner": "External", "reason": "spec.replicas is owned externally ..."}
    cascade: dict[str, Any] = {"autoscaler": ours}
    external: dict[str, Any] = {"autoscaler": theirs}
    snap = build_snapshot(
        "demo", NOW, [md("a", **cascade), md("b", **external), md("c")], [], [], {}
    )
    assert [d.autoscaler for d in snap.deployments] == [
        "InteractiveBackpressure -> 4",
        "external (kubectl scale, HPA, KEDA)",
        "",
    ]


def test_gateway_pods_add_up_queues_and_take_the_worst_latency() -> None:
    g = gateway_view([load(2, 1, 0.010, 0.050), load(3, 4, 0.020, None), "gateway x: down"])
    assert not g.error
    inter = g.classes["interactive"]
    assert (inter.queued, inter.in_flight) == (5, 5)
    assert (inter.ttft_p50_s, inter.ttft_p99_s) == (0.020, 0.050)
    assert (g.backends_ready, g.backends_total) == (2, 3)
    assert gateway_view(["gateway x: unreachable (timed out)"]).error.endswith("(timed out)")


def test_a_malformed_deployment_is_a_row_with_its_error_not_a_crash() -> None:
    bad = md("bad")
    bad["spec"]["replicas"] = "three"
    snap = build_snapshot("demo", NOW, [bad, md("good")], [], [], {})
    assert [d.name for d in snap.deployments] == ["bad", "good"]
    assert snap.deployments[0].error.startswith("unreadable: replicas")


def plan(phase: str = "Running", **status: Any) -> dict[str, Any]:
    blocks = [
        {"index": i, "layerStart": i, "layerEnd": i + 1, "bytes": 1000, "checksum": "x"}
        for i in range(4)
    ]
    return {
        "metadata": {"name": "llama-g2-abc", "namespace": "demo",
                     "creationTimestamp": "2026-11-25T12:00:00Z"},
        "spec": {
            "deployment": "llama", "modelDigest": "sha256:0", "blocks": blocks,
            "sources": [{"pod": "llama-0", "tier": "gpu"}],
            "targets": ["llama-1", "llama-2"], "strategy": "chain",
            "predictedCompletionSeconds": 20.0,
            "predictions": [{"pod": "llama-1", "completeSeconds": 19.5}],
        },
        "status": {"phase": phase, **status},
    }  # fmt: skip


def test_plan_progress_is_bytes_received_of_the_models_bytes() -> None:
    status: dict[str, Any] = {
        "startTime": "2026-11-25T12:00:20Z",
        "targets": [{"pod": "llama-1", "blocksReceived": 1, "bytesReceived": 1500}],
    }
    p = plan_view(plan(**status), NOW)
    assert p.in_flight and p.elapsed_s == 10.0 and p.predicted_s == 20.0
    one, two = p.targets
    assert (one.bytes_total, one.blocks_total, one.predicted_s) == (4000, 4, 19.5)
    assert one.fraction == 1500 / 4000
    assert (two.bytes_received, two.fraction, two.predicted_s) == (0, 0.0, None)


def test_a_finished_plan_has_its_measured_seconds_and_stops_the_clock() -> None:
    status: dict[str, Any] = {
        "startTime": "2026-11-25T12:00:00Z",
        "completionTime": "2026-11-25T12:00:18Z",
        "measuredCompletionSeconds": 17.2,
        "targets": [
            {"pod": "llama-1", "complete": True, "blocksReceived": 4, "transferSeconds": 17.0}
        ],
    }
    p = plan_view(plan("Completed", **status), NOW)
    assert not p.in_flight
    assert (p.elapsed_s, p.measured_s) == (18.0, 17.2)
    assert p.targets[0].fraction == 1.0 and p.targets[0].measured_s == 17.0


def test_plans_sort_oldest_first_and_a_malformed_one_keeps_its_phase() -> None:
    later, bad = plan(), plan()
    later["metadata"] |= {"name": "z", "creationTimestamp": "2026-11-25T12:00:05Z"}
    bad["metadata"] |= {"name": "y", "creationTimestamp": "2026-11-25T11:00:00Z"}
    bad["spec"]["strategy"] = "teleport"
    snap = build_snapshot("demo", NOW, [], [], [later, plan(), bad], {})
    assert [p.name for p in snap.plans] == ["y", "llama-g2-abc", "z"]
    assert snap.plans[0].in_flight and snap.plans[0].error.startswith("unreadable: strategy")
