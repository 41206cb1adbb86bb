"""Planning of the simulated cluster: leaves, zones, addresses, interface names."""

from __future__ import annotations

import json

import pytest

from cascade_api import constants as c
from cascade_dev import topology as t


def test_leaf_and_zone_assignment() -> None:
    plan = t.plan_cluster(10, nodes_per_leaf=4)
    assert [n.leaf for n in plan.nodes] == ["leaf-0"] * 4 + ["leaf-1"] * 4 + ["leaf-2"] * 2
    assert [lf.zone for lf in plan.leaves] == ["zone-a", "zone-b", "zone-a"]
    assert plan.nodes[5].zone == "zone-b"
    assert plan.nodes[5].leaf_index == 1


def test_node_fields_and_labels() -> None:
    plan = t.plan_cluster(2, gpus_per_node=4, nic_mbit=200)
    n = plan.node("cascade-node-1")
    assert (n.index, n.gpus, n.nic_in_mbit, n.nic_out_mbit) == (1, 4, 200, 200)
    assert n.nvlink_clique == "cascade-node-1-nvl"
    assert n.labels[c.LABEL_ZONE] == "zone-a"
    assert n.labels[c.LABEL_LEAF] == "leaf-0"
    assert n.labels[c.LABEL_NVLINK_CLIQUE] == "cascade-node-1-nvl"
    assert n.labels[c.LABEL_NIC_IN_MBIT] == "200"
    assert n.labels[c.LABEL_NIC_OUT_MBIT] == "200"
    with pytest.raises(KeyError):
        plan.node("nope")


def test_spine_defaults_to_nic_rate() -> None:
    assert t.plan_cluster(4, nic_mbit=300).spine_mbit == 300
    assert t.plan_cluster(4, nic_mbit=300, spine_mbit=100).leaves[0].spine_mbit == 100


def test_addresses_by_mode() -> None:
    netns = t.plan_cluster(3)
    assert netns.host_ip == "198.18.255.254"
    assert [n.ip for n in netns.nodes] == ["198.18.0.1", "198.18.1.1", "198.18.2.1"]
    loop = t.plan_cluster(3, mode=t.MODE_LOOPBACK)
    assert loop.host_ip == "127.0.0.1"
    assert loop.nodes[2].ip == "127.1.2.1"


def test_pod_ip_allocation_skips_used_and_node_address() -> None:
    assert t.allocate_pod_ip(t.MODE_NETNS, 3, []) == "198.18.3.2"
    used = ["198.18.3.2", "198.18.3.3", "198.18.4.4"]
    assert t.allocate_pod_ip(t.MODE_NETNS, 3, used) == "198.18.3.4"
    assert t.allocate_pod_ip(t.MODE_LOOPBACK, 0, ["127.1.0.2"]) == "127.1.0.3"
    full = [t.pod_ip(t.MODE_NETNS, 0, h) for h in range(2, 255)]
    with pytest.raises(RuntimeError, match="in use"):
        t.allocate_pod_ip(t.MODE_NETNS, 0, full, last="198.18.0.7")


def test_pod_ip_allocation_goes_round_robin_so_a_freed_address_is_not_reused_at_once() -> None:
    # 198.18.3.2 was just freed (its old MAC still sits in neighbours' ARP caches).
    assert t.allocate_pod_ip(t.MODE_NETNS, 3, [], last="198.18.3.2") == "198.18.3.3"
    assert t.allocate_pod_ip(t.MODE_NETNS, 3, ["198.18.3.6"], last="198.18.3.5") == "198.18.3.7"
    # Past the end it wraps to the lowest free one.
    assert t.allocate_pod_ip(t.MODE_NETNS, 3, ["198.18.3.2"], last="198.18.3.254") == "198.18.3.3"
    full = [t.pod_ip(t.MODE_NETNS, 0, h) for h in range(2, 255)]
    with pytest.raises(RuntimeError, match="in use"):
        t.allocate_pod_ip(t.MODE_NETNS, 0, full)


