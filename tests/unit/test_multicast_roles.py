"""Each node's part of a plan, derived from the spec alone."""

from __future__ import annotations

import pytest

from cascade_api.scaleplan import Block, PlanStrategy, Source, SourceTier
from cascade_planner import plan_spec
from cascade_worker.multicast.roles import participants, role_for


def blocks(n: int) -> list[Block]:
    return [
        Block(index=i, layer_start=i, layer_end=i + 1, bytes=10, checksum=f"c{i}") for i in range(n)
    ]


def test_chain_roles_know_their_upstreams_nearest_first() -> None:
    spec = plan_spec(
        "chain",
        [Source(pod="s", tier=SourceTier.GPU)],
        ["a", "b", "c"],
        blocks(4),
        deployment="d",
        model_digest="m",
    )
    src = role_for(spec, "s")
    assert src.is_source and src.tier == "gpu" and src.leader == "s" and src.wanted == []
    c = role_for(spec, "c")
    assert not c.is_source and c.upstreams == ["b", "a", "s"]
    assert c.wanted == [0, 1, 2, 3] and c.fallbacks == ["s"]
    assert c.contacts == ["b", "a", "s"]
    assert role_for(spec, "a").upstreams == ["s"]
    assert participants(spec) == ["s", "a", "b", "c"]
    with pytest.raises(ValueError, match="not part"):
        role_for(spec, "zz")


def test_shifted_chain_order_is_the_wanted_order() -> None:
    spec = plan_spec(
        "chain",
        [Source(pod="s0", tier=SourceTier.GPU), Source(pod="s1", tier=SourceTier.HOST)],
        ["a", "b"],
        blocks(4),
        deployment="d",
        model_digest="m",
        shift=True,
    )
    b = role_for(spec, "b")
    assert b.upstreams == ["s1"] and b.wanted == [2, 3, 0, 1]
    assert b.fallbacks == ["s1", "s0"] and b.leader == "s0"
    assert role_for(spec, "s1").tier == "host"


def test_binomial_roles_list_incoming_steps_and_their_subgroup_source() -> None:
    spec = plan_spec(
        PlanStrategy.BINOMIAL,
        [Source(pod="s0", tier=SourceTier.GPU), Source(pod="s1", tier=SourceTier.HOST)],
        [f"t{i}" for i in range(6)],
        blocks(4),
        deployment="d",
        model_digest="m",
    )
    for pod in [f"t{i}" for i in range(6)]:
        role = role_for(spec, pod)
        steps = [s for s, _, _ in role.incoming]
        assert steps == sorted(steps) and len(steps) == len(set(steps))
        assert sorted(b for _, _, b in role.incoming) == [0, 1, 2, 3]
        assert sorted(role.wanted) == [0, 1, 2, 3] and role.upstreams == []
    assert role_for(spec, "t0").fallbacks == ["s0", "s1"]
    assert role_for(spec, "t5").fallbacks == ["s1", "s0"]
