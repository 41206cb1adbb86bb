"""The per-hop start cost fit (cascade_planner.calibrate): which hops a plan's slowest
prediction charges, what a plan implies, and the relative-error weights."""

from __future__ import annotations

import pytest

from cascade_api import scaleplan as sp
from cascade_planner.calibrate import (
    MAX_HOP_LATENCY_S,
    HopSample,
    fit,
    nvlink_peers,
    sample,
    slowest_hops,
)


def _chain(predicted: dict[str, float], *chains: list[str], h: float = 0.0) -> sp.ScalePlanSpec:
    return sp.ScalePlanSpec(
        deployment="d",
        model_digest="m",
        strategy=sp.PlanStrategy.CHAIN,
        targets=[p for c in chains for p in c],
        chains=[sp.Chain(source=f"s{i}", hops=c) for i, c in enumerate(chains)],
        predictions=[sp.TargetPrediction(pod=p, complete_seconds=t) for p, t in predicted.items()],
        predicted_completion_seconds=max(predicted.values()),
        hop_latency_seconds=h,
    )


def test_chain_slowest_target_pays_its_position() -> None:
    spec = _chain({"a": 1.0, "b": 1.2, "c": 1.1}, ["a", "b"], ["c"])
    assert slowest_hops(spec) == 2  # b is second in its chain


def test_chain_tie_takes_the_most_hops() -> None:
    assert slowest_hops(_chain({"a": 1.0, "b": 1.0}, ["a", "b"])) == 2


def test_binomial_counts_non_empty_steps_to_the_last_receive() -> None:
    spec = sp.ScalePlanSpec(
        deployment="d",
        model_digest="m",
        strategy=sp.PlanStrategy.BINOMIAL,
        targets=["a", "b"],
        schedule=[
            sp.Step(transfers=[sp.Transfer(sender="s", receiver="a", block=0)]),
            sp.Step(transfers=[]),  # adds no start cost in the model
            sp.Step(transfers=[sp.Transfer(sender="a", receiver="b", block=0)]),
            sp.Step(transfers=[sp.Transfer(sender="s", receiver="a", block=1)]),
        ],
        predictions=[
            sp.TargetPrediction(pod="a", complete_seconds=0.3),
            sp.TargetPrediction(pod="b", complete_seconds=0.2),
        ],
    )
    assert slowest_hops(spec) == 3  # a, last receive in the 3rd non-empty step


def test_no_predictions_takes_the_deepest_hop() -> None:
    spec = _chain({"a": 1.0}, ["a", "b", "c"]).model_copy(update={"predictions": []})
    assert slowest_hops(spec) == 3


def _done(**seconds: float | None) -> sp.ScalePlanStatus:
    return sp.ScalePlanStatus(
        phase=sp.PlanPhase.COMPLETED,
        targets=[sp.TargetProgress(pod=p, transfer_seconds=t) for p, t in seconds.items()],
    )


def test_a_sample_undoes_the_cost_its_prediction_used() -> None:
    # Predicted 1.0 with 2 hops of 0.1: 0.8 without; measured 1.0 -> 0.1 per hop.
    spec = _chain({"a": 0.9, "b": 1.0}, ["a", "b"], h=0.1)
    s = sample(spec, _done(a=0.95, b=1.0))
    assert s == HopSample(measured_s=1.0, predicted_s=1.0, hops=2, hop_latency_s=0.1)
    assert s.implied_s == pytest.approx(0.1)
    assert sample(spec, _done(a=0.95, b=None)) is None  # not measured yet


def test_nvlink_peers_are_left_out_of_a_sample() -> None:
    spec = _chain({"a": 1.0, "b": 0.01}, ["a", "b"])
    spec.predictions[1].nvlink = True  # b sits by a: predicted over NVLink
    s = sample(spec, _done(a=1.1, b=1.5))  # loopback on the dev cluster: slow
    assert s == HopSample(measured_s=1.1, predicted_s=1.0, hops=1)
    spec.predictions[0].nvlink = True
    assert sample(spec, _done(a=1.1, b=1.5)) is None


def test_a_receiver_faster_than_any_nic_is_an_nvlink_peer() -> None:
    spec = _chain({"a": 1.0, "b": 0.005 + 2 * 0.005}, ["a", "b"], h=0.005)
    spec.blocks = [sp.Block(index=0, layer_start=0, layer_end=1, bytes=10**9, checksum="x")]
    assert nvlink_peers(spec) == {"b"}  # 1 GB in 0.005 s: 200 GB/s
    spec.predictions[1].complete_seconds = 0.1
    assert nvlink_peers(spec) == set()


def test_implied_cost_is_bounded() -> None:
    assert HopSample(0.5, 1.0, 2).implied_s == 0.0  # faster than even h=0 predicts
    assert HopSample(100.0, 1.0, 1).implied_s == MAX_HOP_LATENCY_S


def test_fit_weights_small_plans_most() -> None:
    small = HopSample(measured_s=0.09, predicted_s=0.058, hops=4)  # 0.008 per hop
    large = HopSample(measured_s=1.9, predicted_s=1.78, hops=4)  # 0.03 per hop: rate
    h = fit([small, large])
    assert h is not None
    assert small.implied_s < h < small.implied_s * 1.1
    # The relative error of both stays small with the fitted h.
    for s in (small, large):
        assert abs(s.measured_s / (s.predicted_s + s.hops * h) - 1) < 0.1


def test_fit_without_hops_is_none() -> None:
    assert fit([HopSample(1.0, 1.0, 0)]) is None
    assert fit([]) is None
