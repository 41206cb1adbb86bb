"""TopologyIndex: node events update the fabric model to what a rebuild would give."""

from __future__ import annotations

import random
from typing import Any

import pytest
from planner_cases import random_nodes, random_params

from cascade_api import constants as c
from cascade_planner import FabricParams, Topology, TopologyIndex, topology_from_nodes


def same(a: Topology, b: Topology) -> None:
    assert a.nodes == b.nodes
    assert a._cap == b._cap
    assert sorted(a.warnings) == sorted(b.warnings)
    assert a.params == b.params


def relabelled(rng: random.Random, node: dict[str, Any]) -> dict[str, Any]:
    labels = dict(node["metadata"]["labels"])
    labels[c.LABEL_LEAF] = f"L{rng.randrange(12)}"
    labels[c.LABEL_ZONE] = f"z{rng.randrange(3)}"
    labels[c.LABEL_NIC_IN_MBIT] = rng.choice(["25000", "100000", "400000", "-1"])
    if rng.random() < 0.5:
        labels.pop(c.LABEL_NVLINK_CLIQUE, None)
    return {"metadata": {"name": node["metadata"]["name"], "labels": labels}}


@pytest.mark.parametrize("seed", range(30))
def test_events_leave_what_a_rebuild_of_the_nodes_gives(seed: int) -> None:
    rng = random.Random(seed)
    params = random_params(rng)
    raw = random_nodes(rng, rng.choice([4, 40, 120]))
    index = TopologyIndex(raw[: len(raw) // 2], params)
    now = {n["metadata"]["name"]: n for n in raw[: len(raw) // 2]}
    same(index.topology, topology_from_nodes(now.values(), params))
    for _ in range(60):
        roll = rng.random()
        if roll < 0.3 and now:
            name = rng.choice(sorted(now))
            assert index.remove_node(name)
            del now[name]
        elif roll < 0.6 and now:
            node = relabelled(rng, now[rng.choice(sorted(now))])
            index.relabel(node)
            now[node["metadata"]["name"]] = node
        else:
            node = rng.choice(raw)
            index.apply("ADDED", node)
            now[node["metadata"]["name"]] = node
        same(index.topology, topology_from_nodes(now.values(), params))
    assert len(index) == len(now)


def test_a_snapshot_keeps_its_nodes_while_the_index_moves_on() -> None:
    raw = [{"metadata": {"name": f"n{i}", "labels": {c.LABEL_LEAF: "a"}}} for i in range(4)]
    index = TopologyIndex(raw)
    snap = index.snapshot()
    index.remove_node("n0")
    assert "n0" in snap.nodes and "n0" not in index.topology.nodes and "n0" not in index
    same(snap, topology_from_nodes(raw))


def test_the_graph_follows_events() -> None:
    index = TopologyIndex([{"metadata": {"name": "a"}}])
    assert index.topology.graph.has_node(("node", "a"))
    index.add_node({"metadata": {"name": "b", "labels": {c.LABEL_LEAF: "far"}}})
    graph = index.topology.graph
    assert graph.has_edge(("node", "b"), ("leaf", ("", "far")))
    index.remove_node("b")
    assert not index.topology.graph.has_node(("leaf", ("", "far")))


def test_events_that_change_nothing_say_so() -> None:
    node = {"metadata": {"name": "a", "labels": {c.LABEL_LEAF: "x"}}}
    index = TopologyIndex([node], FabricParams(spine_mbit=1_000))
    assert not index.add_node({**node, "status": {"conditions": []}})  # a status update
    assert not index.remove_node("unknown")
    assert index.apply("DELETED", node) and len(index) == 0
    with pytest.raises(KeyError):
        index.relabel(node)


def test_a_leaf_of_every_node_updates_in_constant_time() -> None:
    """Without leaf labels all nodes share one leaf; its uplink is re-rated from exact
    running sums, not by summing its members again."""
    raw = [{"metadata": {"name": f"n{i}"}} for i in range(2_000)]
    index = TopologyIndex(raw)
    index.remove_node("n7")
    same(index.topology, topology_from_nodes(raw[:7] + raw[8:]))
