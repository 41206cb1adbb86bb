"""plan(): auto's choice, typed errors, determinism, and what the spec carries."""

from __future__ import annotations

import gc
import random
from typing import Any

import pytest

from cascade_api import constants as c
from cascade_api.scaleplan import Block, PlanStrategy, ScalePlanSpec, Source, SourceTier
from cascade_planner import (
    FabricParams,
    PlanningError,
    PlanningReason,
    PlanRequest,
    plan,
    plan_candidates,
    simulate,
    topology_from_nodes,
)
from cascade_planner import planner as planner_module


def nodes(n: int, leaf: int = 100, clique: int = 1) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        labels = {c.LABEL_LEAF: f"L{i // leaf}"}
        if clique > 1:
            labels[c.LABEL_NVLINK_CLIQUE] = f"q{i // clique}"
        out.append({"metadata": {"name": f"n{i}", "labels": labels}})
    return out


def request(ns: int, t: int, b: int, size: int, **kw: Any) -> PlanRequest:
    fields: dict[str, Any] = {
        "deployment": "d",
        "model_digest": "m",
        "blocks": [
            Block(index=i, layer_start=i, layer_end=i + 1, bytes=size, checksum="x")
            for i in range(b)
        ],
        "sources": [Source(pod=f"n{i}", tier=SourceTier.GPU) for i in range(ns)],
        "targets": [f"n{i}" for i in range(ns, ns + t)],
        "strategy": "auto",
    }
    fields.update(kw)
    return PlanRequest(**fields)


@pytest.mark.parametrize(
    ("name", "topo_kw", "req_kw", "winner"),
    [
        # One source, a big model: a chain moves it in about M/B; binomial needs extra steps.
        ("one source, big model", {}, {"ns": 1, "t": 63, "b": 16, "size": 10**9}, "chain"),
        # One source, blocks no bigger than a chunk: every chain hop adds a block of fill.
        ("one source, tiny blocks", {}, {"ns": 1, "t": 63, "b": 8, "size": 1 << 20}, "binomial"),
        # Per-hop start latency dominates: log-depth beats a 63-hop chain.
        (
            "latency-bound fabric",
            {},
            {"ns": 1, "t": 63, "b": 16, "size": 10**7, "hop_latency_s": 1e-3},
            "binomial",
        ),
        # A thin spine: binomial sends across it in every step, chains once per leaf.
        (
            "thin spine",
            {"leaf": 8, "spine": 25_000},
            {"ns": 1, "t": 63, "b": 16, "size": 10**8},
            "chain",
        ),
        ("many sources", {}, {"ns": 8, "t": 56, "b": 16, "size": 10**8}, "chain"),
        ("many sources, tiny blocks", {}, {"ns": 8, "t": 56, "b": 8, "size": 1 << 20}, "binomial"),
    ],
)
def test_auto_picks_the_faster_plan(
    name: str, topo_kw: dict[str, Any], req_kw: dict[str, Any], winner: str
) -> None:
    params = FabricParams(spine_mbit=topo_kw.get("spine"))
    topo = topology_from_nodes(nodes(64, leaf=topo_kw.get("leaf", 100)), params)
    req = request(**req_kw)
    chosen, other = plan_candidates(req, topo)
    assert chosen.spec.strategy == winner, name
    assert chosen.prediction.completion <= other.prediction.completion
    assert plan(req, topo) == chosen.spec
    assert "auto:" in chosen.spec.reason


def test_spec_carries_predictions_and_round_trips() -> None:
    topo = topology_from_nodes(nodes(16, clique=4))
    for strategy in ("chain", "binomial"):
        spec = plan(request(2, 14, 8, 10**6, strategy=strategy, k=2), topo)
        assert [p.pod for p in spec.predictions] == spec.targets
        assert spec.predicted_completion_seconds == max(
            p.complete_seconds for p in spec.predictions
        )
        assert ScalePlanSpec.model_validate(spec.to_api()) == spec
        if strategy == "binomial":
            replay = simulate(spec.schedule, {s.pod: range(8) for s in spec.sources})
            assert replay.complete(spec.targets, 8)
        else:
            assert sorted(h for ch in spec.chains for h in ch.hops) == sorted(spec.targets)
            assert any(p.nvlink for p in spec.predictions)  # domain members copy over NVLink


