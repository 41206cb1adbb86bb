"""Chiron Algorithm 1, tick by tick: halving, EWMA growth, TBP, bounds, idle windows."""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from dataclasses import replace

import pytest

from cascade_autoscaler import batch_size as bs
from cascade_autoscaler.latency_room import latency_room
from cascade_autoscaler.prefill_share import decode_step_s, halving_outlook, remember

LIMITS = bs.BatchLimits(engine_max=256)


def obs(
    running: int,
    itl_s: float,
    throughput: float | None,
    slos: tuple[float, ...] = (0.1,),
    tokens: int = 500,
    waiting: int = 4,
) -> bs.BatchObservation:
    return bs.BatchObservation(running, tokens, 10, itl_s, throughput, slos, waiting)


def toy_itl(b: int) -> float:
    """ITL grows superlinearly (attention, preemptions): throughput b/ITL peaks at 63."""
    return 0.020 + 0.0005 * b + 0.000005 * b * b


def toy_throughput(b: int) -> float:
    return b / toy_itl(b)


PEAK = max(range(1, 257), key=toy_throughput)


def simulate(
    itl: Callable[[int], float],
    slo: float,
    ticks: int,
    start: int = 1,
    limits: bs.BatchLimits = LIMITS,
    noise: float = 0.0,
    seed: int = 0,
) -> list[bs.BatchDecision]:
    """A saturated engine (requests always waiting) under the toy capacity curve."""
    rng = random.Random(seed)
    state = bs.initial_state(limits, start)
    out = []
    for _ in range(ticks):
        b = state.max_batch
        i = itl(b) * (1 + rng.uniform(-noise, noise))
        thr = b / i * (1 + rng.uniform(-noise, noise))
        state, decision = bs.step(state, obs(b, i, thr, slos=(slo,)), limits)
        assert 1 <= decision.max_batch <= limits.engine_max
        assert decision.reason
        out.append(decision)
    return out


def test_a_long_idle_stretch_starts_over_at_the_engine_limit() -> None:
    halved = bs.BatchState(value=4.0, ref_batch=8, ref_throughput=100.0, throughput=90.0, samples=3)
    assert bs.after_idle(halved, 9.9, LIMITS) is None  # paused, not idle long enough
    reset = bs.after_idle(halved, 10.0, LIMITS)
    assert reset is not None
    state, decision = reset
    assert state == bs.initial_state(LIMITS, start=256) and state.ref_batch is None
    assert decision.action == "reset" and decision.max_batch == 256 and not decision.measured
    assert bs.after_idle(state, 60.0, LIMITS) is None  # already at the limit
    never = bs.BatchLimits(engine_max=256, idle_reset_s=None)
    assert bs.after_idle(halved, 1e6, never) is None


def test_itl_over_slo_halves_the_batch() -> None:
    state = bs.BatchState(value=64.0)
    state, d = bs.step(state, obs(64, itl_s=0.15, throughput=900), LIMITS)
    assert (d.action, d.max_batch) == ("halve", 32)
    assert d.lbp == pytest.approx(1.5) and d.backpressure == pytest.approx(1.5)
    assert "ITL over SLO" in d.reason
    # Still violated at 32: halve again (a drop after a decrease is not TBP).
    state, d = bs.step(state, obs(32, itl_s=0.12, throughput=700), LIMITS)
    assert (d.action, d.max_batch, d.tbp) == ("halve", 16, None)


def test_lbp_exactly_one_halves_as_the_paper_says() -> None:
    _, d = bs.step(bs.BatchState(value=40.0), obs(40, itl_s=0.1, throughput=500), LIMITS)
    assert (d.action, d.max_batch) == ("halve", 20)


def test_tightest_slo_among_running_requests_sets_lbp() -> None:
    o = obs(8, itl_s=0.06, throughput=100, slos=(0.5, 0.05, 0.2))
    _, d = bs.step(bs.BatchState(value=8.0), o, LIMITS)
    assert d.lbp == pytest.approx(1.2)
    assert d.action == "halve"


