"""Node and Lease manifests of the node agent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cascade_api import constants as c
from cascade_dev.nodeagent import nodes

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
CLUSTER = {
    "nodes": [
        {
            "name": "cascade-node-1",
            "index": 1,
            "zone": "zone-a",
            "leaf": "leaf-0",
            "nvlink_clique": "cascade-node-1-nvl",
            "gpus": 8,
            "nic_in_mbit": 1000,
            "nic_out_mbit": 800,
            "ip": "198.18.1.1",
            "labels": {"x": "y"},
        },
        {
            "name": "cascade-node-0",
            "index": 0,
            "zone": "zone-a",
            "leaf": "leaf-0",
            "nvlink_clique": "cascade-node-0-nvl",
            "gpus": 4,
            "nic_in_mbit": 1000,
            "nic_out_mbit": 1000,
        },
    ],
    "fabric": {},
}


def spec() -> nodes.NodeSpec:
    return nodes.load_nodes(CLUSTER)[1]


def test_load_nodes_sorted_by_index() -> None:
    assert [n.name for n in nodes.load_nodes(CLUSTER)] == ["cascade-node-0", "cascade-node-1"]


def test_labels() -> None:
    labels = nodes.node_labels(spec())
    assert labels["kubernetes.io/hostname"] == "cascade-node-1"
    assert labels["kubernetes.io/os"] == "linux"
    assert labels[c.LABEL_ZONE] == "zone-a"
    assert labels[c.LABEL_GPU_PRODUCT] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels[c.LABEL_NVLINK_CLIQUE] == "cascade-node-1-nvl"
    assert labels[c.LABEL_LEAF] == "leaf-0"
    assert labels[c.LABEL_NIC_IN_MBIT] == "1000"
    assert labels[c.LABEL_NIC_OUT_MBIT] == "800"
    assert labels["cascade.dev/simulated"] == "true"
    assert all(isinstance(v, str) for v in labels.values())
    assert labels["x"] == "y"  # extra labels from cluster.json are kept


def test_manifest_capacity_addresses_conditions() -> None:
    m = nodes.node_manifest(spec(), "198.18.1.1", T0, kernel="6.1")
    st = m["status"]
    assert st["capacity"] == st["allocatable"]
    assert st["capacity"][c.GPU_RESOURCE] == "8"
    assert st["capacity"][c.RDMA_RESOURCE] == "8"
    assert st["capacity"]["pods"] == "110"
    assert st["capacity"]["cpu"] == nodes.NODE_CPU
    assert {"type": "InternalIP", "address": "198.18.1.1"} in st["addresses"]
    assert {"type": "Hostname", "address": "cascade-node-1"} in st["addresses"]
    assert st["nodeInfo"]["kubeletVersion"] == "v1.20.2-cascade"
    by = {x["type"]: x for x in st["conditions"]}
    assert (by["Ready"]["status"], by["Ready"]["reason"]) == ("True", "KubeletReady")
    for t in ("MemoryPressure", "DiskPressure", "PIDPressure"):
        assert by[t]["status"] == "False"
    assert m["metadata"]["labels"] == nodes.node_labels(spec())


def test_heartbeat_keeps_transition_time() -> None:
    first = nodes.node_conditions(T0)
    later = nodes.node_conditions(T0 + timedelta(seconds=40), first)
    r = {x["type"]: x for x in later}["Ready"]
    assert r["lastTransitionTime"] == "2024-05-01T12:00:00Z"
    assert r["lastHeartbeatTime"] == "2024-05-01T12:00:40Z"
    not_ready = [
        {"type": "Ready", "status": "Unknown", "lastTransitionTime": "2020-01-01T00:00:00Z"}
    ]
    r = {x["type"]: x for x in nodes.node_conditions(T0, not_ready)}["Ready"]
    assert r["lastTransitionTime"] == "2024-05-01T12:00:00Z"


def test_stable_node_ids() -> None:
    a = nodes.node_status(spec(), "ip", T0)["nodeInfo"]
    b = nodes.node_status(spec(), "ip", T0 + timedelta(hours=1))["nodeInfo"]
    assert a == b


def test_lease() -> None:
    lease = nodes.lease_manifest("cascade-node-1", "uid-1", T0)
    assert lease["metadata"]["namespace"] == "kube-node-lease"
    assert lease["spec"]["holderIdentity"] == "cascade-node-1"
    assert lease["spec"]["leaseDurationSeconds"] == 40
    assert lease["spec"]["renewTime"] == "2024-05-01T12:00:00.123456Z"
    assert lease["metadata"]["ownerReferences"][0] == {
        "apiVersion": "v1",
        "kind": "Node",
        "name": "cascade-node-1",
        "uid": "uid-1",
    }
    assert "ownerReferences" not in nodes.lease_manifest("n", None, T0)["metadata"]


def test_node_cpu_label_follows_the_quota() -> None:
    quota = {**CLUSTER, "nodes": [{**CLUSTER["nodes"][0], "cpu": 0.5}]}  # type: ignore[dict-item]
    quota_spec = nodes.load_nodes(quota)[0]
    assert quota_spec.cpu == 0.5
    assert nodes.node_labels(quota_spec)["cascade.dev/node-cpu"] == "0.5"
    assert nodes.node_metadata_patch(quota_spec)["metadata"]["labels"]["cascade.dev/node-cpu"] == (
        "0.5"
    )
    # no quota (any more): the label is absent, and the patch removes one left on the node
    assert spec().cpu is None
    assert "cascade.dev/node-cpu" not in nodes.node_labels(spec())
    assert nodes.node_metadata_patch(spec())["metadata"]["labels"]["cascade.dev/node-cpu"] is None
