"""The dev cluster's Prometheus (`cascade dev up` runs it): a pod annotated the way
Cascade's pods are is discovered through the API server and scraped at its pod IP, with
the `namespace`/`pod`/`node`/`deployment`/`component` labels; an unannotated pod is not;
`up --no-prometheus` stops it and a plain `up` brings it back on the same URL."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from cascade_dev.testing import DevCluster, cascade_dev, wait_for

pytestmark = pytest.mark.integration

PORT = 9123
# A static exposition file served by the standard library: a stand-in for a worker.
SERVE = f"printf 'cascade_test_sample 7\\n' > metrics && exec python3 -m http.server {PORT}"


def _pod(name: str, annotated: bool) -> dict[str, Any]:
    annotations = {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(PORT),
        "prometheus.io/path": "/metrics",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {
                "cascade.dev/deployment": "promtest",
                "app.kubernetes.io/component": "worker",
            },
            "annotations": annotations if annotated else {},
        },
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "m", "image": "busybox", "command": ["sh", "-c", SERVE]}],
        },
    }


def _api(base: str, path: str, **query: str) -> Any:
    url = f"{base}/api/v1/{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    with urllib.request.urlopen(url, timeout=10) as resp:
        body = json.loads(resp.read())
    assert body["status"] == "success", body
    return body["data"]


@pytest.fixture
def namespace(dev_cluster: DevCluster) -> Iterator[str]:
    ns = f"cascade-prom-{uuid.uuid4().hex[:6]}"
    dev_cluster.kubectl("create", "namespace", ns)
    try:
        yield ns
    finally:
        dev_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_annotated_pod_is_discovered_and_scraped(dev_cluster: DevCluster, namespace: str) -> None:
    prom = dev_cluster.url("prometheus")
    pods = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [_pod("scraped", True), _pod("plain", False)],
    }
    dev_cluster.kubectl("-n", namespace, "apply", "-f", "-", stdin=json.dumps(pods))

    def ours() -> list[dict[str, Any]]:
        active = _api(prom, "targets", state="active")["activeTargets"]
        return [t for t in active if t["labels"].get("namespace") == namespace]

    wait_for("the annotated pod's target to be up", lambda: [t["health"] for t in ours()] == ["up"])
    (target,) = ours()
    node = dev_cluster.kubectl(
        "-n", namespace, "get", "pod", "scraped", "-o", "jsonpath={.spec.nodeName}"
    ).stdout
    assert target["scrapeUrl"].endswith(f":{PORT}/metrics")
    assert target["labels"]["pod"] == "scraped"
    assert target["labels"]["node"] == node

    query = f'up{{namespace="{namespace}"}}'
    wait_for(f"{query} in Prometheus", lambda: bool(_api(prom, "query", query=query)["result"]))
    (up,) = _api(prom, "query", query=query)["result"]
    assert up["value"][1] == "1"
    labels = up["metric"]
    assert (labels["namespace"], labels["pod"], labels["node"]) == (namespace, "scraped", node)
    assert (labels["deployment"], labels["component"]) == ("promtest", "worker")
    sample = _api(prom, "query", query=f'cascade_test_sample{{namespace="{namespace}"}}')
    assert [r["value"][1] for r in sample["result"]] == ["7"]


def test_no_prometheus_stops_it_and_up_brings_it_back(dev_cluster: DevCluster) -> None:
    prom = dev_cluster.url("prometheus")
    nodes = str(dev_cluster.nodes)
    try:
        cascade_dev(dev_cluster.state_dir, "up", "--nodes", nodes, "--no-prometheus")
        with pytest.raises(AssertionError, match="prometheus is not running"):
            dev_cluster.url("prometheus")
    finally:
        cascade_dev(dev_cluster.state_dir, "up", "--nodes", nodes)
    assert dev_cluster.url("prometheus") == prom
    assert _api(prom, "status/runtimeinfo")["storageRetention"] == "2d"