def test_ewma_growth_follows_line_10() -> None:
    # LBP 0.25, no reference yet: value <- 0.5 * 10 / 0.25 + 0.5 * 10 = 25.
    state, d = bs.step(bs.BatchState(value=10.0), obs(10, itl_s=0.025, throughput=400), LIMITS)
    assert (d.action, d.max_batch, d.tbp) == ("grow", 25, None)
    assert state.value == pytest.approx(25.0)
    assert (state.ref_batch, state.ref_throughput) == (10, 400)


def test_fractional_growth_accumulates_instead_of_rounding_away() -> None:
    # LBP 0.8 grows x1.125: 1 -> 1.125 -> ... the cap leaves 1 after a few ticks.
    state, caps = bs.BatchState(value=1.0), []
    for _ in range(8):
        b = state.max_batch
        state, d = bs.step(state, obs(b, itl_s=0.08, throughput=10.0 * b, waiting=2), LIMITS)
        caps.append(d.max_batch)
    assert caps[0] == 1 and caps[-1] >= 2


def test_throughput_drop_after_growth_triggers_tbp_on_the_second_window() -> None:
    state = bs.BatchState(value=96.0, ref_batch=64, ref_throughput=1000.0)
    state, d = bs.step(state, obs(96, itl_s=0.05, throughput=900), LIMITS)
    assert d.tbp == pytest.approx(1000 / 900)
    assert d.backpressure == pytest.approx(1000 / 900)
    # One window: no spread to tell a loss from noise yet; hold (neither halve nor grow).
    assert (d.action, d.max_batch) == ("hold", 96)
    assert "unconfirmed" in d.reason
    # The second agrees: the spread is nil, the margin is the tolerance floor; halve.
    _, d = bs.step(state, obs(96, itl_s=0.05, throughput=900), LIMITS)
    assert d.tbp == pytest.approx(1000 / 900)
    assert (d.action, d.max_batch) == ("halve", 48)
    assert "throughput fell beyond noise" in d.reason and "noise margin 0.05" in d.reason


def test_a_window_without_throughput_adds_no_sample_and_reads_the_mean_so_far() -> None:
    """Throughput None (no pure decode bs.step timed): no substitute enters the mean."""
    state = bs.BatchState(value=96.0, ref_batch=64, ref_throughput=1000.0)
    state, _ = bs.step(state, obs(96, itl_s=0.05, throughput=900), LIMITS)
    state, d = bs.step(state, obs(96, itl_s=0.05, throughput=None), LIMITS)
    assert (state.samples, state.throughput) == (1, 900)
    assert d.tbp == pytest.approx(1000 / 900) and "unconfirmed" in d.reason  # still one
    _, d = bs.step(state, obs(96, itl_s=0.05, throughput=900), LIMITS)
    assert d.action == "halve"  # the second sample confirms the loss


def test_no_throughput_at_a_new_cap_leaves_the_decision_to_latency() -> None:
    fresh = bs.BatchState(value=16.0, ref_batch=8, ref_throughput=100.0)
    _, d = bs.step(fresh, obs(16, itl_s=0.05, throughput=None), LIMITS)
    assert d.tbp is None and d.action == "grow" and d.lbp == pytest.approx(0.5)
    _, d = bs.step(fresh, obs(16, itl_s=0.15, throughput=None), LIMITS)
    assert d.action == "halve"


def test_one_noisy_window_does_not_halve() -> None:
    # A -20 % window (TBP 1.25 alone) then a +15 % one: the mean is -2.5 %, well within
    # the spread of the two; growing did not pay, so bs.step back to 64 rather than halve.
    state = bs.BatchState(value=96.0, ref_batch=64, ref_throughput=1000.0)
    state, d = bs.step(state, obs(96, itl_s=0.05, throughput=800), LIMITS)
    assert (d.action, d.max_batch) == ("hold", 96)
    _, d = bs.step(state, obs(96, itl_s=0.05, throughput=1150), LIMITS)
    assert d.tbp == pytest.approx(1000 / 975)
    assert (d.action, d.max_batch) == ("step_back", 64)


