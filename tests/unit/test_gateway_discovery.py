"""Kubernetes discovery's pure mapping and the load report's statistics."""

from __future__ import annotations

from types import SimpleNamespace

from cascade_gateway.discovery import PodView, backends_from_pods, pod_url, worker_selector
from cascade_gateway.kube import list_backends, pod_view
from cascade_gateway.loadreport import RecentWindow, class_load, percentile


def test_selector_uses_the_operator_labels() -> None:
    assert worker_selector("tiny") == (
        "app.kubernetes.io/component=worker,cascade.dev/deployment=tiny"
    )


def test_running_pods_with_ips_become_backends() -> None:
    pods = [
        PodView("a", "Running", "10.0.0.2"),
        PodView("b", "Running", "10.0.0.1"),
        PodView("c", "Pending", "10.0.0.3"),
        PodView("d", "Running", ""),
        PodView("e", "Running", "10.0.0.4", deleting=True),
        PodView("f", "Succeeded", "10.0.0.5"),
        PodView("g", "Running", "10.0.0.1"),  # duplicate IP (host network): one backend
    ]
    assert backends_from_pods(pods) == ["http://10.0.0.1:8080", "http://10.0.0.2:8080"]
    assert backends_from_pods([]) == []
    assert pod_url("fd00::1", 9000) == "http://[fd00::1]:9000"


def k8s_pod(name: str, phase: str | None, ip: str | None, deleting: bool = False) -> object:
    return SimpleNamespace(
        metadata=SimpleNamespace(name=name, deletion_timestamp="now" if deleting else None),
        status=SimpleNamespace(phase=phase, pod_ip=ip),
    )


def test_client_objects_map_to_pod_views() -> None:
    assert pod_view(k8s_pod("a", "Running", "10.1.1.1")) == PodView("a", "Running", "10.1.1.1")
    assert pod_view(k8s_pod("b", None, None, deleting=True)) == PodView("b", "", "", True)

    class FakeApi:
        def __init__(self) -> None:
            self.calls: list[tuple[str, str]] = []

        def list_namespaced_pod(self, namespace: str, label_selector: str) -> object:
            self.calls.append((namespace, label_selector))
            return SimpleNamespace(
                items=[k8s_pod("a", "Running", "10.1.1.1"), k8s_pod("b", "Pending", None)]
            )

    api = FakeApi()
    assert list_backends(api, "ns", "tiny") == ["http://10.1.1.1:8080"]
    assert api.calls == [("ns", worker_selector("tiny"))]


def test_percentile_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 90) == 3.0
    values = [float(v) for v in range(1, 11)]
    assert (percentile(values, 50), percentile(values, 90), percentile(values, 100)) == (
        5.0, 9.0, 10.0
    )  # fmt: skip


def test_recent_window_forgets_old_samples() -> None:
    window = RecentWindow(window=10.0, cap=3)
    for t in range(5):
        window.add(float(t), float(t))
    assert window.values(now=4.0) == [2.0, 3.0, 4.0]  # capped
    assert window.values(now=13.5) == [4.0]
    load = class_load(2, 1, 8, [0.1, 0.2, 0.3], [])
    assert (load.queued, load.in_flight, load.queue_limit) == (2, 1, 8)
    assert (load.ttft_p50_s, load.ttft_p90_s, load.queue_wait_p50_s) == (0.2, 0.3, None)
