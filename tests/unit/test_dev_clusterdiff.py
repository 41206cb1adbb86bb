"""`cascade dev up` on a running cluster: what it finds vs what the flags ask (pure diff)."""

from __future__ import annotations

import json
from dataclasses import replace

from cascade_api import constants as c
from cascade_dev.clusterdiff import (
    AgentRestarted,
    Change,
    CpuQuota,
    Current,
    LeafAdded,
    LeafRemoved,
    NodeAdded,
    NodeRemoved,
    Relabeled,
    Reshaped,
    StorageRate,
    diff,
    same_cores,
    wanted_labels,
)
from cascade_dev.cpuquota import LABEL_NODE_CPU
from cascade_dev.topology import MODE_LOOPBACK, ClusterPlan, link_names, parse_tbf_rates
from cascade_dev.topology import plan_cluster as plan

OTHER = {"team": "inference"}  # a label someone else set: never touched


def running(p: ClusterPlan, cpu_controller: bool = True) -> Current:
    """The cluster exactly as `up` with plan `p` leaves it."""
    rates = {lf.up_veth: lf.spine_mbit for lf in p.leaves}
    rates |= {lf.down_veth: lf.spine_mbit for lf in p.leaves}
    rates |= {n.up_veth: n.nic_out_mbit for n in p.nodes}
    rates |= {n.down_veth: n.nic_in_mbit for n in p.nodes}
    return Current(
        plan=p,
        labels={n.name: wanted_labels(n) | OTHER for n in p.nodes},
        links=frozenset(link_names(p)) if p.mode == "netns" else frozenset(),
        rates=rates if p.mode == "netns" else {},
        cpu={n.name: n.cpu for n in p.nodes if n.cpu is not None} if cpu_controller else None,
    )


def lines(changes: list[Change]) -> list[str]:
    return [ch.line() for ch in changes]


def test_identical_up_changes_nothing() -> None:
    for p in (plan(4), plan(6, nic_mbit=200, node_cpu=0.5), plan(2, mode=MODE_LOOPBACK)):
        assert diff(running(p), p) == []


def test_nic_rate_reshapes_every_node_and_the_spine_and_relabels() -> None:
    old, new = plan(4, nic_mbit=1000), plan(4, nic_mbit=200)
    changes = diff(running(old), new)
    reshaped = [ch for ch in changes if isinstance(ch, Reshaped)]
    assert [r.subject for r in reshaped] == [
        "leaf-0 spine link",
        *(f"cascade-node-{i} NIC" for i in range(4)),
    ]
    assert reshaped[1].ends == (("out", "cxnu0", 1000, 200), ("in", "cxnd0", 1000, 200))
    relabeled = [ch for ch in changes if isinstance(ch, Relabeled)]
    assert [r.node for r in relabeled] == [f"cascade-node-{i}" for i in range(4)]
    assert relabeled[0].labels == (
        (c.LABEL_NIC_IN_MBIT, "1000", "200"),
        (c.LABEL_NIC_OUT_MBIT, "1000", "200"),
    )
    assert relabeled[0].patch() == {
        "metadata": {"labels": {c.LABEL_NIC_IN_MBIT: "200", c.LABEL_NIC_OUT_MBIT: "200"}}
    }
    assert changes[-1] == AgentRestarted()
    assert len(changes) == 1 + 4 + 4 + 1
    assert "reshape cascade-node-2 NIC: 1000 -> 200 Mbit/s" in lines(changes)
    assert (
        "relabel cascade-node-0: cascade.dev/nic-in-mbit 1000 -> 200, "
        "cascade.dev/nic-out-mbit 1000 -> 200"
    ) in lines(changes)


def test_explicit_spine_rate_stays_when_only_the_nic_changes() -> None:
    old, new = plan(4, spine_mbit=500), plan(4, nic_mbit=200, spine_mbit=500)
    subjects = [ch.subject for ch in diff(running(old), new) if isinstance(ch, Reshaped)]
    assert subjects == [f"cascade-node-{i} NIC" for i in range(4)]


def test_node_count_up_and_down() -> None:
    three, four = plan(3), plan(4)
    grown = diff(running(three), four)
    assert grown == [NodeAdded("cascade-node-3", "leaf-0", "198.18.3.1"), AgentRestarted()]
    shrunk = diff(running(four), three)
    assert shrunk == [NodeRemoved("cascade-node-3", served=True), AgentRestarted()]
    assert lines(grown)[0] == "+ node cascade-node-3 (leaf-0, 198.18.3.1)"
    assert lines(shrunk)[0].startswith("- node cascade-node-3 (pods drained, Node deleted")


def test_leaves_come_and_go_with_the_nodes() -> None:
    four, six = plan(4, nodes_per_leaf=4), plan(6, nodes_per_leaf=4)
    grown = diff(running(four), six)
    assert LeafAdded("leaf-1", 1000) in grown
    assert not [ch for ch in grown if isinstance(ch, Reshaped)]  # new links, not reshaped
    shrunk = diff(running(six), four)
    assert shrunk[:3] == [
        NodeRemoved("cascade-node-4", served=True),
        NodeRemoved("cascade-node-5", served=True),
        LeafRemoved("leaf-1"),
    ]