def test_a_loss_within_the_windows_spread_steps_back_one_beyond_it_halves() -> None:
    ref = bs.BatchState(value=96.0, ref_batch=64, ref_throughput=1000.0, ref_samples=8)
    # Mean 900 (TBP 1.11, over the 5 % tolerance) from 700 and 1100: sample sd 283,
    # cv 0.31, margin 2 * 0.31 * sqrt(1/2 + 1/8) = 0.50. Not a loss beyond noise.
    state, _ = bs.step(ref, obs(96, itl_s=0.05, throughput=700), LIMITS)
    _, d = bs.step(state, obs(96, itl_s=0.05, throughput=1100), LIMITS)
    assert "noise margin 0.50" in d.reason
    assert d.tbp == pytest.approx(1000 / 900)
    assert (d.action, d.max_batch) == ("step_back", 64)
    # The same mean from 880 and 920: cv 0.031, margin 0.05 (the floor): halve.
    state, _ = bs.step(ref, obs(96, itl_s=0.05, throughput=880), LIMITS)
    _, d = bs.step(state, obs(96, itl_s=0.05, throughput=920), LIMITS)
    assert "noise margin 0.05" in d.reason
    assert (d.action, d.max_batch) == ("halve", 48)
    # A larger spread still halves once the loss clears it: 500 and 700 (margin 0.37),
    # TBP 1.67.
    state, _ = bs.step(ref, obs(96, itl_s=0.05, throughput=500), LIMITS)
    _, d = bs.step(state, obs(96, itl_s=0.05, throughput=700), LIMITS)
    assert "noise margin 0.37" in d.reason
    assert (d.action, d.max_batch) == ("halve", 48)


def test_noise_margin_needs_two_windows_and_tracks_their_variance() -> None:
    # At the engine limit, after a clear gain over batch 8: every window holds.
    limits = bs.BatchLimits(engine_max=10, samples=4)
    state = bs.BatchState(value=10.0, ref_batch=8, ref_throughput=50.0, ref_samples=1)
    assert bs.noise_margin(state, limits) is None
    values = [100.0, 120.0, 90.0, 110.0]
    for k, v in enumerate(values):
        state, d = bs.step(state, obs(10, itl_s=0.01, throughput=v), limits)
        assert (d.action, d.max_batch) == ("hold", 10)
        if k == 0:
            assert bs.noise_margin(state, limits) is None
    assert state.samples == 4 and state.throughput == pytest.approx(statistics.mean(values))
    assert state.variance == pytest.approx(statistics.pvariance(values))
    cv = statistics.stdev(values) / statistics.mean(values)
    expected = 2.0 * cv * (1 / 4 + 1 / 1) ** 0.5
    assert bs.noise_margin(state, limits) == pytest.approx(expected)


def test_an_itl_violation_halves_at_once_even_when_tbp_is_unconfirmed() -> None:
    state = bs.BatchState(value=96.0, ref_batch=64, ref_throughput=1000.0)
    _, d = bs.step(state, obs(96, itl_s=0.12, throughput=900), LIMITS)
    assert (d.action, d.max_batch) == ("halve", 48)
    assert "ITL over SLO" in d.reason


def test_leaving_a_cap_hands_its_sample_count_to_the_reference() -> None:
    state = bs.BatchState(value=20.0, ref_batch=16, ref_throughput=200.0)
    for v in (190.0, 210.0, 200.0):  # flat: hold at the inflection
        state, d = bs.step(state, obs(20, itl_s=0.05, throughput=v), LIMITS)
        assert d.action == "hold"
    assert state.samples == 3 and state.variance > 0
    state, d = bs.step(state, obs(20, itl_s=0.2, throughput=200), LIMITS)
    assert (d.action, d.max_batch) == ("halve", 10)
    assert (state.samples, state.variance, state.throughput) == (0, 0.0, None)
    assert (state.ref_batch, state.ref_throughput, state.ref_samples) == (20, 200.0, 4)


