"""BlitzScale plans: NVLink grouping, interference pruning, greedy chains by bandwidth/leaf."""

from __future__ import annotations

from typing import Any

import pytest

from cascade_api import constants as c
from cascade_planner import PlanningError, PlanningReason, simulate, topology_from_nodes
from cascade_planner.blitz import SourceOffer, greedy_chains, group_by_nvlink, prune_sources
from cascade_planner.topology import BYTES_PER_MBIT, DEFAULT_GOODPUT, Topology, send_capped


def node(
    name: str, leaf: str = "L1", clique: str = "", nic: int = 100_000, out: int | None = None
) -> dict[str, Any]:
    labels = {
        c.LABEL_LEAF: leaf,
        c.LABEL_NIC_IN_MBIT: str(nic),
        c.LABEL_NIC_OUT_MBIT: str(out or nic),
    }
    if clique:
        labels[c.LABEL_NVLINK_CLIQUE] = clique
    return {"metadata": {"name": name, "labels": labels}}


def topo_of(*nodes: dict[str, Any]) -> Topology:
    return topology_from_nodes(nodes)


def offers(topo: Topology, *pods: str) -> list[SourceOffer]:
    kept, _ = prune_sources(pods, topo, {}, {}, 0.5)
    return kept


def test_nvlink_domains_collapse_to_one_network_receiver() -> None:
    topo = topo_of(
        node("s"),
        node("a", clique="q", nic=100_000),
        node("b", clique="q", nic=400_000),
        node("c", clique="q"),
        node("d"),
    )
    groups = group_by_nvlink(["a", "b", "c", "d"], topo, {})
    assert [(g.leader, g.members) for g in groups] == [
        ("b", ["a", "c"]),
        ("d", []),
    ]  # fastest NIC-in leads
    (chain,) = greedy_chains(offers(topo, "s"), groups, topo, {}, range(4))
    # Members follow their leader: they copy from it over NVLink, not the network.
    assert chain.hops.index("a") == chain.hops.index("b") + 1
    assert chain.hops.index("c") == chain.hops.index("b") + 2


def test_pods_on_one_node_share_a_domain() -> None:
    topo = topo_of(node("n1"), node("n2"))
    groups = group_by_nvlink(["p1", "p2", "p3"], topo, {"p1": "n1", "p2": "n1", "p3": "n2"})
    assert [(g.leader, g.members) for g in groups] == [("p1", ["p2"]), ("p3", [])]


def test_busy_sources_are_pruned_and_partial_load_reduces_the_offer() -> None:
    topo = topo_of(node("s1"), node("s2"), node("s3"))
    kept, pruned = prune_sources(["s1", "s2", "s3"], topo, {}, {"s1": 1.0, "s2": 0.25}, 0.5)
    assert pruned == ["s1"]
    assert [o.pod for o in kept] == ["s3", "s2"]  # idle first
    assert kept[1].bandwidth == pytest.approx(0.75 * 100_000 * BYTES_PER_MBIT * DEFAULT_GOODPUT)
    with pytest.raises(PlanningError) as err:
        prune_sources(["s1"], topo, {}, {"s1": 0.9}, 0.5)
    assert err.value.reason == PlanningReason.SOURCES_BUSY


def test_fastest_links_first() -> None:
    topo = topo_of(
        node("s", nic=400_000),
        node("slow", nic=50_000),
        node("mid", nic=100_000),
        node("fast", nic=200_000),
    )
    chains = greedy_chains(
        offers(topo, "s"), group_by_nvlink(["slow", "mid", "fast"], topo, {}), topo, {}, range(2)
    )
    # The 400G source serves the fastest target first and has 200G left for a second
    # chain; then the 200G tail `fast` outbids the source's last 100G and takes `slow`.
    assert [ch.hops for ch in chains] == [["fast", "slow"], ["mid"]]
    assert {ch.source for ch in chains} == {"s"}


def test_chain_order_within_one_chain_is_by_bandwidth() -> None:
    topo = topo_of(node("s"), node("a", nic=25_000), node("b", nic=100_000), node("c", nic=50_000))
    (chain,) = greedy_chains(
        offers(topo, "s"), group_by_nvlink(["a", "b", "c"], topo, {}), topo, {}, range(2)
    )
    assert chain.hops == ["b", "c", "a"]


