"""The fluid bound on a burst's P99 wait: what one serving source allows live modes."""

from __future__ import annotations

import pytest

from cascade_bench.burst import bound
from cascade_bench.burst.bound import Times

STEADY = bound.steady(3.0, 60.0)  # 3 instances' worth for 60 s


def test_stop_the_world_wait_matches_the_closed_form() -> None:
    # Demand 3 against capacity 1 until T, then 4: a request arriving at t <= T/3 waits
    # 2t (the worst, 2T/3); later ones less (3T/4 - t/4).
    t = Times(covered_s=14.0, complete_s=14.0)
    worst = bound.p99_wait(bound.stop_the_world(t, 4), STEADY)
    assert worst == pytest.approx(2 * 14.0 / 3, abs=0.2)  # P99, just under the worst


def test_capacity_before_completion_shortens_the_wait() -> None:
    early, late = Times(4.0, 14.0), Times(12.0, 14.0)
    r_early = bound.ratios(early, scale_to=4, blocks=4, arrivals=STEADY)
    r_late = bound.ratios(late, scale_to=4, blocks=4, arrivals=STEADY)
    for mode in ("pipelines", "cooperative"):
        assert r_early[mode] < r_late[mode] < 1.0
    # Cooperative offloads more of the source than a half split once the targets hold
    # more than half the layers.
    assert r_early["cooperative"] < r_early["pipelines"]


def test_one_serving_source_cannot_halve_the_wait_through_a_pipeline() -> None:
    # One source + one half-model target serve 2 instances' worth against a 3x burst,
    # and the target holds half the model no earlier than half the transfer (the source
    # sends at its rate, whatever the plan): > 0.5 x stop-the-world.
    r = bound.ratios(Times(7.0, 14.0), scale_to=4, blocks=4, arrivals=STEADY)
    assert r["pipelines"] == pytest.approx(0.75, abs=0.02)


def test_cooperative_capacity_is_bounded_by_the_source_and_the_heads() -> None:
    cap = bound.cooperative(Times(2.0, 12.0), scale_to=4, blocks=4)
    assert cap(1.0) == 1.0 and cap(12.0) == 4.0
    assert cap(2.0) == pytest.approx(1 / (1 - 0.25))  # one block of four on the targets
    assert cap(7.0) == pytest.approx(min(1 / (1 - 0.625), 3 / 0.625))
    assert all(cap(s) <= 4.0 for s in (2.0, 5.0, 9.0, 11.9))


def test_from_run_reads_coverage_from_the_plans() -> None:
    rows = {
        "stop_the_world": {"first_new_token_s": 14.0},
        "pipelines": {
            "scale_decision_t": 30.0,
            "plans": [{"start_t": 31.5, "pipelines": [{"coveredSeconds": 7.0}]}],
        },
        "cooperative": {"scale_decision_t": 30.0, "plans": [{"start_t": 31.5, "pipelines": []}]},
    }
    out = bound.from_run(rows, scale_to=4, blocks=4, arrivals=STEADY)
    assert set(out) == {"pipelines"}  # no pipeline, no coverage: no bound
    assert out["pipelines"]["covered_s"] == pytest.approx(8.5)
    assert 0.5 < out["pipelines"]["ttft_p99_ratio"] < 1.0


def test_a_spike_before_new_capacity_sets_the_wait_whatever_comes_later() -> None:
    # The same 2 instances' worth of mean demand, all of it in the first 10 s (a spike of
    # 12x) or spread over 60 s: early pipeline capacity helps the steady burst far more,
    # because the spike is queued before the pipeline can serve.
    spike = [(i * 0.1, 12.0 * 0.1) for i in range(100)]
    flat = bound.steady(2.0, 60.0)
    t = Times(covered_s=5.0, complete_s=13.0)
    assert sum(c for _, c in spike) == pytest.approx(sum(c for _, c in flat))
    r_spike = bound.ratios(t, scale_to=4, blocks=4, arrivals=spike)["pipelines"]
    r_flat = bound.ratios(t, scale_to=4, blocks=4, arrivals=flat)["pipelines"]
    assert r_flat < 0.6 < 0.8 < r_spike < 1.0
    # Even every node serving from coverage on cannot halve the spike's wait.
    assert bound.ratios(t, scale_to=4, blocks=4, arrivals=spike)["ceiling"] > 0.5


def test_no_arrivals_no_wait() -> None:
    assert bound.p99_wait(lambda s: 1.0, []) == 0.0
