"""Kubernetes discovery's pure mapping (URLs, pod names, role labels) and the pool."""

from __future__ import annotations

from types import SimpleNamespace

from cascade_api.constants import LABEL_ROLE
from cascade_gateway.backends import BackendPool
from cascade_gateway.discovery import (
    Discovered,
    PodView,
    backends_from_pods,
    pod_url,
    role_of,
    worker_selector,
)
from cascade_gateway.kube import list_backends, pod_view
from cascade_gateway.loadreport import RecentWindow, class_load
from cascade_protocol.generate import RequestClass
from cascade_protocol.load import LoadReport
from cascade_protocol.roles import InstanceRole

INTERACTIVE, MIXED, BATCH = InstanceRole.INTERACTIVE, InstanceRole.MIXED, InstanceRole.BATCH


def test_selector_uses_the_operator_labels() -> None:
    assert worker_selector("tiny") == (
        "app.kubernetes.io/component=worker,cascade.dev/deployment=tiny"
    )


def test_running_pods_with_ips_become_backends() -> None:
    pods = [
        PodView("a", "Running", "10.0.0.2", role=BATCH),
        PodView("g", "Running", "10.0.0.1"),  # duplicate IP (host network): one backend
        PodView("c", "Pending", "10.0.0.3"),
        PodView("d", "Running", ""),
        PodView("e", "Running", "10.0.0.4", deleting=True),
        PodView("f", "Succeeded", "10.0.0.5"),
        PodView("b", "Running", "10.0.0.1", role=INTERACTIVE),
    ]
    assert backends_from_pods(pods) == [
        Discovered("http://10.0.0.1:8080", "b", INTERACTIVE),  # the first pod by name
        Discovered("http://10.0.0.2:8080", "a", BATCH),
    ]
    assert backends_from_pods([]) == []
    assert pod_url("fd00::1", 9000) == "http://[fd00::1]:9000"


def test_role_label_values() -> None:
    assert LABEL_ROLE == "cascade.dev/role"
    assert role_of({LABEL_ROLE: "interactive"}) is INTERACTIVE
    assert role_of({LABEL_ROLE: "batch", "other": "x"}) is BATCH
    assert role_of({LABEL_ROLE: "mixed"}) is MIXED
    # No label, no labels at all, an empty or unknown value: mixed (serves both classes).
    assert role_of({}) is role_of(None) is role_of({LABEL_ROLE: ""}) is MIXED
    assert role_of({LABEL_ROLE: "Batch!"}) is MIXED


def k8s_pod(
    name: str,
    phase: str | None,
    ip: str | None,
    deleting: bool = False,
    labels: dict[str, str] | None = None,
) -> object:
    return SimpleNamespace(
        metadata=SimpleNamespace(
            name=name, deletion_timestamp="now" if deleting else None, labels=labels
        ),
        status=SimpleNamespace(phase=phase, pod_ip=ip),
    )


def test_client_objects_map_to_pod_views() -> None:
    assert pod_view(k8s_pod("a", "Running", "10.1.1.1")) == PodView("a", "Running", "10.1.1.1")
    assert pod_view(k8s_pod("b", None, None, deleting=True)) == PodView("b", "", "", True)
    labelled = k8s_pod("c", "Running", "10.1.1.3", labels={LABEL_ROLE: "batch"})
    assert pod_view(labelled).role is BATCH

    class FakeApi:
        def __init__(self) -> None:
            self.calls: list[tuple[str, str]] = []

        def list_namespaced_pod(self, namespace: str, label_selector: str) -> object:
            self.calls.append((namespace, label_selector))
            return SimpleNamespace(
                items=[
                    k8s_pod("a", "Running", "10.1.1.1", labels={LABEL_ROLE: "interactive"}),
                    k8s_pod("b", "Pending", None),
                ]
            )

    api = FakeApi()
    assert list_backends(api, "ns", "tiny") == [
        Discovered("http://10.1.1.1:8080", "a", INTERACTIVE)
    ]
    assert api.calls == [("ns", worker_selector("tiny"))]


def test_relabel_keeps_the_backend_state() -> None:
    pool = BackendPool(["http://static"])
    pool.set_discovered([Discovered("http://p1", "pod-1", MIXED)])
    pool.update("http://p1", LoadReport(instance="p1", model="m", ready=True, max_batch=4))
    pool.reserve("http://p1", RequestClass.INTERACTIVE)
    pool.reserve("http://p1", RequestClass.BATCH)
    # The operator relabels pod-1 batch: the next listing changes its role, nothing else.
    pool.set_discovered([Discovered("http://p1", "pod-1", BATCH)])
    [static, p1] = pool.states()
    assert (static.pod, static.role, static.static) == ("", MIXED, True)
    assert (p1.pod, p1.role) == ("pod-1", BATCH)
    assert p1.report is not None and p1.report.max_batch == 4
    assert (p1.in_flight, p1.interactive_in_flight) == (2, 1)
    assert pool.views()[1].role is BATCH
    pool.release("http://p1", RequestClass.INTERACTIVE)
    assert (p1.in_flight, p1.interactive_in_flight) == (1, 0)
    # A static URL also listed by discovery stays static and mixed.
    pool.set_discovered([Discovered("http://static", "pod-s", BATCH)])
    assert [(s.url, s.pod, s.role) for s in pool.states()] == [("http://static", "", MIXED)]


def test_recent_window_forgets_old_samples() -> None:
    window = RecentWindow(window=10.0, cap=3)
    for t in range(5):
        window.add(float(t), float(t))
    assert window.values(now=4.0) == [2.0, 3.0, 4.0]  # capped
    assert window.values(now=13.5) == [4.0]
    load = class_load(2, 1, 8, [0.1, 0.2, 0.3], [])
    assert (load.queued, load.in_flight, load.queue_limit) == (2, 1, 8)
    assert (load.ttft_p50_s, load.ttft_p90_s, load.queue_wait_p50_s) == (0.2, 0.3, None)
    assert load.ttft_p99_s == 0.3