def test_interface_names_fit_ifnamsiz() -> None:
    plan = t.plan_cluster(t.MAX_NODES, nodes_per_leaf=1)
    names = t.link_names(plan)
    assert len(names) == len(set(names))
    uid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    names += [t.pod_host_veth(uid), t.pod_temp_veth(uid), "eth0"]
    assert max(len(n) for n in names) <= t.IFNAMSIZ
    assert t.pod_netns(uid) == "cxp-0f8fad5bd9cb"
    assert all(n.startswith("cx") for n in names[:-1])


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError):
        t.plan_cluster(0)
    with pytest.raises(ValueError):
        t.plan_cluster(t.MAX_NODES + 1)
    with pytest.raises(ValueError):
        t.plan_cluster(2, nodes_per_leaf=0)
    with pytest.raises(ValueError):
        t.plan_cluster(2, mode="vxlan")


def test_json_round_trip() -> None:
    plan = t.plan_cluster(6, nodes_per_leaf=2, spine_mbit=500)
    data = json.loads(json.dumps(plan.to_json()))
    assert data["version"] == 1
    assert t.ClusterPlan.from_json(data) == plan


def test_tbf_burst_covers_gso_packets() -> None:
    args = t.tbf_args(100)
    assert args[:2] == ["rate", "100mbit"]
    assert int(args[3]) >= 2 * 65536
    assert int(t.tbf_args(10_000)[3]) == 10_000 * 1_000_000 // 8 // 500


def test_node_cpu_quota_is_planned_labelled_and_round_trips() -> None:
    plan = t.plan_cluster(2, node_cpu=0.25)
    assert [n.cpu for n in plan.nodes] == [0.25, 0.25]
    assert plan.nodes[1].labels["cascade.dev/node-cpu"] == "0.25"
    assert t.ClusterPlan.from_json(json.loads(json.dumps(plan.to_json()))) == plan
    unlimited = t.plan_cluster(2)
    assert [n.cpu for n in unlimited.nodes] == [None, None]
    assert "cascade.dev/node-cpu" not in unlimited.nodes[0].labels
    with pytest.raises(ValueError, match="--node-cpu"):
        t.plan_cluster(2, node_cpu=0)


def test_plans_written_before_node_cpu_still_load() -> None:
    data = t.plan_cluster(1).to_json()
    del data["nodes"][0]["cpu"]
    assert t.ClusterPlan.from_json(data).nodes[0].cpu is None


def test_storage_rate_is_planned_and_round_trips() -> None:
    plan = t.plan_cluster(2, storage_mbit=100)
    assert plan.storage_mbit == 100 and plan.to_json()["storage_mbit"] == 100
    assert t.ClusterPlan.from_json(json.loads(json.dumps(plan.to_json()))) == plan
    unlimited = t.plan_cluster(2)
    assert unlimited.storage_mbit is None
    assert t.ClusterPlan.from_json(json.loads(json.dumps(unlimited.to_json()))) == unlimited
    with pytest.raises(ValueError, match="--storage-mbit"):
        t.plan_cluster(2, storage_mbit=0)


def test_plans_written_before_storage_rate_still_load() -> None:
    data = t.plan_cluster(1, storage_mbit=100).to_json()
    del data["storage_mbit"]
    assert t.ClusterPlan.from_json(data).storage_mbit is None  # as such a cluster ran


def test_the_fabric_mtu_is_planned_checked_and_round_trips() -> None:
    assert t.plan_cluster(2).mtu == t.DEFAULT_MTU == 9000
    plain = t.plan_cluster(2, mtu=1500)
    assert t.ClusterPlan.from_json(json.loads(json.dumps(plain.to_json()))) == plain
    with pytest.raises(ValueError, match="--mtu"):
        t.plan_cluster(2, mtu=576)
    data = t.plan_cluster(1).to_json()
    del data["mtu"]
    assert t.ClusterPlan.from_json(data).mtu == 1500  # as such a cluster ran
