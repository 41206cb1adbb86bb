"""Chiron §5.2, tick by tick: the IBP band, no flapping, bursts, calm, roles, auto Θ."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from cascade_autoscaler.interactive import (
    InteractiveBand,
    InteractiveDecision,
    InteractiveObservation,
    RoleSplit,
    auto_theta,
    decide_interactive,
    interactive_backpressure,
    occupancy,
    split_roles,
)

BAND = InteractiveBand(theta=0.7, delta=0.1)


def tick(n: int, busy: float, band: InteractiveBand = BAND, queued: int = 0) -> InteractiveDecision:
    """One tick with the current instances split by role as the policy would."""
    roles = split_roles(n, band.theta)
    d = decide_interactive(
        InteractiveObservation(roles.interactive, roles.mixed, busy, queued), band
    )
    assert d.reason and d.roles.total == d.desired
    return d


def run(n: int, busy: list[int], band: InteractiveBand = BAND) -> list[int]:
    """Apply each decision at once (no stabilization): the instance count per tick."""
    counts = []
    for b in busy:
        n = tick(n, min(b, n), band).desired
        counts.append(n)
    return counts


def test_ibp_is_busy_over_interactive_plus_mixed() -> None:
    assert interactive_backpressure(7, 10) == pytest.approx(0.7)
    assert interactive_backpressure(0, 0) is None
    d = decide_interactive(InteractiveObservation(interactive=6, mixed=4, busy=8), BAND)
    assert d.ibp == pytest.approx(0.8)


@pytest.mark.parametrize("busy", [6, 7, 8])
def test_within_the_band_holds(busy: int) -> None:
    d = tick(10, busy)
    assert (d.action, d.desired) == ("hold", 10)
    assert "within band [0.60, 0.80]" in d.reason


def test_burst_scales_up_to_the_band_centre() -> None:
    d = tick(10, 10)  # IBP 1.0 > 0.8
    assert (d.action, d.desired) == ("scale_up", 15)  # ceil(10 / 0.7)
    assert BAND.theta >= 10 / 15
    d = tick(10, 9)  # IBP 0.9
    assert (d.action, d.desired) == ("scale_up", 13)  # ceil(9 / 0.7) = ceil(12.86)
    d = tick(20, 20, band=InteractiveBand(theta=0.5, delta=0.1))
    assert d.desired == 40


def test_float_noise_does_not_add_an_instance() -> None:
    # 21 / 0.7 is 30.000000000000004 in floats; the answer is 30, not 31.
    d = tick(27, 21)  # IBP 0.78: in band
    assert (d.action, d.desired) == ("hold", 27)
    d = tick(25, 21)  # IBP 0.84 > 0.8
    assert (d.action, d.desired) == ("scale_up", 30)
    d = tick(30, 21)  # exactly Θ: in band, and a fixed point
    assert (d.action, d.desired) == ("hold", 30)


def test_busy_is_occupancy_in_instances() -> None:
    # Half of a 32-cap instance, a full 8-cap one, an idle one: 1.5 instances' worth.
    assert occupancy([(16, 32), (8, 8), (0, 16)], queued=0, default_cap=32) == 1.5
    # Overfull (slack slots queued at the worker) counts above 1: demand, not a count.
    assert occupancy([(12, 8)], queued=0, default_cap=32) == 1.5
    # Waiting requests count over the mean cap of the instances that report one...
    assert occupancy([(0, 8), (0, 24)], queued=8, default_cap=99) == 0.5
    # ...or over the engine's configured cap while none does (all still starting).
    assert occupancy([], queued=16, default_cap=32) == 0.5


def test_waiting_requests_scale_up_by_the_demand_they_add() -> None:
    # 7 of 10 instances full (IBP 0.7, in band) and 16 requests waiting at cap 8: B 9.
    d = tick(10, occupancy([(8, 8)] * 7 + [(0, 8)] * 3, 16, 8), queued=16)
    assert (d.action, d.desired) == ("scale_up", 13)  # ceil(9 / 0.7)
    assert "16 interactive requests waiting" in d.reason


def test_a_trickle_holds_one_instance_not_ceil_one_over_theta() -> None:
    # 3 short requests on one instance with room for 32, at Θ 0.3: Chiron's count
    # (1 busy instance) would hold ceil(1 / 0.3) = 4 instances.
    band = InteractiveBand(0.3, 0.1)
    busy = occupancy([(3, 32), (0, 32), (0, 32), (0, 32)], 0, 32)
    d = tick(4, busy, band)
    assert (d.action, d.desired) == ("scale_down", 1)
    assert tick(1, busy, band).action == "hold"


def test_scale_from_zero_when_requests_wait() -> None:
    d = tick(0, 0, queued=1)
    assert (d.action, d.desired, d.ibp) == ("scale_up", 1, None)  # the least that serves
    assert (d.roles.interactive, d.roles.mixed) == (0, 1)
    d = tick(0, 0)
    assert (d.action, d.desired) == ("hold", 0)


def test_calm_scales_down_to_the_fewest_with_ibp_at_most_theta() -> None:
    d = tick(10, 3)  # IBP 0.3 < 0.6
    assert (d.action, d.desired) == ("scale_down", 5)  # ceil(3 / 0.7)
    d = tick(5, 3)  # IBP 0.6: in band now
    assert (d.action, d.desired) == ("hold", 5)
    d = tick(10, 0)
    assert (d.action, d.desired) == ("scale_down", 0)


def test_below_band_but_already_the_fewest_holds() -> None:
    d = tick(2, 1)  # IBP 0.5 < 0.6, but 1 instance would be IBP 1.0
    assert (d.action, d.desired) == ("hold", 2)
    assert "already the fewest" in d.reason


def test_steady_load_never_flaps() -> None:
    bands = [InteractiveBand(t, dl) for t in (0.3, 0.5, 0.7, 0.9, 1.0) for dl in (0, 0.05, 0.1)]
    for band in bands:
        for busy in range(0, 41):
            for start in range(max(1, busy), 61, 7):
                counts = run(start, [busy] * 30, band)
                changes = sum(1 for a, b in zip([start, *counts], counts, strict=False) if a != b)
                assert changes <= 1, (band, busy, start, counts[:5])
                n = counts[-1]
                assert n >= busy and (n == 0 or busy / n <= band.theta + band.delta + 1e-9)


def test_load_jitter_inside_the_band_changes_nothing() -> None:
    rng = random.Random(1)
    busy = [rng.choice([6, 7, 8]) for _ in range(200)]
    assert set(run(10, busy)) == {10}


def test_burst_then_calm_tick_by_tick() -> None:
    busy = [7, 7, 10, 15, 15, 15, 8, 4, 4, 4]
    assert run(10, busy) == [10, 10, 15, 22, 22, 22, 12, 6, 6, 6]


def test_roles_keep_the_over_provisioned_share_mixed() -> None:
    assert split_roles(10, 0.7) == RoleSplit(interactive=7, mixed=3)
    assert split_roles(1, 0.7) == RoleSplit(interactive=0, mixed=1)  # a lone instance is mixed
    assert split_roles(0, 0.7) == RoleSplit(0, 0)
    assert split_roles(10, 1.0) == RoleSplit(10, 0)
    for n in range(1, 50):
        for theta in (0.3, 0.55, 0.7, 0.95):
            roles = split_roles(n, theta)
            assert roles.total == n and roles.mixed >= 1
            assert roles.mixed >= n * (1 - theta) - 1e-9


def test_band_validation() -> None:
    with pytest.raises(ValueError):
        InteractiveBand(theta=0, delta=0.1)
    with pytest.raises(ValueError):
        InteractiveBand(theta=0.7, delta=-0.1)


def gamma_arrivals(cv: float, n: int = 400, mean: float = 50.0, seed: int = 3) -> list[float]:
    rng = random.Random(seed)
    shape = 1 / cv**2
    return [rng.gammavariate(shape, mean / shape) for _ in range(n)]


def test_auto_theta_formula() -> None:
    arrivals = [10.0, 30.0] * 50  # mean 20, sample stdev ~10.05
    est = auto_theta(arrivals, interval_s=10, time_to_ready_s=10, percentile=0.99)
    cv = statistics.stdev(arrivals) / 20
    z = statistics.NormalDist().inv_cdf(0.99)
    assert est.cv == pytest.approx(cv) and est.intervals == 1
    assert est.spike == pytest.approx(1 + cv * z)
    assert est.theta == pytest.approx(1 / (1 + cv * z))
    assert "Θ = 1/spike" in est.reason


def test_auto_theta_matches_chirons_example() -> None:
    # Chiron: a tail spike of 3x the mean sets Θ to 1/3 (c · z_k = 2).
    z, n = statistics.NormalDist().inv_cdf(0.99), 200
    swing = 20 * 2 / z * math.sqrt((n - 1) / n)  # sample stdev of ±swing is 20 · 2/z
    arrivals = [20 - swing, 20 + swing] * (n // 2)
    est = auto_theta(arrivals, 10, 10, bounds=(0.1, 1.0))
    assert est.spike == pytest.approx(3.0, rel=1e-6)
    assert est.theta == pytest.approx(1 / 3, rel=1e-6)


def test_auto_theta_falls_as_burstiness_grows() -> None:
    thetas = [
        auto_theta(gamma_arrivals(cv), 10, 60, bounds=(0.01, 1.0)).theta
        for cv in (0.1, 0.3, 0.6, 1.0, 2.0)
    ]
    assert thetas == sorted(thetas, reverse=True) and len(set(thetas)) == len(thetas)


def test_auto_theta_falls_as_time_to_ready_grows() -> None:
    arrivals = gamma_arrivals(0.3)
    thetas = [
        auto_theta(arrivals, 10, t, bounds=(0.01, 1.0)).theta for t in (5, 10, 30, 60, 300, 1200)
    ]
    assert thetas[0] == thetas[1]  # under one interval: one interval of exposure
    assert thetas[1:] == sorted(thetas[1:], reverse=True) and len(set(thetas[1:])) == 5


def test_auto_theta_clamps_and_falls_back() -> None:
    calm = auto_theta([100.0, 101.0] * 20, 10, 10)
    assert calm.theta == 0.95 and "clamped" in calm.reason
    wild = auto_theta(gamma_arrivals(3.0), 10, 120)
    assert wild.theta == 0.3 and "clamped" in wild.reason
    for arrivals in ([], [5.0], [0.0, 0.0, 0.0]):
        est = auto_theta(arrivals, 10, 60, fallback=0.6)
        assert (est.theta, est.cv) == (0.6, None) and "fallback" in est.reason
    assert auto_theta([], 10, 60, fallback=0.99).theta == 0.95
    with pytest.raises(ValueError):
        auto_theta([1.0, 2.0], 0, 60)


def test_waiting_requests_during_a_cold_start_ask_for_the_same_count_every_tick() -> None:
    band = InteractiveBand(0.7, 0.1)
    # One instance starting (no cap reported yet), 40 waiting at the engine's cap 32.
    starting = InteractiveObservation(
        interactive=0, mixed=1, busy=occupancy([], 40, 32), queued=40, starting=1
    )
    first = decide_interactive(starting, band)
    assert (first.action, first.desired) == ("scale_up", 2)  # ceil(1.25 / 0.7)
    assert "1 starting" in first.reason
    again = InteractiveObservation(
        interactive=0, mixed=2, busy=occupancy([], 40, 32), queued=40, starting=2
    )
    for _ in range(10):  # the same waiting requests, recounted: a level, not an increment
        assert decide_interactive(again, band).desired == 2


def test_no_scale_down_while_instances_start() -> None:
    # 6 ordered for a burst, 5 still starting when the burst pauses (B 0): cutting them
    # now wastes their start and re-orders them for the next burst; judge them serving.
    calm = InteractiveObservation(interactive=1, mixed=5, busy=0.0, starting=5)
    d = decide_interactive(calm, BAND)
    assert (d.action, d.desired) == ("hold", 6)
    assert "while instances start" in d.reason
    ready = InteractiveObservation(interactive=1, mixed=5, busy=0.0, starting=0)
    assert decide_interactive(ready, BAND).action == "scale_down"
    # Scale-up is never held back.
    burst = InteractiveObservation(interactive=1, mixed=5, busy=6.0, starting=5)
    assert decide_interactive(burst, BAND).action == "scale_up"