def test_regrouping_leaves_relabels_the_moved_nodes() -> None:
    old, new = plan(4, nodes_per_leaf=4), plan(4, nodes_per_leaf=2)
    relabeled = {ch.node: ch.labels for ch in diff(running(old), new) if isinstance(ch, Relabeled)}
    assert set(relabeled) == {"cascade-node-2", "cascade-node-3"}
    assert (c.LABEL_LEAF, "leaf-0", "leaf-1") in relabeled["cascade-node-2"]
    assert (c.LABEL_ZONE, "zone-a", "zone-b") in relabeled["cascade-node-2"]


def test_a_simulated_node_the_agent_does_not_serve_is_removed() -> None:
    p = plan(2)
    cur = running(p)
    cur = replace(cur, labels={**cur.labels, "cascade-node-7": {}, "real-node": {}})
    assert diff(cur, p) == [NodeRemoved("cascade-node-7", served=False)]


def test_cpu_quota_set_changed_and_lifted() -> None:
    none, half, quarter = plan(2), plan(2, node_cpu=0.5), plan(2, node_cpu=0.25)
    set_ = diff(running(none), half)
    assert [ch for ch in set_ if isinstance(ch, CpuQuota)] == [
        CpuQuota("cascade-node-0", None, 0.5),
        CpuQuota("cascade-node-1", None, 0.5),
    ]
    label = next(ch for ch in set_ if isinstance(ch, Relabeled))
    assert label.labels == ((LABEL_NODE_CPU, None, "0.5"),)
    assert "cpu quota cascade-node-0: none -> 0.5 core(s)" in lines(set_)
    changed = diff(running(half), quarter)
    assert CpuQuota("cascade-node-1", 0.5, 0.25) in changed
    lifted = diff(running(half), none)
    assert CpuQuota("cascade-node-0", 0.5, None) in lifted
    relabel = next(ch for ch in lifted if isinstance(ch, Relabeled))
    assert relabel.patch() == {"metadata": {"labels": {LABEL_NODE_CPU: None}}}
    assert relabel.line() == "relabel cascade-node-0: cascade.dev/node-cpu 0.5 -> (none)"


def test_cpu_quotas_not_compared_without_a_cpu_controller() -> None:
    changes = diff(running(plan(2), cpu_controller=False), plan(2))
    assert changes == []


def test_storage_rate_restarts_the_agent() -> None:
    old, new = plan(2, storage_mbit=100), plan(2, storage_mbit=None)
    changes = diff(running(old), new)
    assert changes == [StorageRate(100, None), AgentRestarted()]
    assert lines(changes)[0] == (
        "storage read rate: 100 Mbit/s -> unlimited (pods started from now on)"
    )


def test_drift_is_repaired_without_restarting_the_agent() -> None:
    p = plan(2, nic_mbit=300)
    cur = running(p)
    labels = {**cur.labels, "cascade-node-1": {**cur.labels["cascade-node-1"], c.LABEL_LEAF: "x"}}
    cur = replace(cur, labels=labels, rates={**cur.rates, "cxnd0": 50, "cxnu0": 300})
    changes = diff(cur, p)
    assert changes == [
        Reshaped("cascade-node-0 NIC", (("in", "cxnd0", 50, 300),)),
        Relabeled("cascade-node-1", ((c.LABEL_LEAF, "x", "leaf-0"),)),
    ]
    assert lines(changes)[0] == "reshape cascade-node-0 NIC: in 50 -> 300 Mbit/s"
    unshaped = replace(cur, labels=running(p).labels, rates={**cur.rates, "cxnd0": 300})
    del_rates = {k: v for k, v in unshaped.rates.items() if k != "cxlu0"}
    assert lines(diff(replace(unshaped, rates=del_rates), p)) == [
        "reshape leaf-0 spine link: up unshaped -> 300 Mbit/s"
    ]


def test_a_fresh_cluster_adds_everything_and_restarts_nothing() -> None:
    p = plan(5, nodes_per_leaf=4)
    changes = diff(Current(), p)
    assert changes[:5] == [NodeAdded(n.name, n.leaf, n.ip) for n in p.nodes]
    assert changes[5:] == [LeafAdded("leaf-0", 1000), LeafAdded("leaf-1", 1000)]


def test_loopback_has_no_fabric_to_reshape() -> None:
    old, new = plan(2, mode=MODE_LOOPBACK), plan(2, mode=MODE_LOOPBACK, nic_mbit=100)
    changes = diff(running(old), new)
    assert not [ch for ch in changes if isinstance(ch, Reshaped)]
    assert len([ch for ch in changes if isinstance(ch, Relabeled)]) == 2


def test_same_cores_is_the_kernels_resolution() -> None:
    assert same_cores(0.25, 0.25000001)
    assert not same_cores(0.25, 0.26)
    assert same_cores(None, None)
    assert not same_cores(None, 0.5)


def test_tbf_rates_from_tc_json() -> None:
    qdiscs = [
        {"kind": "tbf", "dev": "cxnu0", "root": True, "options": {"rate": 125000000}},
        {"kind": "tbf", "dev": "cxnd0", "root": True, "options": {"rate": 25000000}},
        {"kind": "tbf", "dev": "cxlu0", "root": True, "options": {"rate": 187500000}},
        {"kind": "noqueue", "dev": "lo", "root": True, "options": {}},
        {"kind": "tbf", "dev": "inner", "root": False, "options": {"rate": 1}},
    ]
    assert parse_tbf_rates(json.dumps(qdiscs)) == {"cxnu0": 1000, "cxnd0": 200, "cxlu0": 1500}
    assert parse_tbf_rates("") == {}
