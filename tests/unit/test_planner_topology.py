"""Topology from Node objects: labels, defaults, capacities and paths."""

from __future__ import annotations

from typing import Any

import networkx as nx
import pytest

from cascade_api import constants as c
from cascade_planner import FabricParams, topology_from_nodes
from cascade_planner.topology import BYTES_PER_MBIT, DEFAULT_GOODPUT, DEFAULT_NIC_MBIT

NET = BYTES_PER_MBIT * DEFAULT_GOODPUT  # payload bytes/s per Mbit/s of line rate


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}}


def labelled(
    name: str, leaf: str, zone: str = "z1", clique: str = "", nic: int = 200_000
) -> dict[str, Any]:
    labels = {
        c.LABEL_ZONE: zone,
        c.LABEL_LEAF: leaf,
        c.LABEL_NIC_IN_MBIT: str(nic),
        c.LABEL_NIC_OUT_MBIT: str(nic // 2),
        c.LABEL_GPU_PRODUCT: "H100",
    }
    if clique:
        labels[c.LABEL_NVLINK_CLIQUE] = clique
    return {"metadata": {"name": name, "labels": labels}}


def test_labels_are_read() -> None:
    topo = topology_from_nodes([labelled("n1", "leaf-a", clique="q1")])
    info = topo.info("n1")
    assert (info.zone, info.leaf, info.domain, info.gpu_product) == (
        "z1",
        "leaf-a",
        "clique:q1",
        "H100",
    )
    assert info.nic_in == 200_000 * NET
    assert info.nic_out == 100_000 * NET


def test_unlabelled_nodes_get_the_documented_defaults() -> None:
    topo = topology_from_nodes([node("a"), {"metadata": {"name": "b"}}])
    a, b = topo.info("a"), topo.info("b")
    assert a.leaf_key == b.leaf_key  # one zone, one leaf
    assert a.domain == "node:a" and b.domain == "node:b"  # NVLink domain: the node alone
    assert a.gpu_product is None
    assert a.nic_in == a.nic_out == DEFAULT_NIC_MBIT * NET
    unknown = topo.info("never-seen")  # a pod's node the operator did not list
    assert unknown.leaf_key == a.leaf_key and unknown.nic_in == a.nic_in


def test_bad_nic_label_falls_back_and_warns() -> None:
    topo = topology_from_nodes(
        [node("a", **{c.LABEL_NIC_IN_MBIT: "fast", c.LABEL_NIC_OUT_MBIT: "-3"})]
    )
    assert topo.info("a").nic_in == DEFAULT_NIC_MBIT * NET
    assert len(topo.warnings) == 2 and "fast" in topo.warnings[0]


def test_paths_follow_the_fabric() -> None:
    topo = topology_from_nodes(
        [
            labelled("a", "L1", clique="q"),
            labelled("b", "L1", clique="q"),
            labelled("c", "L1"),
            labelled("d", "L2"),
            labelled("e", "L3", zone="z2"),
        ]
    )
    assert [v for _, v in topo.path("a", "b")] == [("nvl", "clique:q"), ("node", "b")]
    assert topo.path("a", "c") == (
        (("node", "a"), ("leaf", ("z1", "L1"))),
        (("leaf", ("z1", "L1")), ("node", "c")),
    )
    assert len(topo.path("a", "d")) == 4  # up to the spine and down
    assert len(topo.path("a", "e")) == 4  # zones joined without a limit by default
    nvl = topo.path("a", "b")[0]
    assert topo.capacity(nvl) == FabricParams().nvlink_mbit * BYTES_PER_MBIT
    # Every path is a real path in the networkx model.
    for src, dst in [("a", "b"), ("a", "c"), ("c", "d"), ("d", "e")]:
        links = topo.path(src, dst)
        assert all(topo.graph.has_edge(u, v) for u, v in links)
        assert nx.has_path(topo.graph, ("node", src), ("node", dst))


def test_spine_default_is_the_leafs_nic_sum_and_can_be_set() -> None:
    nodes = [labelled(f"n{i}", "L1", nic=100_000) for i in range(4)] + [labelled("m", "L2")]
    topo = topology_from_nodes(nodes)
    up = (("leaf", ("z1", "L1")), ("zone", "z1"))
    down = (("zone", "z1"), ("leaf", ("z1", "L1")))
    assert topo.capacity(up) == pytest.approx(4 * 50_000 * NET)  # NIC-out sum
    assert topo.capacity(down) == pytest.approx(4 * 100_000 * NET)  # NIC-in sum
    half = topology_from_nodes(nodes, FabricParams(oversubscription=2))
    assert half.capacity(up) == pytest.approx(2 * 50_000 * NET)
    fixed = topology_from_nodes(nodes, FabricParams(spine_mbit=10_000))
    assert fixed.capacity(up) == fixed.capacity(down) == 10_000 * NET


def test_zone_uplinks_only_when_set() -> None:
    nodes = [labelled("a", "L1"), labelled("b", "L2", zone="z2")]
    topo = topology_from_nodes(nodes, FabricParams(zone_mbit=5_000))
    links = topo.path("a", "b")
    assert len(links) == 6 and (("zone", "z1"), ("core", "")) in links
    assert topo.capacity((("zone", "z1"), ("core", ""))) == 5_000 * NET


def test_a_nodes_mtu_label_sets_the_payload_share_of_its_nic() -> None:
    def node(name: str, **labels: str) -> dict[str, Any]:
        rates = {c.LABEL_NIC_IN_MBIT: "1000", c.LABEL_NIC_OUT_MBIT: "1000"}
        return {"metadata": {"name": name, "labels": {**rates, **labels}}}

    topo = topology_from_nodes(
        [
            node("plain"),
            node("jumbo", **{c.LABEL_NIC_MTU: "9000"}),
            node("bad", **{c.LABEL_NIC_MTU: "100"}),
        ]
    )
    line = 1000 * BYTES_PER_MBIT
    assert topo.nodes["plain"].nic_in == pytest.approx(line * 1448 / 1514)
    assert topo.nodes["jumbo"].nic_out == pytest.approx(line * 8948 / 9014)
    assert topo.nodes["bad"].nic_in == topo.nodes["plain"].nic_in
    assert any("nic-mtu" in w and "bad" in w for w in topo.warnings)
