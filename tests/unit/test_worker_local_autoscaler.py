"""The worker's local autoscaler, tick by tick with a fake clock and no sockets: the window
that turns engine steps and tokens into Chiron's observations, the controller around
`batch_size.step`, and the tick that applies its cap to an AsyncEngine (over FakeCore)."""

from __future__ import annotations

import asyncio
import math

import pytest
from prometheus_client import CollectorRegistry
from serving_harness import Factory, FakeCore, request, run, worker
from waiting import until

from cascade_autoscaler.batch_size import BatchLimits
from cascade_protocol.generate import GenerateRequest, RequestClass
from cascade_worker.serving.async_engine import AsyncEngine
from cascade_worker.serving.batch_control import BatchControl
from cascade_worker.serving.local_autoscaler import BatchWindow, ItlSlos, LocalAutoscaler
from cascade_worker.serving.metrics import ServingMetrics

SLOS = ItlSlos(interactive_s=0.050, batch_s=1.0)
INTERACTIVE, BATCH = RequestClass.INTERACTIVE, RequestClass.BATCH


def feed(
    window: BatchWindow,
    running: int,
    itl_s: float,
    steps: int,
    *,
    waiting: int = 0,
    cap: int | None = None,
    request_class: RequestClass = INTERACTIVE,
) -> None:
    """`steps` pure decode steps of `running` requests, each `itl_s` long (so each token
    comes `itl_s` after the last)."""
    for _ in range(steps):
        window.step(running, waiting, window.cap if cap is None else cap, took_s=itl_s)
        for _ in range(running):
            window.token(1, itl_s, request_class)


def autoscaler(engine_max: int = 32) -> LocalAutoscaler:
    return LocalAutoscaler(BatchLimits(engine_max=engine_max), SLOS, now=0.0)


# -- the window ---------------------------------------------------------------------


def test_window_summarises_decode_steps_into_one_observation() -> None:
    w = BatchWindow(start=10.0, cap=8)
    w.token(1, None, INTERACTIVE)  # first tokens are prefill: neither ITL nor throughput
    feed(w, 4, 0.020, steps=5, waiting=2)
    feed(w, 2, 0.040, steps=5, request_class=BATCH)
    obs = w.observation(SLOS)
    assert (obs.running, obs.waiting, obs.tokens) == (4, 2, 30)
    assert obs.itl_s == pytest.approx((20 * 0.020 + 10 * 0.040) / 30)
    assert obs.throughput == pytest.approx(30 / (5 * 0.020 + 5 * 0.040))
    assert obs.itl_slos_s == (0.050, 1.0)  # each class that decoded, by its flag


def test_throughput_is_the_pure_decode_steps_speed_not_diluted_by_prefill() -> None:
    """A bigger cap admits more arrivals, whose prefill steps would lower tokens/span."""
    w = BatchWindow(start=0.0, cap=8)
    for _ in range(10):  # pure decode: 8 tokens in 40 ms each
        w.step(8, 0, 8, took_s=0.040)
        for _ in range(8):
            w.token(1, 0.040, INTERACTIVE)
    w.step(8, 0, 8, took_s=0.300, prefill=128)  # an arrival's prefill chunk
    for _ in range(8):
        w.token(1, 0.300, INTERACTIVE)
    obs = w.observation(SLOS)
    assert obs.throughput == pytest.approx(80 / 0.4)  # 200 tok/s, the batch's own speed
    assert obs.itl_s == pytest.approx((80 * 0.040 + 8 * 0.300) / 88)  # ITL sees the stall
    w.restart(1.0, 8)
    assert (w.decode_tokens, w.decode_s) == (0, 0.0)


def test_a_window_with_no_timed_pure_decode_step_has_no_throughput() -> None:
    """No substitute in other units (tokens over the wall-clock span): the policy judges
    such a window by ITL alone and keeps the cap's CPU-time samples unmixed."""
    w = BatchWindow(start=0.0, cap=8)
    for _ in range(4):
        w.step(8, 2, 8, took_s=0.300, prefill=128)  # every step prefills an arrival
        for _ in range(8):
            w.token(1, 0.300, INTERACTIVE)
    obs = w.observation(SLOS)
    assert obs.tokens == 32 and obs.throughput is None


