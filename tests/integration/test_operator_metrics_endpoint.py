"""Issue 14, acceptance 2: a real operator's /metrics on the local cluster.

An autoscaled deployment of two instances (the second gets its weights through a
ScalePlan) serves a few requests; the operator's `metrics` port then shows every series
docs/observability.md lists: reconciles, plans by strategy and outcome with predicted
and measured seconds, the autoscaler's desired replicas, backpressure, Θ and reason (a
closed set, one value at 1), instances by role, mode and phase, start-up stages.
"""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from integration_helpers import Namespace, complete, model_deployment, namespace_with_operator
from prometheus_client.parser import text_string_to_metric_families

from cascade_autoscaler.cause import Cause
from cascade_dev.testing import DevCluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.nodes(2)]

MD = "watched"
SERIES = (
    "cascade_operator_reconciles_total",
    "cascade_operator_reconcile_errors_total",
    "cascade_operator_reconcile_duration_seconds_count",
    "cascade_operator_scaleplans_total",
    "cascade_operator_scaleplan_transfer_seconds_count",
    "cascade_operator_autoscaler_desired_replicas",
    "cascade_operator_autoscaler_backpressure",
    "cascade_operator_autoscaler_theta",
    "cascade_operator_autoscaler_decisions_total",
    "cascade_operator_autoscaler_reason",
    "cascade_operator_instances",
    "cascade_operator_startup_stage_seconds_count",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def cluster(dev_cluster: DevCluster, tmp_path: Path) -> Iterator[tuple[Namespace, int]]:
    port = free_port()
    with namespace_with_operator(dev_cluster, "cascade-metrics", tmp_path, port) as ns:
        yield ns, port


def samples(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def test_the_operator_exports_every_documented_series(
    cluster: tuple[Namespace, int], dev_cluster: DevCluster
) -> None:
    ns, port = cluster
    md = model_deployment(MD, 2, scaling={"minReplicas": 2, "maxReplicas": 3})
    ns.apply(md)
    ns.wait_ready(MD, 2, 300)
    gateway = dev_cluster.url(f"{ns.ns}/{MD}-gateway")
    wait_for("the gateway serves", lambda: complete(gateway, MD), timeout=120)
    for _ in range(5):
        complete(gateway, MD)

    def exported() -> bool:
        got = samples(port)
        return all(
            any(labels.get("deployment") == MD for labels, _ in got.get(name, []))
            for name in SERIES
        )

    wait_for("every documented operator series", exported, timeout=180)
    got = samples(port)
    for name in SERIES:
        rows = [(labels, v) for labels, v in got[name] if labels.get("deployment") == MD]
        print(name, rows[:3])
        assert all(labels["namespace"] == ns.ns for labels, _ in rows)
    reasons = {labels["reason"]: v for labels, v in got["cascade_operator_autoscaler_reason"]}
    assert set(reasons) == {c.value for c in Cause}  # only documented values
    assert sorted(reasons.values()) == [0.0] * (len(Cause) - 1) + [1.0]
    ticks = got["cascade_operator_autoscaler_decisions_total"]
    assert {labels["reason"] for labels, _ in ticks} <= {c.value for c in Cause}
    outcomes = {
        (labels["strategy"], labels["outcome"]): v
        for labels, v in got["cascade_operator_scaleplans_total"]
    }
    assert outcomes.get(("chain", "Completed"), 0) + outcomes.get(("binomial", "Completed"), 0) >= 1
    ready = [v for labels, v in got["cascade_operator_instances"] if labels["phase"] == "Ready"]
    assert sum(ready) == 2