def test_flat_throughput_after_growth_holds_at_the_inflection() -> None:
    state = bs.BatchState(value=70.0, ref_batch=64, ref_throughput=1000.0)
    for _ in range(5):
        state, d = bs.step(state, obs(70, itl_s=0.05, throughput=1010), LIMITS)
        assert (d.action, d.max_batch) == ("hold", 70)
    assert "flat" in d.reason


def test_a_slight_loss_after_growth_steps_back_to_the_reference() -> None:
    state = bs.BatchState(value=70.0, ref_batch=64, ref_throughput=1000.0)
    state, d = bs.step(state, obs(70, itl_s=0.05, throughput=980), LIMITS)
    assert (d.action, d.max_batch) == ("hold", 70)  # one window: unconfirmed
    assert "unconfirmed" in d.reason
    state, d = bs.step(state, obs(70, itl_s=0.05, throughput=980), LIMITS)
    assert (d.action, d.max_batch) == ("step_back", 64)
    assert (state.ref_batch, state.ref_throughput, state.ref_samples) == (70, 980, 2)
    # Back at 64, within noise of 70 (-1%): hold (flat). Not an "expected drop after a
    # decrease", which would let LBP pace a new probe.
    _, d = bs.step(state, obs(64, itl_s=0.05, throughput=970), LIMITS)
    assert d.tbp == pytest.approx(980 / 970)
    assert (d.action, d.max_batch) == ("hold", 64)


def test_current_throughput_is_the_mean_over_the_caps_windows() -> None:
    state = bs.BatchState(value=70.0, ref_batch=64, ref_throughput=1000.0)
    state, d = bs.step(state, obs(70, itl_s=0.05, throughput=1000), LIMITS)
    assert d.action == "hold"
    # One bad window (-8%) alone would halve; averaged with the first it is -4%: bs.step back.
    _, d = bs.step(state, obs(70, itl_s=0.05, throughput=920), LIMITS)
    assert d.tbp == pytest.approx(1000 / 960)
    assert d.action == "step_back"


def test_a_clear_gain_paces_growth_by_lbp_not_by_the_gain() -> None:
    state = bs.BatchState(value=20.0, ref_batch=10, ref_throughput=500.0)
    _, d = bs.step(state, obs(20, itl_s=0.025, throughput=1000), LIMITS)
    assert d.tbp == pytest.approx(0.5)
    # Paced by LBP 0.25 (x2.5), not by max(LBP, TBP) = 0.5 (x1.5).
    assert (d.action, d.max_batch) == ("grow", 50)


def test_drop_after_a_decrease_is_not_backpressure() -> None:
    state = bs.BatchState(value=32.0, ref_batch=64, ref_throughput=1000.0)
    _, d = bs.step(state, obs(32, itl_s=0.04, throughput=600), LIMITS)
    assert d.tbp is None and "after a decrease" in d.reason
    assert d.action == "grow"


def test_rise_after_a_decrease_climbs_back_cautiously() -> None:
    # Past the inflection: halving raised throughput (TBP 0.8); max(LBP, TBP) paces.
    state = bs.BatchState(value=64.0, ref_batch=128, ref_throughput=800.0)
    _, d = bs.step(state, obs(64, itl_s=0.02, throughput=1000), LIMITS)
    assert d.tbp == pytest.approx(0.8)
    assert (d.action, d.max_batch) == ("grow", 72)  # 0.5 * 64 / 0.8 + 32