def test_window_without_tokens_has_no_itl_and_restart_clears_it() -> None:
    w = BatchWindow(start=0.0, cap=4)
    w.step(1, 0, 4)
    assert w.observation(SLOS).itl_s is None
    feed(w, 5, 0.01, steps=1)  # more running than the cap: not this cap's window
    assert w.off_cap
    w.restart(2.0, 2)
    assert (w.start, w.cap, w.steps, w.tokens, w.off_cap, w.classes) == (2.0, 2, 0, 0, False, set())


def test_a_step_under_another_cap_marks_the_window() -> None:
    w = BatchWindow(start=0.0, cap=4)
    w.step(2, 0, max_batch=8)  # the new cap had not reached the engine thread yet
    assert w.off_cap


# -- the controller -------------------------------------------------------------------


def test_starts_at_the_engine_max_and_halves_on_an_itl_violation() -> None:
    a = autoscaler(32)
    assert a.max_batch == 32 and a.last is None
    feed(a.window, 32, 0.080, steps=10, waiting=4)  # ITL 80 ms > 50 ms SLO
    tick = a.tick(0.5)
    assert tick.decision is not None and tick.decision.action == "halve"
    assert tick.max_batch == 16 and a.max_batch == 16
    assert a.last is tick.decision
    assert a.last.lbp == pytest.approx(1.6) and a.last.backpressure == pytest.approx(1.6)
    assert (a.window.start, a.window.cap, a.window.tokens) == (0.5, 16, 0)  # a fresh window


def test_a_window_still_draining_above_a_lowered_cap_is_not_judged() -> None:
    a = autoscaler(32)
    feed(a.window, 32, 0.080, steps=10, waiting=4)
    a.tick(0.5)
    feed(a.window, 30, 0.080, steps=10, waiting=4)  # the 32 drain; nothing new admitted
    tick = a.tick(1.0)
    assert tick.decision is None and "not in force" in (tick.skipped or "")
    assert a.max_batch == 16  # not halved again for the old batch's latency
    feed(a.window, 16, 0.040, steps=10, waiting=4)  # now the cap runs: 40 ms, within SLO
    tick = a.tick(1.5)
    assert tick.decision is not None and tick.decision.lbp == pytest.approx(0.8)
    assert a.max_batch >= 16


def test_thin_windows_accumulate_and_idle_windows_are_dropped() -> None:
    a = autoscaler(8)
    feed(a.window, 1, 0.010, steps=3)  # 3 tokens < min_tokens 8
    tick = a.tick(0.5)
    assert tick.decision is not None and not tick.decision.measured and a.last is None
    assert a.window.tokens == 3 and a.window.start == 0.0  # the same window goes on
    feed(a.window, 1, 0.010, steps=6)
    tick = a.tick(1.0)
    assert tick.decision is not None and tick.decision.measured
    assert a.last is tick.decision and a.window.start == 1.0
    tick = a.tick(5.0)  # nothing ran: dropped, so the next window does not span the pause
    assert tick.decision is None and tick.skipped == "idle" and a.window.start == 5.0
    assert a.last is not None  # the last judged window's values stay for the load report


def test_after_idle_reset_s_without_requests_the_cap_goes_back_to_the_engine_max() -> None:
    a = autoscaler(32)
    feed(a.window, 32, 0.080, steps=10, waiting=4)
    a.tick(0.5)
    feed(a.window, 16, 0.080, steps=10, waiting=4)
    a.tick(1.0)
    assert a.max_batch == 8
    for t in (1.5, 6.0, 10.9):  # idle, but not for 10 s since the last busy window
        assert a.tick(t).skipped == "idle" and a.max_batch == 8
    tick = a.tick(11.5)  # idle since 1.0
    assert tick.decision is not None and tick.decision.action == "reset"
    assert a.max_batch == 32 and (a.window.start, a.window.cap) == (11.5, 32)
    assert a.tick(12.0).skipped == "idle"  # at the limit already: nothing more to do
    feed(a.window, 32, 0.080, steps=10, waiting=4)  # busy again: the idle stretch ends
    a.tick(12.5)
    assert a.max_batch == 16 and a.idle_since is None


