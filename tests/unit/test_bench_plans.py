"""Roles and baseline plans for the benchmark."""

from __future__ import annotations

import pytest

from cascade_api.scaleplan import Chain, PlanStrategy, ScalePlanSpec
from cascade_bench import plans


def base_plan() -> ScalePlanSpec:
    rows = [
        {"index": i, "layer_start": 2 * i, "layer_end": 2 * i + 2, "nbytes": 10, "checksum": "x"}
        for i in range(3)
    ]
    return ScalePlanSpec(
        deployment="bench",
        model_digest="d",
        blocks=plans.blocks_table(rows),
        sources=plans.host_sources(["bench-0"]),
        targets=["bench-1", "bench-2", "bench-3"],
        strategy=PlanStrategy.CHAIN,
        chains=[Chain(source="bench-0", hops=["bench-1", "bench-2", "bench-3"])],
    )


def test_target_mib_converts_decimal_megabytes() -> None:
    assert plans.target_mib(200) == pytest.approx(190.7348, rel=1e-5)


def test_split_roles() -> None:
    pods = [f"bench-{i}" for i in range(4)]
    assert plans.split_roles(pods, 1) == (["bench-0"], ["bench-1", "bench-2", "bench-3"])
    assert plans.split_roles(pods, 2) == (["bench-0", "bench-1"], ["bench-2", "bench-3"])
    with pytest.raises(ValueError):
        plans.split_roles(pods, 4)
    with pytest.raises(ValueError):
        plans.split_roles(pods, 0)


def test_unicast_plan_feeds_every_target_from_a_source() -> None:
    plan = plans.unicast_plan(base_plan(), ["bench-0"])
    assert plan.strategy == PlanStrategy.CHAIN
    assert [(c.source, c.hops) for c in plan.chains] == [
        ("bench-0", ["bench-1"]),
        ("bench-0", ["bench-2"]),
        ("bench-0", ["bench-3"]),
    ]
    assert plan.blocks == base_plan().blocks and plan.targets == base_plan().targets


def test_unicast_chains_round_robin_over_sources() -> None:
    chains = plans.unicast_chains(["s0", "s1"], ["a", "b", "c"])
    assert [c.source for c in chains] == ["s0", "s1", "s0"]


def test_blocks_table_and_peers() -> None:
    block = base_plan().blocks[1]
    assert (block.index, block.layer_start, block.layer_end, block.bytes) == (1, 2, 4, 10)
    assert plans.peer_map({"bench-0": "198.18.0.2"}, 7000) == {"bench-0": "198.18.0.2:7000"}