def test_plans_are_deterministic_whatever_the_node_order() -> None:
    raw = nodes(200, leaf=32, clique=3)
    req = request(4, 60, 16, 10**7, serving_out={"n1": 0.3})
    shuffled = list(raw)
    random.Random(1).shuffle(shuffled)
    for strategy in ("chain", "binomial", "auto"):
        r = PlanRequest(**{**req.__dict__, "strategy": strategy})
        a = plan(r, topology_from_nodes(raw)).to_api()
        assert a == plan(r, topology_from_nodes(raw)).to_api()
        assert a == plan(r, topology_from_nodes(shuffled)).to_api()


def test_busy_sources_are_pruned_and_reported() -> None:
    topo = topology_from_nodes(nodes(8))
    spec = plan(request(3, 5, 4, 10**6, strategy="chain", serving_out={"n0": 1.0}), topo)
    assert [s.pod for s in spec.sources] == ["n1", "n2"]
    assert "pruned busy sources: n0" in spec.reason


def reason_of(req: PlanRequest, n: int = 8) -> PlanningReason:
    with pytest.raises(PlanningError) as err:
        plan(req, topology_from_nodes(nodes(n)))
    assert err.value.message
    return err.value.reason


def test_errors_are_typed_reasons() -> None:
    assert reason_of(request(0, 3, 4, 10)) == PlanningReason.NO_SOURCES
    assert reason_of(request(1, 0, 4, 10)) == PlanningReason.NO_TARGETS
    assert reason_of(request(2, 3, 4, 10, k=3)) == PlanningReason.INSUFFICIENT_SOURCES
    assert (
        reason_of(request(2, 3, 4, 10, k=2, serving_out={"n1": 0.9}))
        == PlanningReason.INSUFFICIENT_SOURCES
    )
    assert (
        reason_of(request(2, 3, 4, 10, serving_out={"n0": 1, "n1": 1}))
        == PlanningReason.SOURCES_BUSY
    )
    held = {"n0": [0, 1], "n1": [1]}
    assert reason_of(request(2, 3, 4, 10, holdings=held)) == PlanningReason.MISSING_BLOCKS
    held = {"n0": [0, 1], "n1": [2, 3]}
    assert reason_of(request(2, 3, 4, 10, holdings=held)) == PlanningReason.NO_SOURCES
    assert reason_of(request(1, 3, 0, 10)) == PlanningReason.INVALID_REQUEST
    assert reason_of(request(1, 3, 4, 10, strategy="tree")) == PlanningReason.INVALID_REQUEST
    assert reason_of(request(1, 3, 4, 10, k=0)) == PlanningReason.INVALID_REQUEST
    assert reason_of(request(1, 3, 4, 10, targets=["n1", "n0"])) == PlanningReason.INVALID_REQUEST


def test_partial_holders_are_skipped_not_fatal() -> None:
    topo = topology_from_nodes(nodes(8))
    spec = plan(request(2, 3, 4, 10, strategy="chain", holdings={"n0": [0], "n1": range(4)}), topo)
    assert [s.pod for s in spec.sources] == ["n1"]


def test_binomial_k_defaults_to_at_most_the_targets() -> None:
    topo = topology_from_nodes(nodes(8))
    spec = plan(request(4, 2, 4, 10, strategy=PlanStrategy.BINOMIAL), topo)
    assert len(spec.sources) == 2 and len(spec.block_orders) == 2


def test_planning_pauses_the_collector_and_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """plan() runs with the cyclic collector off (gc_pause.py) and leaves it as found."""
    seen: list[bool] = []
    original = planner_module._build

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return original(*args, **kwargs)

    monkeypatch.setattr(planner_module, "_build", spy)
    req, topo = request(3, 5, 4, 10**6, strategy="chain"), topology_from_nodes(nodes(8))
    assert gc.isenabled()
    plan(req, topo)
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        plan(req, topo)
        assert not gc.isenabled()  # off before: still off
    finally:
        gc.enable()


def test_the_planner_assumes_the_executors_chunk() -> None:
    """A chain hop's store-and-forward fill is the executor's chunk: one default."""
    from cascade_planner.spec import DEFAULT_CHUNK_BYTES
    from cascade_worker.multicast.runner import NodeOptions

    assert (
        PlanRequest(deployment="d", model_digest="m", blocks=[], sources=[], targets=[]).chunk_bytes
        == DEFAULT_CHUNK_BYTES
    )
    assert NodeOptions.chunk_bytes == DEFAULT_CHUNK_BYTES