def test_equal_sources_get_balanced_chains() -> None:
    topo = topo_of(*[node(f"s{i}") for i in range(3)], *[node(f"t{i}") for i in range(8)])
    targets = [f"t{i}" for i in range(8)]
    chains = greedy_chains(
        offers(topo, "s0", "s1", "s2"), group_by_nvlink(targets, topo, {}), topo, {}, range(4)
    )
    lengths = sorted(len(ch.hops) for ch in chains)
    assert lengths == [2, 3, 3]
    assert sorted(h for ch in chains for h in ch.hops) == sorted(targets)


def test_leaf_locality() -> None:
    nodes = [node("s0", "L0"), node("s1", "L1")]
    nodes += [node(f"a{i}", "L0") for i in range(3)] + [node(f"b{i}", "L1") for i in range(3)]
    nodes += [node(f"c{i}", "L2") for i in range(2)]
    topo = topo_of(*nodes)
    targets = ["b0", "c0", "a0", "b1", "a1", "c1", "a2", "b2"]
    chains = greedy_chains(
        offers(topo, "s0", "s1"), group_by_nvlink(targets, topo, {}), topo, {}, range(4)
    )
    leaf = {n["metadata"]["name"]: n["metadata"]["labels"][c.LABEL_LEAF] for n in nodes}
    by_source = {ch.source: [leaf[h] for h in ch.hops] for ch in chains}
    assert by_source["s0"][:3] == ["L0"] * 3 and by_source["s1"][:3] == ["L1"] * 3
    for leaves in by_source.values():  # each leaf's pods are consecutive in a chain
        assert leaves == sorted(leaves, key=leaves.index)


def test_a_source_inside_an_nvlink_domain_feeds_it_locally() -> None:
    topo = topo_of(node("s", clique="q"), node("a", clique="q"), node("b", clique="q"), node("x"))
    chains = greedy_chains(
        offers(topo, "s"), group_by_nvlink(["a", "b", "x"], topo, {}), topo, {}, range(2)
    )
    assert {tuple(ch.hops) for ch in chains} == {("a", "b"), ("x",)}


def test_chains_are_executable() -> None:
    topo = topo_of(node("s"), *[node(f"t{i}", clique=f"q{i % 3}") for i in range(7)])
    targets = [f"t{i}" for i in range(7)]
    chains = greedy_chains(
        offers(topo, "s"), group_by_nvlink(targets, topo, {}), topo, {}, range(3)
    )
    assert sorted(h for ch in chains for h in ch.hops) == sorted(targets)
    assert all(ch.blocks == [0, 1, 2] for ch in chains)
    assert simulate([], {"s": range(3)}).complete(["s"], 3)


def test_a_paced_source_feeding_its_own_node_has_no_pace_left_for_the_network() -> None:
    # The workers' Pacer is one per process: a source that already feeds a target on its
    # own node sends nothing faster by heading a network chain too. (Dev cluster, burst
    # run 6: host-0 fed two targets at half pace each while host-2 sent nothing.)
    topo = send_capped(topo_of(*(node(f"n{i}") for i in range(5))), 6)
    on = {"h0": "n0", "h1": "n1", "h2": "n2", "t0": "n0", "t1": "n3", "t2": "n4"}
    groups = group_by_nvlink(["t0", "t1", "t2"], topo, on)
    chains = greedy_chains(offers(topo, "h0", "h1", "h2"), groups, topo, on, range(4))
    assert sorted((ch.source, ch.hops) for ch in chains) == [
        ("h0", ["t0"]),
        ("h1", ["t1"]),
        ("h2", ["t2"]),
    ]
    # One source: its local target forwards to the rest (one chain at the full pace),
    # not a second chain sharing the source's pace.
    (chain,) = greedy_chains(offers(topo, "h0"), groups, topo, on, range(4))
    assert chain.source == "h0" and chain.hops[0] == "t0" and len(chain.hops) == 3


def test_unpaced_sources_keep_their_network_offer_beside_a_local_feed() -> None:
    # Without a pace the local link (NVLink) and the NIC are separate limits.
    topo = topo_of(node("n0"), node("n1"))
    on = {"h0": "n0", "t0": "n0", "t1": "n1"}
    groups = group_by_nvlink(["t0", "t1"], topo, on)
    chains = greedy_chains(offers(topo, "h0"), groups, topo, on, range(4))
    assert sorted((ch.source, ch.hops) for ch in chains) == [("h0", ["t0"]), ("h0", ["t1"])]
