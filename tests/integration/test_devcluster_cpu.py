"""`cascade dev up --node-cpu`: a node's pods are held to its quota, the control plane is
not, a re-run `up` changes the quota in place, and `down` leaves no cgroup behind."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from cascade_dev import cgroups
from cascade_dev.cgroups import CpuCgroups
from cascade_dev.testing import (
    DevCluster,
    apiserver_port_busy,
    cascade_dev,
    require_cluster,
    wait_for,
)

pytestmark = pytest.mark.integration

LOOP = "while :; do :; done"


def _pod(name: str, node: str, script: str, component: str | None = None) -> dict[str, object]:
    labels = {"app.kubernetes.io/component": component} if component else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "loop", "image": "busybox", "command": ["sh", "-c", script]}],
        },
    }


def _cpu_ticks(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def _cores(pids: list[int], seconds: float) -> float:
    before, t0 = sum(_cpu_ticks(p) for p in pids), time.monotonic()
    time.sleep(seconds)
    used = sum(_cpu_ticks(p) for p in pids) - before
    return used / os.sysconf("SC_CLK_TCK") / (time.monotonic() - t0)


def _labels(dev: DevCluster) -> dict[str, str | None]:
    items = json.loads(dev.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    return {
        n["metadata"]["name"]: n["metadata"]["labels"].get("cascade.dev/node-cpu") for n in items
    }


def _phase(dev: DevCluster, pod: str) -> str:
    return dev.kubectl("get", "pod", pod, "-o", "jsonpath={.status.phase}", check=False).stdout


def test_node_cpu_quota_holds_pods_and_down_removes_groups(tmp_path: Path) -> None:
    require_cluster()
    cg = CpuCgroups.detect()
    if cg is None or cg.problem():
        pytest.skip(f"no writable cgroup cpu controller: {cg and cg.problem()}")
    if apiserver_port_busy():
        pytest.fail("port 6443 is in use: `cascade dev down` the running cluster first")
    state = tmp_path / "dev"
    dev = DevCluster.at(state, 2)
    try:
        cascade_dev(state, "up", "--nodes", "2", "--node-cpu", "0.25", "--timeout", "120")
        assert _labels(dev) == {"cascade-node-0": "0.25", "cascade-node-1": "0.25"}
        assert cg.nodes() == ["cascade-node-0", "cascade-node-1"]
        assert cg.limit("cascade-node-1") == 0.25
        busy = _pod("busy", "cascade-node-1", f"{LOOP} & {LOOP}")  # two loops, one quota
        gateway = _pod("busy-gateway", "cascade-node-0", LOOP, component="gateway")
        dev.kubectl(
            "apply",
            "-f",
            "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [busy, gateway]}),
        )
        wait_for(
            "two busy loops in cascade-node-1's group", lambda: len(cg.pids("cascade-node-1")) == 2
        )
        wait_for(
            "the gateway-labelled pod to run", lambda: _phase(dev, "busy-gateway") == "Running"
        )
        assert cg.pids("cascade-node-0") == []  # the gateway runs unconfined
        cores = _cores(cg.pids("cascade-node-1"), 3.0)
        print(f"two busy loops under a 0.25-core quota used {cores:.3f} cores")
        assert 0.15 < cores < 0.35
        assert cg.stat("cascade-node-1")["nr_throttled"] > 0

        cascade_dev(state, "up", "--nodes", "2", "--node-cpu", "0.5")  # restarts the agent
        wait_for("the new quota", lambda: cg.limit("cascade-node-1") == 0.5, timeout=60)
        wait_for("the new label", lambda: set(_labels(dev).values()) == {"0.5"}, timeout=60)
        assert len(cg.pids("cascade-node-1")) == 2  # re-adopted, still confined
    finally:
        cascade_dev(state, "down")
    assert cgroups.detect() is not None and cg.nodes() == []
    assert not cg.hierarchy.base.exists()


# It needs the API server's port to itself, before the session's shared cluster starts.
test_node_cpu_quota_holds_pods_and_down_removes_groups.runs_first = True  # type: ignore[attr-defined]