def test_converges_near_the_throughput_peak_and_never_exceeds_the_limit() -> None:
    limits = bs.BatchLimits(engine_max=100)
    decisions = simulate(toy_itl, slo=0.2, ticks=40, limits=limits)
    caps = [d.max_batch for d in decisions]
    assert max(caps) <= 100
    tail = caps[-15:]
    assert len(set(tail)) == 1, caps  # settled: no sawtooth
    assert 0.7 * PEAK <= tail[0] <= 1.5 * PEAK, caps
    assert toy_throughput(tail[0]) >= 0.95 * toy_throughput(PEAK)
    assert max(caps) == 100  # it did probe the limit and came back


def test_converges_under_noisy_measurements() -> None:
    for seed in range(8):
        caps = [d.max_batch for d in simulate(toy_itl, 0.2, 60, noise=0.03, seed=seed)]
        tail = caps[-10:]
        assert len(set(tail)) == 1, (seed, caps)
        assert toy_throughput(tail[0]) >= 0.9 * toy_throughput(PEAK), (seed, caps)


def test_noisy_throughput_windows_do_not_saw_the_cap_under_a_tight_slo() -> None:
    """±15 % per-window throughput noise (a busy CPU engine's 0.5 s windows), ITL ±2 %,
    SLO 60 ms (met up to batch 52). Read raw, TBP halved on single low windows ~15 times
    in 120 ticks and the cap averaged 35; the noise margin keeps it near the SLO."""
    limits = bs.BatchLimits(engine_max=64)
    halvings, tails = [], []
    for seed in range(20):
        rng = random.Random(seed)
        state, caps, by_tbp = bs.initial_state(limits, 64), [], 0
        for _ in range(120):
            b = state.max_batch
            itl = toy_itl(b) * (1 + rng.uniform(-0.02, 0.02))
            thr = toy_throughput(b) * (1 + rng.uniform(-0.15, 0.15))
            state, d = bs.step(state, obs(b, itl, thr, slos=(0.06,)), limits)
            caps.append(d.max_batch)
            by_tbp += d.action == "halve" and d.lbp is not None and d.lbp < 1
        halvings.append(by_tbp)
        tails.append(statistics.mean(caps[-60:]))
    assert statistics.mean(halvings) < 8, halvings
    assert statistics.mean(tails) >= 39, tails


def test_a_tight_slo_bounds_the_batch_below_the_peak() -> None:
    # ITL 60 ms is reached at batch 52, below the throughput peak.
    decisions = simulate(toy_itl, slo=0.06, ticks=40)
    tail = [d.max_batch for d in decisions[-10:]]
    assert len(set(tail)) == 1
    assert 35 <= tail[0] <= 52 and toy_itl(tail[0]) < 0.06


def test_bounds_engine_limit_and_one() -> None:
    limits = bs.BatchLimits(engine_max=16)
    state, d = bs.step(bs.BatchState(value=12.0), obs(12, itl_s=0.001, throughput=100), limits)
    assert d.max_batch == 16 and state.value == 16.0
    _, d = bs.step(state, obs(16, itl_s=0.001, throughput=200), limits)
    assert (d.action, d.max_batch) == ("hold", 16) and "engine limit" in d.reason
    state = bs.BatchState(value=1.0)
    _, d = bs.step(state, obs(1, itl_s=0.5, throughput=2), limits)
    assert (d.action, d.max_batch) == ("halve", 1)
    # A state above a lowered engine limit is clamped on the next tick.
    _, d = bs.step(bs.BatchState(value=200.0), obs(16, itl_s=0.2, throughput=80), limits)
    assert d.max_batch == 8


def test_no_slo_means_no_latency_bound() -> None:
    _, d = bs.step(bs.BatchState(value=4.0), obs(4, itl_s=0.3, throughput=10, slos=()), LIMITS)
    assert d.lbp == 0.0 and d.max_batch == 256
    with_default = bs.BatchLimits(engine_max=256, default_itl_slo_s=0.15)
    _, d = bs.step(bs.BatchState(value=4.0), obs(4, 0.3, 10, slos=()), with_default)
    assert d.lbp == pytest.approx(2.0) and d.action == "halve"


