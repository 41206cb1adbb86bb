"""The operator's learned per-hop start cost (weights/calibration.py), plan by plan: the
prior, the relative-error weights, the decay, the bounds, and that the next plan is
made with it (make_plan inside `planning_with`) and records it."""

from __future__ import annotations

import pytest
from operator_fixtures import holder, md
from operator_fixtures import worker as idle

from cascade_api import constants as c
from cascade_api.scaleplan import Block, PlanPhase, ScalePlanSpec, ScalePlanStatus, TargetProgress
from cascade_operator.config import OperatorConfig
from cascade_operator.weights.calibration import (
    DECAY,
    HopCalibration,
    HopLatency,
    current,
    learn,
    planning_with,
)
from cascade_operator.weights.ended import plan_ends
from cascade_operator.weights.lifecycle import StatusPatch
from cascade_operator.weights.plans import PlanView
from cascade_operator.weights.pool import PoolInput, decide_pool
from cascade_operator.weights.targets import Targets, make_plan
from cascade_planner import Topology, topology_from_nodes
from cascade_planner.calibrate import MAX_HOP_LATENCY_S, HopSample

BLOCKS = [  # 1 GiB in 8 blocks
    Block(index=i, layer_start=i, layer_end=i + 1, bytes=128 << 20, checksum="x") for i in range(8)
]


def topo() -> Topology:
    """Nodes n0..n9 at 1000 Mbit/s each way."""
    labels = {c.LABEL_NIC_IN_MBIT: "1000", c.LABEL_NIC_OUT_MBIT: "1000"}
    return topology_from_nodes(
        [{"metadata": {"name": f"n{i}", "labels": labels}} for i in range(10)]
    )


def test_before_any_plan_it_is_the_configured_value() -> None:
    assert HopCalibration().seconds == 0.0
    assert HopCalibration(default_s=0.01).seconds == 0.01
    assert HopCalibration(default_s=9.0).seconds == MAX_HOP_LATENCY_S  # bounded


def test_plan_by_plan() -> None:
    cal = HopCalibration(default_s=0.01)
    # 1: 4 hops, predicted 0.058 at h=0, measured 0.098 -> 0.01 per hop: unchanged.
    cal = learn(cal, [HopSample(0.098, 0.058, 4)])
    assert cal.seconds == pytest.approx(0.01) and cal.plans == 1
    # 2: made with h=0.01 (0.098 predicted), measured 0.138 -> 0.02 per hop, same weight
    # as far as (hops/measured)² goes: the mean moves towards it.
    cal = learn(cal, [HopSample(0.138, 0.098, 4, hop_latency_s=0.01)])
    w1, w2 = (4 / 0.098) ** 2, (4 / 0.138) ** 2
    expected = (DECAY * (w1 * 0.01 + w1 * 0.01) + w2 * 0.02) / (DECAY * 2 * w1 + w2)
    assert cal.seconds == pytest.approx(expected)
    assert 0.01 < cal.seconds < 0.02
    # 3: a large plan 20 % slow (rate, not start costs) barely moves it.
    before = cal.seconds
    cal = learn(cal, [HopSample(12.0, 10.0, 4)])
    assert cal.seconds - before < 0.002


def test_the_prior_weighs_as_much_as_the_first_plan() -> None:
    cal = learn(HopCalibration(default_s=0.0), [HopSample(0.14, 0.1, 4)])  # 0.01 per hop
    assert cal.seconds == pytest.approx(0.005)


def test_old_plans_fade() -> None:
    cal = HopCalibration(default_s=0.0)
    for _ in range(30):
        cal = learn(cal, [HopSample(0.14, 0.1, 4)])
    assert cal.seconds == pytest.approx(0.01, rel=1e-2)


def test_one_slow_plan_pulls_at_most_to_twice_the_estimate() -> None:
    # 4 hops, 1.0 s slow: 0.25 per hop implied, counted as 0.04 (twice 0.02).
    cal = learn(HopCalibration(default_s=0.02), [HopSample(1.1, 0.1, 4)])
    assert cal.seconds == pytest.approx(0.03)
    # From 0 one plan counts 0.01 at most; a real cost keeps pulling it up.
    cal = HopCalibration()
    for _ in range(12):
        cal = learn(cal, [HopSample(0.5, 0.1, 4)])  # 0.1 per hop, every plan
    assert cal.seconds > 0.07  # and rising: about 15 plans to reach it