def test_a_thin_window_at_a_bursts_end_does_not_hide_the_idle_after_it() -> None:
    a = autoscaler(32)
    feed(a.window, 32, 0.080, steps=10, waiting=4)
    a.tick(0.5)
    assert a.max_batch == 16
    feed(a.window, 1, 0.080, steps=3)  # the last request's few tokens: too thin to judge
    assert a.tick(1.0).decision is not None and a.window.steps == 3  # kept accumulating
    tick = a.tick(1.5)  # no step since: idle, and the stale thin window is dropped
    assert tick.skipped == "idle" and a.window.steps == 0 and a.window.peak_running == 0
    assert a.tick(10.9).skipped == "idle" and a.max_batch == 16  # idle since 1.0
    tick = a.tick(11.0)
    assert tick.decision is not None and tick.decision.action == "reset" and a.max_batch == 32


def test_a_violation_in_a_few_steps_waits_for_enough_steps() -> None:
    """Two slow steps (a CPU quota's pause) are not the batch's ITL: no halving yet."""
    a = autoscaler(8)
    feed(a.window, 8, 0.100, steps=2)  # 16 tokens, ITL twice the 50 ms SLO, in 2 steps
    tick = a.tick(0.5)
    assert tick.decision is not None and not tick.decision.measured
    assert "too few steps" in tick.decision.reason and a.max_batch == 8
    feed(a.window, 8, 0.020, steps=6)  # the next steps are fast: the mean is what counts
    tick = a.tick(1.0)
    assert tick.decision is not None and tick.decision.measured
    assert tick.decision.lbp == pytest.approx((16 * 0.100 + 48 * 0.020) / 64 / 0.050)  # 0.8
    assert tick.decision.action != "halve" and a.max_batch == 8


def test_tightest_slo_of_the_classes_running_decides() -> None:
    a = autoscaler(8)
    feed(a.window, 8, 0.200, steps=8, request_class=BATCH)  # 200 ms: fine for batch (1 s)
    tick = a.tick(0.5)
    assert tick.decision is not None and tick.decision.lbp == pytest.approx(0.2)
    assert a.max_batch == 8
    feed(a.window, 4, 0.200, steps=4, request_class=BATCH)
    feed(a.window, 4, 0.200, steps=4, request_class=INTERACTIVE)  # 50 ms SLO now binds
    tick = a.tick(1.0)
    assert tick.decision is not None and tick.decision.action == "halve"


def test_a_saturated_engine_settles_under_the_slo() -> None:
    """ITL grows with the batch (10 ms + 2 ms each); SLO 50 ms: at most 20 fit."""
    a = autoscaler(64)
    running, caps, now = 64, [], 0.0
    for _ in range(60):
        now += 0.5
        feed(a.window, running, 0.010 + 0.002 * running, steps=10, waiting=8)
        a.tick(now)
        caps.append(a.max_batch)
        running = a.max_batch  # the running set drains to the cap between ticks
    assert caps[0] == 32 and min(caps[:6]) <= 20  # halved within a few ticks
    assert min(caps[-20:]) >= 10 and max(caps[-20:]) <= 20, caps  # within the SLO, not far under


