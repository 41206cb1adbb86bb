"""`cascade dev up/down` against real processes: readiness, idempotence, clean teardown."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from cascade_dev import cluster, netlinks, processes
from cascade_dev.paths import StatePaths
from cascade_dev.testing import DevCluster, apiserver_port_busy, cascade_dev, require_cluster

pytestmark = pytest.mark.integration


def _pids(state_dir: Path) -> dict[str, int]:
    paths = StatePaths(state_dir)
    names = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "nodeagent")
    return {n: pid for n in names if (pid := processes.running(paths, n)) is not None}


def _assert_nothing_left(state_dir: Path) -> None:
    assert processes.stragglers(state_dir) == []
    assert not apiserver_port_busy()
    if os.geteuid() == 0 and shutil.which("ip"):
        assert [n for n in netlinks.netns_names() if n.startswith("cxp-")] == []
        assert [n for n in netlinks.links() if n.startswith("cx")] == []
    mounts = Path("/proc/self/mountinfo").read_text()
    assert f" {state_dir}/" not in mounts
    assert list(state_dir.glob("*.pid")) == []


@pytest.mark.parametrize("fabric", ["auto", "loopback"])
def test_up_is_idempotent_and_down_leaves_nothing(tmp_path: Path, fabric: str) -> None:
    require_cluster()
    if apiserver_port_busy():
        pytest.fail("port 6443 is in use: `cascade dev down` the running cluster first")
    state = tmp_path / "dev"
    kubeconfig = Path(cascade_dev(state, "kubeconfig").stdout.strip())
    assert kubeconfig == state / "kubeconfig"
    try:
        cascade_dev(state, "up", "--nodes", "2", "--fabric", fabric, "--timeout", "120")
        raw = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), "get", "--raw", "/readyz"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert raw.stdout.strip() == "ok", raw.stderr
        plan = json.loads((state / "cluster.json").read_text())
        assert [n["name"] for n in plan["nodes"]] == ["cascade-node-0", "cascade-node-1"]
        if plan["mode"] == "netns":
            assert {"cxspine", "cxleaf0", "cxn0", "cxn1"} <= netlinks.links()
        before = _pids(state)
        assert {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} <= set(
            before
        )
        started = time.monotonic()
        cascade_dev(state, "up", "--nodes", "2", "--fabric", fabric)
        assert time.monotonic() - started < 30
        assert _pids(state) == before
        if cluster.agent_available():
            status = cascade_dev(state, "status").stdout
            assert status.count(" Ready ") == 2, status
    finally:
        cascade_dev(state, "down")
    _assert_nothing_left(state)
    cascade_dev(state, "down")  # idempotent
    assert (state / "pki" / "ca.crt").exists()  # kept for the next `up`
    assert not (state / "etcd").exists()


test_up_is_idempotent_and_down_leaves_nothing.runs_first = True  # type: ignore[attr-defined]


def _apply(dev: DevCluster, doc: dict[str, Any]) -> None:
    dev.kubectl("apply", "-f", "-", stdin=json.dumps(doc))


def test_url_follows_endpoints(dev_cluster: DevCluster) -> None:
    """A selector-less Service with hand-made Endpoints: no pods needed."""
    ns = "cascade-url-it"
    dev_cluster.kubectl("create", "namespace", ns, check=False)
    meta = {"name": "echo", "namespace": ns}
    ports = [{"name": "http", "port": 80, "targetPort": 8000}, {"name": "m", "port": 9090}]
    _apply(
        dev_cluster,
        {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": ports}},
    )
    subset = {
        "addresses": [{"ip": "198.18.1.7"}, {"ip": "198.18.0.9"}],
        "notReadyAddresses": [{"ip": "198.18.0.2"}],
        "ports": [{"name": "http", "port": 8000}, {"name": "m", "port": 9091}],
    }
    _apply(
        dev_cluster,
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": meta, "subsets": [subset]},
    )
    assert dev_cluster.url(f"{ns}/echo:http") == "http://198.18.0.9:8000"
    assert dev_cluster.url(f"{ns}/echo:9090") == "http://198.18.0.9:9091"
    with pytest.raises(AssertionError, match="several ports"):
        dev_cluster.url(f"{ns}/echo")
    dev_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_cluster_reports_simulated_nodes(dev_cluster: DevCluster) -> None:
    plan = json.loads((dev_cluster.state_dir / "cluster.json").read_text())
    assert len(plan["nodes"]) == dev_cluster.nodes
    if not cluster.agent_available():
        pytest.skip("cascade_dev.nodeagent not installed yet: nodes cannot register")
    nodes = json.loads(dev_cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    names = sorted(n["metadata"]["name"] for n in nodes)
    assert names == [f"cascade-node-{i}" for i in range(dev_cluster.nodes)]