def test_plans_without_hops_or_when_disabled_change_nothing() -> None:
    cal = HopCalibration(default_s=0.01)
    assert learn(cal, [HopSample(1.0, 0.5, 0)]) == cal
    off = HopCalibration(default_s=0.01, enabled=False)
    assert learn(off, [HopSample(10.0, 0.5, 4)]).seconds == 0.01


def test_faster_than_the_model_pulls_it_to_zero_not_below() -> None:
    cal = learn(HopCalibration(default_s=0.02), [HopSample(0.05, 0.1, 4)])
    assert cal.seconds == pytest.approx(0.01)  # mean of the prior and a 0.0 sample


def test_the_holder_learns_each_strategy_apart() -> None:
    hops = HopLatency.configured(0.01, None, learn=True)
    hops.observe([None, None])
    assert hops.costs() == {"hop_latency_s": 0.01, "step_latency_s": 0.01}
    # A binomial plan 4 steps of 0.03 slow: only the step cost moves.
    hops.observe([None, HopSample(0.18, 0.1, 4, strategy="binomial")])
    assert hops.state("binomial").plans == 1 and hops.state("chain").plans == 0
    costs = hops.costs()
    assert costs["hop_latency_s"] == 0.01
    assert costs["step_latency_s"] == pytest.approx(0.015)  # prior 0.01, sample 0.02


def test_config_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CASCADE_HOP_LATENCY_S", "0.012")
    monkeypatch.setenv("CASCADE_STEP_LATENCY_S", "0.02")
    monkeypatch.setenv("CASCADE_HOP_LEARN", "false")
    cfg = OperatorConfig.from_env()
    assert (cfg.hop_latency_s, cfg.step_latency_s, cfg.learn_hop_latency) == (0.012, 0.02, False)
    for name in ("CASCADE_HOP_LATENCY_S", "CASCADE_STEP_LATENCY_S", "CASCADE_HOP_LEARN"):
        monkeypatch.delenv(name)
    cfg = OperatorConfig.from_env()
    assert (cfg.hop_latency_s, cfg.step_latency_s, cfg.learn_hop_latency) == (0.0, None, True)


def _plan(strategy: str = "chain") -> ScalePlanSpec:
    workers = [holder("llama-0"), idle("llama-1"), idle("llama-2")]
    pool = decide_pool(PoolInput(workers, md().host_copies))
    spec = md(multicast={"strategy": strategy})
    made = make_plan(
        "llama", spec, pool, BLOCKS, Targets(pods=["llama-1", "llama-2"]), workers, topo()
    )
    assert isinstance(made, ScalePlanSpec)
    return made


def test_the_next_plan_is_made_with_the_learned_cost_and_records_it() -> None:
    base = _plan()
    assert current() == {"hop_latency_s": 0.0, "step_latency_s": None}
    assert base.hop_latency_seconds == 0.0
    with planning_with({"hop_latency_s": 0.05, "step_latency_s": 0.2}):
        assert current()["hop_latency_s"] == 0.05
        charged = _plan()
        binomial = _plan("binomial")
    assert current()["hop_latency_s"] == 0.0
    assert charged.hop_latency_seconds == 0.05
    # One chain of two hops: the slowest target pays two start costs.
    assert base.predicted_completion_seconds is not None
    assert charged.predicted_completion_seconds == pytest.approx(
        base.predicted_completion_seconds + 2 * 0.05
    )
    assert binomial.hop_latency_seconds == 0.2  # a binomial plan pays the step cost


def test_a_completed_plan_ends_with_its_sample() -> None:
    with planning_with({"hop_latency_s": 0.05, "step_latency_s": None}):
        spec = _plan()
    view = PlanView("p", spec, ScalePlanStatus(phase=PlanPhase.RUNNING))
    assert spec.predicted_completion_seconds is not None
    measured = spec.predicted_completion_seconds + 0.1  # 0.05 more per hop
    done = ScalePlanStatus(
        phase=PlanPhase.COMPLETED,
        measured_completion_seconds=measured,
        targets=[TargetProgress(pod=p, transfer_seconds=measured) for p in spec.targets],
    )
    (end,) = plan_ends([view], [StatusPatch("p", done.to_api())])
    assert end.hop is not None and (end.hop.hops, end.hop.strategy) == (2, "chain")
    assert end.hop.implied_s == pytest.approx(0.1)
    failed = ScalePlanStatus(phase=PlanPhase.FAILED)
    (end,) = plan_ends([view], [StatusPatch("p", failed.to_api())])
    assert end.hop is None
