"""Flow model: max-min sharing, and predictions against closed forms."""

from __future__ import annotations

import math
from typing import Any

import pytest

from cascade_api import constants as c
from cascade_api.scaleplan import Block, Source, SourceTier
from cascade_planner import FabricParams, PlanRequest, plan, topology_from_nodes
from cascade_planner.flow import max_min_rates, predict_chains, predict_steps
from cascade_planner.topology import DEFAULT_GOODPUT

MBIT = 1e6 / 8 * DEFAULT_GOODPUT  # payload bytes/s per Mbit/s of line rate
B = 100_000 * MBIT  # default NIC rate, bytes/s


def cap_of(table: dict[str, float]) -> Any:
    return lambda link: table[link[0]]


def test_max_min_shares_a_link_and_gives_the_rest_to_others() -> None:
    paths = [[("x", 0)], [("x", 0), ("y", 0)], [("y", 0)]]
    rates = max_min_rates(paths, cap_of({"x": 10.0, "y": 4.0}))
    assert rates == pytest.approx([8.0, 2.0, 2.0])


def test_upstream_caps_a_chain_hop() -> None:
    paths = [[("slow", 0)], [("fast", 0)]]
    rates = max_min_rates(paths, cap_of({"slow": 2.0, "fast": 10.0}), upstream=[-1, 0])
    assert rates == pytest.approx([2.0, 2.0])
    # ...but a slow hop downstream does not slow the hop before it.
    rates = max_min_rates(paths[::-1], cap_of({"slow": 2.0, "fast": 10.0}), upstream=[-1, 0])
    assert rates == pytest.approx([10.0, 2.0])


def test_chain_matches_m_over_b_plus_fill() -> None:
    size, b, n, chunk = 1_000_000, 8, 5, 100_000
    times = predict_chains(
        [["s", *[f"t{i}" for i in range(n)]]],
        [[size] * b],
        lambda a, z: ((a, "out"), ("in", z)),
        lambda link: B,
        fill_bytes=chunk,
    )
    for j in range(n):
        assert times.complete[0][j] == pytest.approx((b * size + (j + 1) * chunk) / B)
        assert times.arrivals[0][j][0] == pytest.approx((size + (j + 1) * chunk) / B)


def test_binomial_steps_match_the_step_count_closed_form() -> None:
    steps = [[("s", f"t{i}", 1000)] for i in range(3)] + [[("a", "b", 1000), ("b", "a", 500)]]
    ends = predict_steps(steps, lambda a, z: ((a, "out"), ("in", z)), lambda link: 1000.0)
    assert ends == pytest.approx([1.0, 2.0, 3.0, 4.0])


def nodes(n: int, leaf_size: int = 100, **labels: str) -> list[dict[str, Any]]:
    return [
        {"metadata": {"name": f"n{i}", "labels": {c.LABEL_LEAF: f"L{i // leaf_size}", **labels}}}
        for i in range(n)
    ]


def request(strategy: str, n_targets: int, b: int, size: int, **kw: Any) -> PlanRequest:
    return PlanRequest(
        deployment="d",
        model_digest="m",
        blocks=[
            Block(index=i, layer_start=i, layer_end=i + 1, bytes=size, checksum="x")
            for i in range(b)
        ],
        sources=[Source(pod="n0", tier=SourceTier.GPU)],
        targets=[f"n{i}" for i in range(1, n_targets + 1)],
        strategy=strategy,
        **kw,
    )


def test_planned_chain_predicts_m_over_b_plus_fill() -> None:
    topo = topology_from_nodes(nodes(8))
    b, size, chunk = 16, 10_000_000, 1 << 20
    spec = plan(request("chain", 7, b, size, chunk_bytes=chunk), topo)
    assert spec.predicted_completion_seconds == pytest.approx((b * size + 7 * chunk) / B)
    first = [p.complete_seconds for p in spec.predictions]
    assert first == sorted(first)  # hop order


def test_planned_binomial_predicts_steps_times_block_over_b() -> None:
    topo = topology_from_nodes(nodes(8))
    b, size = 16, 10_000_000
    spec = plan(request("binomial", 7, b, size), topo)
    steps = b + int(math.log2(8)) - 1
    assert len(spec.schedule) == steps
    assert spec.predicted_completion_seconds == pytest.approx(steps * size / B, rel=1e-5)


def test_a_thin_spine_slows_chains_that_cross_it() -> None:
    # Two sources on leaf L0, targets on leaf L1: both chains cross one 100G spine link.
    raw = nodes(2, leaf_size=2) + [
        {"metadata": {"name": f"t{i}", "labels": {c.LABEL_LEAF: "L1"}}} for i in range(4)
    ]
    thin = topology_from_nodes(raw, FabricParams(spine_mbit=100_000))
    req = PlanRequest(
        deployment="d",
        model_digest="m",
        blocks=[Block(index=0, layer_start=0, layer_end=1, bytes=10**9, checksum="x")],
        sources=[Source(pod=f"n{i}", tier=SourceTier.GPU) for i in range(2)],
        targets=[f"t{i}" for i in range(4)],
        strategy="chain",
        chunk_bytes=1,
    )
    slow = plan(req, thin).predicted_completion_seconds
    fast = plan(req, topology_from_nodes(raw)).predicted_completion_seconds
    assert fast == pytest.approx(10**9 / B, rel=1e-5)  # plans carry 6 digits
    assert slow == pytest.approx(2 * 10**9 / B, rel=1e-5)  # two chains share the uplink
