"""Pod address bookkeeping of the fabric (loopback mode: files only, no root needed)."""

from __future__ import annotations

import json
from pathlib import Path

from cascade_dev.fabric import Fabric, PodNet
from cascade_dev.topology import MODE_LOOPBACK, plan_cluster

UID_A = "aaaaaaaa-0000-0000-0000-000000000001"
UID_B = "bbbbbbbb-0000-0000-0000-000000000002"


def _fabric(tmp_path: Path) -> Fabric:
    plan = plan_cluster(2, mode=MODE_LOOPBACK)
    (tmp_path / "cluster.json").write_text(json.dumps(plan.to_json()))
    return Fabric.load(tmp_path)


def test_attach_is_persistent_and_idempotent(tmp_path: Path) -> None:
    fab = _fabric(tmp_path)
    assert (fab.mode, fab.host_ip) == ("loopback", "127.0.0.1")
    assert fab.node_ip("cascade-node-1") == "127.1.1.1"
    a = fab.attach_pod("cascade-node-1", UID_A)
    assert a == PodNet(ip="127.1.1.2", netns=None)
    assert fab.exec_prefix(a) == []
    assert fab.attach_pod("cascade-node-1", UID_A) == a
    b = _fabric(tmp_path).attach_pod("cascade-node-1", UID_B)  # a restarted agent
    assert b.ip == "127.1.1.3"
    assert _fabric(tmp_path).attach_pod("cascade-node-1", UID_A) == a


def test_detach_frees_the_address(tmp_path: Path) -> None:
    fab = _fabric(tmp_path)
    fab.attach_pod("cascade-node-0", UID_A)
    fab.detach_pod(UID_A)
    fab.detach_pod(UID_A)
    assert not (tmp_path / "pods" / UID_A / "net.json").exists()
    # Freed, but handed out again only once the node's round robin comes back to it.
    assert fab.attach_pod("cascade-node-0", UID_B).ip == "127.1.0.3"
    used = [fab.attach_pod("cascade-node-0", f"uid-{i}").ip for i in range(252)]
    assert used[-1] == "127.1.0.2" and len(set(used)) == 252


def test_exec_prefix_for_netns() -> None:
    fab = Fabric(plan_cluster(1), Path("/nonexistent"))
    assert fab.exec_prefix(PodNet("198.18.0.2", "cxp-x")) == ["ip", "netns", "exec", "cxp-x"]
