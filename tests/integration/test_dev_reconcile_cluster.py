"""`cascade dev up` on a running cluster reconciles it (issue 15, acceptance 5).

`up --nic-mbit 200` after `up --nic-mbit 1000` reshapes every node's NIC and the spine
links (read back from the kernel with `tc`, not from our state files) and relabels every
Node at once; an identical re-run changes nothing (the qdiscs are not even replaced);
3 -> 4 -> 3 nodes adds a node and then drains and removes it with its pod, Lease,
links and pod namespace. The test runs its own cluster in its own state dir.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cascade_api import constants as c
from cascade_dev import netlinks
from cascade_dev.testing import (
    DevCluster,
    apiserver_port_busy,
    cascade_dev,
    require_cluster,
    wait_for,
)

pytestmark = pytest.mark.integration

NIC = (c.LABEL_NIC_IN_MBIT, c.LABEL_NIC_OUT_MBIT)
# How the lines that say what `up` changed begin (clusterdiff's Change.line).
CHANGE = ("+ ", "- ", "reshape ", "relabel ", "cpu quota ", "storage ", "node agent ", "no changes")


def _up(state: Path, nodes: int, mbit: int) -> list[str]:
    """`cascade dev up`; the lines it printed about what it changed."""
    args = ("--nodes", str(nodes), "--nic-mbit", str(mbit), "--no-prometheus")
    out = cascade_dev(state, "up", *args, "--timeout", "120").stderr
    return [line for line in out.splitlines() if line.startswith(CHANGE)]


def _qdisc(dev: str) -> tuple[str, str]:
    """(handle, rate) of the link's root qdisc as the kernel reports it."""
    out = subprocess.run(
        ["tc", "qdisc", "show", "dev", dev], capture_output=True, text=True, check=True
    ).stdout
    m = re.search(r"qdisc tbf (\S+) root .*?rate (\S+)", out)
    assert m, f"{dev}: no root tbf in {out!r}"
    return m.group(1), m.group(2)


def _shaping(nodes: int) -> dict[str, tuple[str, str]]:
    devs = ["cxlu0", "cxld0"] + [f"cxn{d}{i}" for i in range(nodes) for d in "ud"]
    return {dev: _qdisc(dev) for dev in devs}


def _nodes(dev: DevCluster) -> dict[str, dict[str, str]]:
    items = json.loads(dev.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in items}


def _nic_labels(dev: DevCluster) -> dict[str, tuple[str, ...]]:
    return {name: tuple(labels[k] for k in NIC) for name, labels in _nodes(dev).items()}


def _pod(name: str, node: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": 2,
                "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"]}],
            },
        }
    )


def test_up_reconciles_nic_rate_and_node_count(tmp_path: Path) -> None:
    require_cluster()
    if os.geteuid() != 0 or not shutil.which("tc"):
        pytest.skip("the shaped netns fabric needs root and tc")
    if apiserver_port_busy():
        pytest.fail("port 6443 is in use: `cascade dev down` the running cluster first")
    state = tmp_path / "dev"
    dev = DevCluster.at(state, 3)
    try:
        _up(state, 3, 1000)
        before, labels_before = _shaping(3), _nic_labels(dev)
        print(f"\n--nic-mbit 1000: tc {before}\n  labels {labels_before}")
        assert {rate for _, rate in before.values()} == {"1Gbit"}
        assert set(labels_before.values()) == {("1000", "1000")}
        dev.kubectl("apply", "-f", "-", stdin=_pod("steady", "cascade-node-1"))
        wait_for("pod steady to run", lambda: _phase(dev, "steady") == "Running")

        changed = _up(state, 3, 200)
        after, labels_after = _shaping(3), _nic_labels(dev)  # no waiting: `up` did it
        print(f"--nic-mbit 200: tc {after}\n  labels {labels_after}\n  up said {changed}")
        assert {rate for _, rate in after.values()} == {"200Mbit"}
        assert labels_after == {f"cascade-node-{i}": ("200", "200") for i in range(3)}
        assert "reshape leaf-0 spine link: 1000 -> 200 Mbit/s" in changed
        for i in range(3):
            assert f"reshape cascade-node-{i} NIC: 1000 -> 200 Mbit/s" in changed
            assert (
                f"relabel cascade-node-{i}: {NIC[0]} 1000 -> 200, {NIC[1]} 1000 -> 200" in changed
            )
        assert _phase(dev, "steady") == "Running"  # reshaping leaves pods alone

        again = _up(state, 3, 200)
        assert again == ["no changes"], again
        assert _shaping(3) == after  # same qdisc handles: nothing was replaced

        grown = _up(state, 4, 200)
        print(f"--nodes 4: up said {grown}")
        assert grown == [
            "+ node cascade-node-3 (leaf-0, 198.18.3.1)",
            "node agent restarted on the new cluster.json",
        ]
        assert _shaping(4)["cxnu3"][1] == "200Mbit"
        assert _nic_labels(dev)["cascade-node-3"] == ("200", "200")
        dev.kubectl("apply", "-f", "-", stdin=_pod("leaving", "cascade-node-3"))
        wait_for("pod leaving to run", lambda: _phase(dev, "leaving") == "Running")
        netns = _pod_netns(state, dev, "leaving")
        assert netns in netlinks.netns_names()

        shrunk = _up(state, 3, 200)
        print(f"--nodes 3: up said {shrunk}")
        assert shrunk[0].startswith("- node cascade-node-3 (pods drained")
        assert sorted(_nodes(dev)) == [f"cascade-node-{i}" for i in range(3)]
        assert dev.kubectl("get", "pod", "leaving", check=False).returncode != 0
        lease = dev.kubectl("get", "lease", "-n", "kube-node-lease", "cascade-node-3", check=False)
        assert lease.returncode != 0
        assert not {"cxn3", "cxnu3", "cxnd3"} & netlinks.links()
        assert netns not in netlinks.netns_names()
        assert _phase(dev, "steady") == "Running"
    finally:
        cascade_dev(state, "down")


def _phase(dev: DevCluster, pod: str) -> str:
    return dev.kubectl("get", "pod", pod, "-o", "jsonpath={.status.phase}", check=False).stdout


def _pod_netns(state: Path, dev: DevCluster, pod: str) -> str:
    uid = dev.kubectl("get", "pod", pod, "-o", "jsonpath={.metadata.uid}").stdout.strip()
    netns: str = json.loads((state / "pods" / uid / "net.json").read_text())["netns"]
    return netns


# It needs the API server's port to itself, before the session's shared cluster starts.
test_up_reconciles_nic_rate_and_node_count.runs_first = True  # type: ignore[attr-defined]