def test_idle_and_thin_windows_hold_without_judging() -> None:
    state = bs.BatchState(value=40.0, ref_batch=20, ref_throughput=300.0)
    idle = bs.BatchObservation(running=0, tokens=0, steps=0, itl_s=None, throughput=0.0)
    new, d = bs.step(state, idle, LIMITS)
    assert new == state
    assert (d.action, d.max_batch, d.measured, d.lbp, d.backpressure) == (
        "hold",
        40,
        False,
        None,
        None,
    )
    thin = obs(40, itl_s=0.5, throughput=10, tokens=3)  # would halve if judged
    new, d = bs.step(state, thin, LIMITS)
    assert new == state and not d.measured and "too few tokens" in d.reason
    # Many idle ticks change nothing, then the reference is still there.
    for _ in range(20):
        state, _ = bs.step(state, idle, LIMITS)
    state, d = bs.step(state, obs(40, itl_s=0.03, throughput=250), LIMITS)
    assert d.tbp == pytest.approx(300 / 250) and d.action == "hold"  # unconfirmed
    _, d = bs.step(state, obs(40, itl_s=0.03, throughput=250), LIMITS)
    assert d.tbp == pytest.approx(300 / 250) and d.action == "halve"


def test_unbinding_cap_does_not_grow_and_halving_uses_the_running_batch() -> None:
    state = bs.BatchState(value=64.0, ref_batch=32, ref_throughput=500.0)
    _, d = bs.step(state, obs(10, itl_s=0.03, throughput=200, waiting=0), LIMITS)
    assert (d.action, d.max_batch, d.tbp) == ("hold", 64, None)
    assert "not binding" in d.reason
    new, d = bs.step(state, obs(10, itl_s=0.2, throughput=50, waiting=0), LIMITS)
    assert (d.action, d.max_batch) == ("halve", 5)
    assert new.ref_batch is None  # that window did not measure the cap


def test_first_tick_has_no_tbp() -> None:
    state = bs.initial_state(LIMITS)
    assert state.max_batch == 1
    _, d = bs.step(state, obs(1, itl_s=0.02, throughput=50), LIMITS)
    assert d.tbp is None and "no reference" in d.reason
    assert d.backpressure == pytest.approx(0.2)
    assert (d.action, d.max_batch) == ("grow", 3)  # 0.5 / 0.2 + 0.5 = 3


# -- Prefill: an ITL that halving cannot fix --------------------------------------------


def test_halving_outlook_from_the_decode_share_of_a_step() -> None:
    # A 0.1 s decode in a 0.3 s bs.step: ITL 0.33 s would be 0.275 s at half the batch.
    o = halving_outlook(0.33, 0.25, 0.1, 0.30)
    assert o.decode_share == pytest.approx(1 / 3) and o.itl_at_half_s == pytest.approx(0.275)
    assert not o.helps
    assert halving_outlook(0.28, 0.25, 0.1, 0.30).helps  # half meets 0.25
    assert halving_outlook(0.60, 0.25, 0.1, 0.18).helps  # decode 55 %: the paper's trade
    assert halving_outlook(0.33, 0.25, None, 0.30).helps  # unknown: halve
    assert halving_outlook(0.33, 0.25, 0.1, None).helps


def test_decode_speeds_are_remembered_by_batch_bucket() -> None:
    speeds = remember(remember((), 16, 100.0), 19, 200.0)  # 16..31 share a bucket
    assert speeds == ((16, 150.0),)
    speeds = remember(speeds, 4, 50.0)
    assert speeds == ((4, 50.0), (16, 150.0))
    assert decode_step_s(speeds, 20) == pytest.approx(20 / 150)  # nearest at or below
    assert decode_step_s(speeds, 8) == pytest.approx(8 / 50)
    assert decode_step_s(speeds, 2) == pytest.approx(2 / 50)  # none below: the smallest
    assert decode_step_s((), 8) is None


