"""Issue 14 on the real local cluster: with the Gateway API Inference Extension's CRD
installed, the operator keeps one InferencePool per ModelDeployment whose selector
matches exactly its Ready, serving worker pods, through a scale-up and a scale-down;
puts back a pool edited by hand; and the pool goes with the deployment.

The CRD is the vendored upstream one (tests/data/crds, v1.6.0), minus the empty-string
default the local cluster's 1.20 API server refuses; it is removed at the end only if
this test installed it. No endpoint picker runs: this checks the pool and its members.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from integration_helpers import Namespace, namespace_with_operator, pod_ready

from cascade_dev.testing import DevCluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

MD = "pooled"
CRD_NAME = "inferencepools.inference.networking.k8s.io"
CRD_FILE = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "crds"
    / "inference.networking.k8s.io_inferencepools.yaml"
)


def applicable_crd() -> dict[str, Any]:
    """The vendored CRD without `default: ""` (1.20 reads it as null and refuses it)."""

    def drop(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: drop(v) for k, v in node.items() if not (k == "default" and v == "")}
        return [drop(v) for v in node] if isinstance(node, list) else node

    crd: dict[str, Any] = drop(yaml.safe_load(CRD_FILE.read_text()))
    return crd


@pytest.fixture
def pool_crd(dev_cluster: DevCluster) -> Iterator[None]:
    present = dev_cluster.kubectl("get", "crd", CRD_NAME, check=False).returncode == 0
    if not present:
        manifest = yaml.safe_dump(applicable_crd())
        dev_cluster.kubectl("apply", "--validate=false", "-f", "-", stdin=manifest)
        dev_cluster.kubectl(
            "wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s"
        )
    try:
        yield
    finally:
        if not present:
            dev_cluster.kubectl("delete", "crd", CRD_NAME, "--wait=false", check=False)


@pytest.fixture
def cluster(dev_cluster: DevCluster, pool_crd: None, tmp_path: Path) -> Iterator[Namespace]:
    with namespace_with_operator(dev_cluster, "cascade-pool", tmp_path) as ns:
        yield ns


def pool(ns: Namespace) -> dict[str, Any] | None:
    out = ns.kubectl("get", "inferencepools", MD, "-o", "json", check=False)
    return json.loads(out) if out.strip() else None


def members(ns: Namespace) -> tuple[list[str], list[str]]:
    """(worker pods the pool selects, terminating ones included; Ready live ones)."""
    time.sleep(1)  # poll gently: the machine is small and shared
    found = pool(ns)
    selector = "cascade.dev/deployment=" + MD + ",app.kubernetes.io/component=worker"
    pods = json.loads(ns.kubectl("get", "pods", "-l", selector, "-o", "json"))["items"]
    match = ((found or {}).get("spec") or {}).get("selector", {}).get("matchLabels")
    if not match:
        return [], []
    selected = [
        p["metadata"]["name"]
        for p in pods
        if match.items() <= (p["metadata"].get("labels") or {}).items()
    ]
    ready = [
        p["metadata"]["name"]
        for p in pods
        if not p["metadata"].get("deletionTimestamp") and pod_ready(p)
    ]
    return sorted(selected), sorted(ready)


def follows(ns: Namespace, count: int) -> bool:
    selected, ready = members(ns)
    return len(ready) == count and selected == ready


def test_the_pool_selects_exactly_the_serving_workers(cluster: Namespace) -> None:
    ns = cluster
    ns.apply_model(MD, 1)
    wait_for("a pool over the one Ready worker", lambda: follows(ns, 1), timeout=300)
    found = pool(ns)
    assert found is not None
    uid = json.loads(ns.kubectl("get", "md", MD, "-o", "json"))["metadata"]["uid"]
    assert [o["uid"] for o in found["metadata"]["ownerReferences"]] == [uid]
    assert found["spec"]["targetPorts"] == [{"number": 8080}]
    assert found["spec"]["endpointPickerRef"]["name"] == f"{MD}-epp"

    ns.kubectl("scale", "md", MD, "--replicas=2")
    wait_for("the pool to follow the scale-up", lambda: follows(ns, 2), timeout=300)

    ns.kubectl("scale", "md", MD, "--replicas=1")
    wait_for("the pool to follow the scale-down", lambda: follows(ns, 1), timeout=240)

    edit = {"spec": {"selector": {"matchLabels": {"added": "by-hand"}}}}
    ns.kubectl("patch", "inferencepool", MD, "--type=merge", "-p", json.dumps(edit))
    wait_for(
        "the edited pool put back",
        lambda: "added" not in ((pool(ns) or {})["spec"]["selector"]["matchLabels"]),
        timeout=90,
    )
    assert follows(ns, 1)

    ns.kubectl("delete", "md", MD, "--wait=false")
    wait_for("the pool collected with its deployment", lambda: pool(ns) is None, timeout=120)
