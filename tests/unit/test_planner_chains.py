"""Chains: balanced lengths, topology grouping, shifted orders; the ScalePlan spec builder."""

from __future__ import annotations

import pytest

from cascade_api.scaleplan import Block, PlanStrategy, Source, SourceTier
from cascade_planner import chain_plan, estimate_seconds, plan_spec, simulate


def test_one_source_one_chain_in_target_order() -> None:
    (chain,) = chain_plan(["s"], ["a", "b", "c"], 4)
    assert chain.source == "s" and chain.hops == ["a", "b", "c"]
    assert chain.blocks == [0, 1, 2, 3]


@pytest.mark.parametrize(("k", "n"), [(2, 5), (3, 7), (2, 2), (4, 9)])
def test_several_sources_balance_chain_lengths(k: int, n: int) -> None:
    sources = [f"s{i}" for i in range(k)]
    targets = [f"t{i}" for i in range(n)]
    chains = chain_plan(sources, targets, 8)
    assert [c.source for c in chains] == sources
    lengths = [len(c.hops) for c in chains]
    assert max(lengths) - min(lengths) <= 1
    assert sorted(t for c in chains for t in c.hops) == sorted(targets)


def test_more_sources_than_targets_uses_only_what_it_needs() -> None:
    chains = chain_plan(["s0", "s1", "s2"], ["t0"], 3)
    assert len(chains) == 1 and chains[0].hops == ["t0"]


def test_leaf_aware_chains_stay_on_their_leaf_first() -> None:
    leaf = {"s0": "L0", "s1": "L1", "a": "L1", "b": "L0", "c": "L1", "d": "L0", "e": "L2"}
    chains = chain_plan(["s0", "s1"], ["a", "b", "c", "d", "e"], 4, leaf_of=leaf)
    by_source = {c.source: c.hops for c in chains}
    assert by_source["s0"][:2] == ["b", "d"]
    assert by_source["s1"][:2] == ["a", "c"]
    assert "e" in by_source["s0"] + by_source["s1"]
    for hops in by_source.values():  # each leaf's pods are consecutive in a chain
        leaves = [leaf[h] for h in hops]
        assert leaves == sorted(leaves, key=leaves.index)


def test_shifted_orders_start_chains_at_different_blocks() -> None:
    chains = chain_plan(["s0", "s1"], ["a", "b", "c", "d"], 6, shift=True)
    assert chains[0].blocks == [0, 1, 2, 3, 4, 5]
    assert chains[1].blocks == [3, 4, 5, 0, 1, 2]


def test_chain_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        chain_plan([], ["a"], 2)
    with pytest.raises(ValueError):
        chain_plan(["s"], ["s"], 2)


def blocks(n: int, size: int = 1000) -> list[Block]:
    return [
        Block(index=i, layer_start=i, layer_end=i + 1, bytes=size, checksum=f"c{i}")
        for i in range(n)
    ]


def test_plan_spec_chain_and_estimate() -> None:
    src = [Source(pod="s", tier=SourceTier.HOST)]
    spec = plan_spec(
        "chain",
        src,
        ["a", "b"],
        blocks(4),
        deployment="d",
        model_digest="m",
        nic_bytes_per_s=1000.0,
        chunk_bytes=100,
    )
    assert spec.strategy == PlanStrategy.CHAIN and len(spec.chains) == 1
    # 4000 bytes at 1000 B/s plus one 100-byte chunk of fill per hop.
    assert spec.predicted_completion_seconds == pytest.approx(4.2)
    assert spec.to_api()["chains"][0]["hops"] == ["a", "b"]


def test_plan_spec_binomial_is_replayable() -> None:
    src = [Source(pod="g", tier=SourceTier.GPU), Source(pod="h", tier=SourceTier.HOST)]
    targets = [f"t{i}" for i in range(6)]
    spec = plan_spec(
        PlanStrategy.BINOMIAL, src, targets, blocks(8), deployment="d", model_digest="m", k=2
    )
    assert len(spec.block_orders) == 2 and spec.schedule
    replay = simulate(spec.schedule, {"g": range(8), "h": range(8)})
    assert replay.complete(targets, 8)
    assert estimate_seconds(spec, 1000.0) == pytest.approx(len(spec.schedule) * 1.0)
    one = plan_spec("binomial", src, targets, blocks(8), deployment="d", model_digest="m", k=1)
    assert [s.pod for s in one.sources] == ["g"]
    with pytest.raises(ValueError):
        plan_spec("binomial", src, targets, blocks(8), deployment="d", model_digest="m", k=3)