def test_an_itl_made_by_prefill_chunks_holds_the_cap_and_a_decode_one_halves() -> None:
    limits = bs.BatchLimits(engine_max=32, default_itl_slo_s=0.25)
    state = bs.initial_state(limits, start=32)
    # The calm before: pure decode steps at 16 running, 160 tok/s (0.1 s a bs.step).
    calm = bs.BatchObservation(16, 160, 10, 0.1, 160.0, mean_step_s=0.1)
    state, d = bs.step(state, calm, limits)
    assert d.action == "hold" and d.max_batch == 32  # not binding
    # A burst: every bs.step carries a prompt chunk (no decode speed in the window), 0.3 s.
    burst = bs.BatchObservation(32, 320, 10, 0.33, None, waiting=20, mean_step_s=0.60)
    _, d = bs.step(state, burst, limits)
    assert d.action == "hold" and d.max_batch == 32 and "prefill makes it" in d.reason
    # The same ITL from decoding alone halves, as Algorithm 1 says.
    decode = bs.BatchObservation(32, 320, 10, 0.33, 320.0 / 3, waiting=20, mean_step_s=0.30)
    _, d = bs.step(state, decode, limits)
    assert d.action == "halve" and d.max_batch == 16
    # Nothing remembered yet: halve.
    _, d = bs.step(bs.initial_state(limits, start=32), burst, limits)
    assert d.action == "halve"
    # The memory survives the idle reset.
    reset = bs.after_idle(replace(state, value=4.0), 60.0, limits)
    assert reset is not None and reset[0].decode == state.decode == ((16, 160.0),)


def room(state: bs.BatchState, limits: bs.BatchLimits) -> int:
    return latency_room(state.room, state.max_batch, limits.engine_max)


def test_latency_room_is_the_limit_until_a_latency_halving_then_what_met_the_slo() -> None:
    # Throughput halves the cap (96 -> 48): the room stays the engine limit.
    state = bs.BatchState(value=96.0, ref_batch=64, ref_throughput=1000.0)
    for _ in range(2):
        state, d = bs.step(state, obs(96, itl_s=0.05, throughput=900), LIMITS)
    assert (d.action, d.max_batch) == ("halve", 48)
    assert room(state, LIMITS) == 256
    # A step back for throughput leaves the room too.
    state = bs.BatchState(value=96.0, ref_batch=64, ref_throughput=1000.0, ref_samples=8)
    state, _ = bs.step(state, obs(96, itl_s=0.05, throughput=700), LIMITS)
    state, d = bs.step(state, obs(96, itl_s=0.05, throughput=1100), LIMITS)
    assert (d.action, d.max_batch, room(state, LIMITS)) == ("step_back", 64, 256)
    # An ITL over the SLO at 64 halves to 32: 32 is all the room.
    state, d = bs.step(bs.BatchState(value=64.0), obs(64, itl_s=0.15, throughput=900), LIMITS)
    assert (d.action, d.max_batch, room(state, LIMITS)) == ("halve", 32, 32)
    # 40 running within the SLO (a batch above the cap: a lowered cap still draining)
    # shows 40 meets it; a thin window shows nothing.
    state, _ = bs.step(state, obs(40, itl_s=0.05, throughput=800, tokens=2), LIMITS)
    assert room(state, LIMITS) == 32
    state, d = bs.step(state, obs(40, itl_s=0.05, throughput=800), LIMITS)
    assert state.room == 40
    # The room is never below the cap (which grew on that window), and starting over
    # clears it.
    assert (d.action, room(state, LIMITS)) == ("grow", d.max_batch)
    assert room(replace(state, value=36.0), LIMITS) == 40
    reset = bs.after_idle(state, 60.0, LIMITS)
    assert reset is not None and room(reset[0], LIMITS) == 256