# -- the tick on a running AsyncEngine --------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_batch_control_applies_the_cap_and_exports_backpressure() -> None:
    async def go() -> None:
        registry = CollectorRegistry()
        metrics = ServingMetrics(registry)
        core = FakeCore(max_batch=8, step_s=0.002)
        engine = AsyncEngine(core, metrics=metrics)
        await engine.start()
        metrics.read_load_from(engine.load_now)
        assert engine.engine_max_batch == 8
        before = engine.load_report(instance="w", model="m", ready=True)
        assert (before.max_batch, before.engine_max_batch, before.backpressure) == (8, 8, None)
        assert before.batch_room == 0  # no local autoscaler: the cap is the room
        assert math.isnan(registry.get_sample_value("cascade_worker_backpressure") or 0.0)

        clock = Clock()
        slos = ItlSlos(interactive_s=0.0001, batch_s=1.0)  # 0.1 ms: every window violates
        auto = LocalAutoscaler(BatchLimits(engine_max=8), slos, now=0.0)
        control = BatchControl(engine, auto, tick_s=0.5, clock=clock)
        control.start()  # the fake clock: only explicit ticks below
        await control.stop()

        params = {"max_tokens": 12}
        requests = [
            GenerateRequest.model_validate({"request_id": f"r{i}", "prompt": "a", "params": params})
            for i in range(8)
        ]
        streams = [await engine.submit(r) for r in requests]
        for s in streams:
            [c async for c in s]
        clock.now = 1.0
        tick = control.tick()
        assert tick.decision is not None and tick.decision.action == "halve"
        assert control.applied == 4
        await until(lambda: engine.max_batch == 4)
        assert core.max_batch == 4

        report = engine.load_report(instance="w", model="m", ready=True)
        assert (report.max_batch, report.engine_max_batch) == (4, 8)
        assert report.batch_room == 4  # halved for latency: no room above the cap
        assert report.latency_backpressure is not None and report.latency_backpressure > 1
        assert report.backpressure == report.latency_backpressure
        assert report.throughput_backpressure is None  # nothing to compare with yet
        sample = registry.get_sample_value
        assert sample("cascade_worker_max_batch") == 4
        assert sample("cascade_worker_engine_max_batch") == 8
        assert sample("cascade_worker_batch_room") == 4
        assert sample("cascade_worker_latency_backpressure") == report.latency_backpressure
        assert sample("cascade_worker_backpressure") == report.backpressure
        assert math.isnan(sample("cascade_worker_throughput_backpressure") or 0.0)
        await engine.stop()
        assert engine.set_max_batch(2) is False

    run(go)


def test_the_worker_runs_it_with_adaptive_batch_on_and_stops_it_on_drain() -> None:
    async def go() -> None:
        factory = Factory(step_s=0.003, max_batch=8)
        flags = {"adaptive_batch": True, "adaptive_batch_tick_seconds": 0.05}
        async with worker(factory, interactive_itl_slo_ms=1, **flags) as w:
            await w.serve()
            control = w.serving.batch
            assert control is not None and control.applied == 8 and control.active
            burst = [w.generate(request(f"r{i}", max_tokens=60)) for i in range(8)]
            await asyncio.gather(*burst)  # 3 ms a token against a 1 ms SLO: halves
            _, doc = await w.call("GET", "/v1/load")
            assert doc["engine_max_batch"] == 8 and doc["max_batch"] < 8
            assert doc["latency_backpressure"] > 1 and doc["backpressure"] >= 1
            assert factory.core.max_batch == doc["max_batch"]
            status, _ = await w.call("POST", "/v1/control/drain", {})
            assert status == 202
            await w.wait_engine("off")
            assert w.serving.batch is None and not control.active

        async with worker(Factory(max_batch=8)) as w:  # off by default
            await w.serve()
            assert w.serving.batch is None
            _, doc = await w.call("GET", "/v1/load")
            assert (doc["max_batch"], doc["engine_max_batch"], doc["backpressure"]) == (8, 8, None)

    run(go)


def test_the_window_reports_the_mean_compute_time_of_all_its_steps() -> None:
    w = BatchWindow(0.0, 8)
    w.step(8, 2, 8, took_s=0.1)  # pure decode
    w.step(8, 2, 8, took_s=0.3, prefill=128)  # a prompt chunk rides along
    w.step(8, 2, 8)  # untimed: not counted
    for _ in range(8):
        w.token(1, 0.2, INTERACTIVE)
    obs = w.observation(SLOS)
    assert obs.mean_step_s == pytest.approx(0.2) and obs.throughput == pytest.approx(80.0)
