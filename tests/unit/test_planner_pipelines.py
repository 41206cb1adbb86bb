"""Execution pipelines across sub-groups (λScale Algorithm 2) and when they can start."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest

from cascade_api import constants as c
from cascade_api.scaleplan import Block, Source, SourceTier
from cascade_planner import PlanRequest, plan, topology_from_nodes
from cascade_planner.pipelines import candidates, cover, earliest_cover, form_pipelines


def blocks(b: int, layers_per_block: int = 2) -> list[Block]:
    return [
        Block(
            index=i,
            layer_start=i * layers_per_block,
            layer_end=(i + 1) * layers_per_block,
            bytes=1_000_000,
            checksum="x",
        )
        for i in range(b)
    ]


def test_candidates_take_one_receiver_per_sub_group_then_the_rest() -> None:
    groups = [["a1", "a2", "a3"], ["b1", "b2"], []]
    assert candidates(groups) == [["a1", "b1"], ["a2", "b2"], ["a3"]]
    assert candidates([["a1", "a2"], ["b1", "b2"]]) == [["a1", "b1"], ["a2", "b2"]]


def test_earliest_cover_finds_the_first_time_stages_cover_the_model() -> None:
    inf = float("inf")
    arrivals = {"a": [1.0, 2.0, 5.0, 6.0], "b": [5.0, 6.0, 1.0, 2.0], "x": [inf] * 4}
    assert cover(["a", "b"], arrivals, 1.5, 4) is None
    assert earliest_cover(["a", "b", "x"], arrivals, 4) == (2.0, [("a", 0, 2), ("b", 2, 4)])
    assert earliest_cover(["x"], arrivals, 4) is None


def test_form_pipelines_maps_layers_and_drops_useless_ones() -> None:
    arrivals = {
        "a": [1.0, 2.0, 5.0, 6.0],
        "b": [5.0, 6.0, 1.0, 2.0],
        "c": [1.0, 2.0, 3.0, 4.0],
        "d": [4.0, 4.0, 4.0, 4.0],
    }
    (pipe,) = form_pipelines([["a", "c"], ["b", "d"]], arrivals, blocks(4))
    assert pipe.ready_seconds == 2.0
    assert [(s.pod, s.layer_start, s.layer_end) for s in pipe.stages] == [("a", 0, 4), ("b", 4, 8)]
    # c and d: c completes at 4, d at 4; a pipeline could form at 4 too -> not earlier -> none.


def nodes(n: int) -> list[dict[str, Any]]:
    return [{"metadata": {"name": f"n{i}", "labels": {c.LABEL_LEAF: "L"}}} for i in range(n)]


def kway_request(
    k: int, targets: int, b: int, strategy: str = "binomial", **kw: Any
) -> PlanRequest:
    return PlanRequest(
        deployment="d",
        model_digest="m",
        blocks=blocks(b),
        sources=[Source(pod=f"n{i}", tier=SourceTier.GPU) for i in range(k)],
        targets=[f"n{i}" for i in range(k, k + targets)],
        strategy=strategy,
        k=k,
        **kw,
    )


@pytest.mark.parametrize(("k", "targets", "b"), [(2, 6, 8), (4, 12, 8), (2, 14, 16), (3, 9, 9)])
def test_kway_binomial_forms_pipelines_long_before_completion(k: int, targets: int, b: int) -> None:
    spec = plan(kway_request(k, targets, b), topology_from_nodes(nodes(k + targets)))
    assert spec.execution_pipelines
    complete = {p.pod: p.complete_seconds for p in spec.predictions}
    step = 1_000_000 / (100_000 * 1e6 / 8)  # one block over one 100G NIC
    group_of = {t: i for i, o in enumerate(spec.block_orders) for t in _group(spec, o.source)}
    for pipe in spec.execution_pipelines:
        assert pipe.ready_seconds is not None
        layers = [(s.layer_start, s.layer_end) for s in pipe.stages]
        assert layers[0][0] == 0 and layers[-1][1] == 2 * b  # covers the model...
        assert all(x[1] == y[0] for x, y in itertools.pairwise(layers))  # ...in order
        assert pipe.ready_seconds < min(complete[s.pod] for s in pipe.stages)
        assert len({group_of[s.pod] for s in pipe.stages}) == len(pipe.stages)  # across groups
    # The first pipeline is ready after about b/k blocks plus the log-depth ramp.
    first = min(p.ready_seconds or 0.0 for p in spec.execution_pipelines)
    size = targets // k + 1
    assert first <= (b / k + size.bit_length() + 1) * step * 1.0001
    for p in spec.predictions:
        if p.pipeline_seconds is not None:
            assert p.pipeline_seconds < p.complete_seconds


def _group(spec: Any, source: str) -> list[str]:
    origin = {source}
    for step in spec.schedule:
        for tr in step.transfers:
            if tr.sender in origin:
                origin.add(tr.receiver)
    return sorted(origin - {source})


def test_shifted_chains_form_pipelines_and_layer_order_chains_do_not() -> None:
    topo = topology_from_nodes(nodes(8))
    shifted = plan(kway_request(2, 6, 8, "chain", shift=True), topo)
    assert shifted.execution_pipelines
    assert all(p.ready_seconds is not None for p in shifted.execution_pipelines)
    plain = plan(kway_request(2, 6, 8, "chain"), topo)
    assert plain.execution_pipelines == []


def test_a_source_closes_one_pipeline_with_the_target_that_holds_half_first() -> None:
    # One source, three targets: receivers alone cover the model only as the first of
    # them completes, so a live scale-up pairs the source with a target (pipelines.py).
    arrivals = {"t1": [1.0, 2.0, 3.0, 4.0], "t2": [1.5, 2.5, 3.5, 4.5], "t3": [2.0, 3.0, 4.0, 5.0]}
    table = blocks(4)  # 8 layers, 2 per block
    assert form_pipelines([["t1", "t2", "t3"]], arrivals, table) == []
    (paired,) = form_pipelines([["t1", "t2", "t3"]], arrivals, table, ["s"])
    assert [(s.pod, s.layer_start, s.layer_end) for s in paired.stages] == [
        ("t1", 0, 4),
        ("s", 4, 8),
    ]
    assert paired.ready_seconds == 2.0  # t1 holds blocks 0 and 1 (layers 0-3)
    two = form_pipelines([["t1", "t2", "t3"]], arrivals, table, ["s", "s2"])
    assert [p.stages[0].pod for p in two] == ["t1", "t2"]  # each source once, targets once
    # A one-block model has nothing to split.
    assert form_pipelines([["t1"]], {"t1": [1.0]}, blocks(1), ["s"]) == []


def test_live_plans_from_one_source_pipeline_at_half_the_transfer() -> None:
    topo = topology_from_nodes(nodes(8))
    request = kway_request(1, 3, 8, "chain")
    assert plan(request, topo).execution_pipelines == []
    live = plan(dataclasses.replace(request, source_stages=True), topo)
    (pipeline,) = live.execution_pipelines
    source = live.sources[0].pod
    assert pipeline.stages[-1].pod == source and pipeline.stages[0].pod in live.targets
    assert pipeline.ready_seconds is not None and live.predicted_completion_seconds is not None
    assert pipeline.ready_seconds < 0.6 * live.predicted_completion_seconds


def test_a_host_copy_target_never_joins_a_pipeline() -> None:
    """A host copy refilled beside instances runs no engine: the live plan's pipelines
    pair the source with an instance target only (stageless)."""
    topo = topology_from_nodes(nodes(8))
    request = dataclasses.replace(kway_request(1, 3, 8, "chain"), source_stages=True)
    first = plan(request, topo).execution_pipelines[0].stages[0].pod
    live = plan(dataclasses.replace(request, stageless=[first]), topo)
    members = {s.pod for p in live.execution_pipelines for s in p.stages}
    assert first not in members and members & set(live.targets)
    alone = plan(dataclasses.replace(request, stageless=list(request.targets)), topo)
    assert alone.execution_pipelines == []


def test_a_pipeline_forms_only_with_the_minimum_lead() -> None:
    """liveScaling.minLeadSeconds: a pipeline that would serve for less than the lead
    before a member serves alone is not worth setting up on pods that are receiving."""
    arrivals = {"t1": [1.0, 2.0, 3.0, 4.0], "t2": [1.5, 2.5, 3.5, 4.5]}
    table = blocks(4)
    # Receivers a and b cover the model at 2.0; the first of them completes at 6.0.
    crossed = {"a": [1.0, 2.0, 5.0, 6.0], "b": [5.0, 6.0, 1.0, 2.0]}
    assert len(form_pipelines([["a"], ["b"]], crossed, table, lead_s=3.9)) == 1
    assert form_pipelines([["a"], ["b"]], crossed, table, lead_s=4.0) == []
    # The source pair: t1 holds half the layers at 2.0 and completes at 4.0.
    (paired,) = form_pipelines([["t1", "t2"]], arrivals, table, ["s"], lead_s=1.9)
    assert paired.stages[0].pod == "t1"
    assert form_pipelines([["t1", "t2"]], arrivals, table, ["s"], lead_s=2.0) == []
    # Cooperative: from t1's first block (1.0), a lead of 2.9 s still fits.
    assert form_pipelines([["t1", "t2"]], arrivals, table, ["s"], True, lead_s=2.9) != []


def test_live_plans_carry_the_lead_through_plan() -> None:
    topo = topology_from_nodes(nodes(8))
    request = dataclasses.replace(kway_request(1, 3, 8, "chain"), source_stages=True)
    live = plan(request, topo)
    (pipeline,) = live.execution_pipelines
    assert pipeline.ready_seconds is not None and live.predicted_completion_seconds is not None
    window = live.predicted_completion_seconds - pipeline.ready_seconds
    short = dataclasses.replace(request, pipeline_lead_s=window / 2)
    long = dataclasses.replace(request, pipeline_lead_s=window * 2)
    assert plan(short, topo).execution_pipelines
    assert not plan(long, topo).execution_pipelines
