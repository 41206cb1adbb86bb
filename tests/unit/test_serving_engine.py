"""AsyncEngine over a fake EngineCore: streaming, batching, abort, failures, admission, drain."""

from __future__ import annotations

import asyncio
import threading

import pytest
from prometheus_client import CollectorRegistry
from serving_harness import FakeCore, run

from cascade_protocol.generate import FinishReason, GenerateChunk, GenerateRequest
from cascade_worker.engine.core import RequestRejected as Rejected
from cascade_worker.serving.async_engine import AsyncEngine
from cascade_worker.serving.errors import NotServing, WaitingQueueFull
from cascade_worker.serving.metrics import ServingMetrics, TokenRate


def req(rid: str, max_tokens: int = 3, prompt: str = "a b c") -> GenerateRequest:
    return GenerateRequest.model_validate(
        {"request_id": rid, "prompt": prompt, "params": {"max_tokens": max_tokens}}
    )


async def collect(engine: AsyncEngine, request: GenerateRequest) -> list[GenerateChunk]:
    return [chunk async for chunk in engine.generate(request)]


async def started(core: FakeCore, **kwargs: object) -> AsyncEngine:
    engine = AsyncEngine(core, **kwargs)  # type: ignore[arg-type]
    await engine.start()
    return engine


def test_generate_streams_every_token_then_the_final_chunk() -> None:
    async def go() -> None:
        core = FakeCore()
        engine = await started(core)
        chunks = await collect(engine, req("r1", max_tokens=3))
        assert [c.token_ids for c in chunks] == [[100], [101], [102]]
        assert "".join(c.text for c in chunks) == " t0 t1 t2"
        assert [c.finish_reason for c in chunks] == [None, None, FinishReason.LENGTH]
        assert chunks[-1].prompt_tokens == 3 and chunks[-1].completion_tokens == 3
        await engine.stop()
        # Every core call came from the one engine thread, never from the loop.
        assert core.threads and threading.get_ident() not in core.threads
        assert len(core.threads) == 1

    run(go)


def test_concurrent_requests_share_the_batch() -> None:
    async def go() -> None:
        core = FakeCore(max_batch=3, step_s=0.005)
        engine = await started(core)
        results = await asyncio.gather(*(collect(engine, req(f"r{i}", 5)) for i in range(5)))
        assert all(r[-1].finish_reason == FinishReason.LENGTH for r in results)
        assert all(len(r) == 5 for r in results)
        assert core.peak_running == 3  # batched, and never above max_batch
        await engine.stop()

    run(go)


def test_idle_engine_does_not_spin() -> None:
    async def go() -> None:
        core = FakeCore()
        engine = await started(core)
        await collect(engine, req("r1"))
        steps = core.steps
        await asyncio.sleep(0.2)
        assert core.steps == steps
        await engine.stop()

    run(go)


def test_leaving_early_aborts_the_request_in_the_core() -> None:
    async def go() -> None:
        core = FakeCore(step_s=0.005)
        registry = CollectorRegistry()
        engine = await started(core, metrics=ServingMetrics(registry))
        gen = engine.generate(req("r1", max_tokens=1000, prompt="x"))
        first = await anext(gen)
        assert first.token_ids == [100]
        await gen.aclose()
        for _ in range(100):
            if "r1" in core.aborted and not core.running:
                break
            await asyncio.sleep(0.01)
        assert core.aborted == ["r1"] and not core.running
        assert engine.in_flight == 0
        aborted = registry.get_sample_value(
            "cascade_worker_requests_total", {"finish_reason": "abort"}
        )
        assert aborted == 1.0
        await engine.stop()

    run(go)


def test_engine_failure_ends_requests_with_error_and_engine_goes_on() -> None:
    async def go() -> None:
        core = FakeCore(step_s=0.005)
        engine = await started(core)
        gen = engine.generate(req("r1", max_tokens=1000, prompt="x"))
        await anext(gen)
        core.fail_next_step = True
        rest = [c async for c in gen]
        assert rest[-1].finish_reason == FinishReason.ERROR
        assert rest[-1].error is not None and "boom" in rest[-1].error
        assert "r1" in core.aborted  # the core was told to drop it
        chunks = await collect(engine, req("r2"))  # the next request is served
        assert chunks[-1].finish_reason == FinishReason.LENGTH
        assert engine.last_failure is not None and "boom" in engine.last_failure
        await engine.stop()

    run(go)


def test_dead_engine_thread_fails_requests_and_refuses_new_ones() -> None:
    async def go() -> None:
        core = FakeCore(step_s=0.005)
        engine = await started(core)
        gen = engine.generate(req("r1", max_tokens=1000, prompt="x"))
        await anext(gen)

        def broken() -> bool:
            raise RuntimeError("has_work exploded")

        core.has_work = broken  # type: ignore[method-assign,unused-ignore]
        rest = [c async for c in gen]
        assert rest[-1].finish_reason == FinishReason.ERROR
        assert "exploded" in (rest[-1].error or "")
        assert not engine.accepting
        with pytest.raises(NotServing, match="exploded"):
            await engine.submit(req("r2"))
        await engine.stop()

    run(go)


def test_rejected_and_duplicate_requests_are_refused_at_admission() -> None:
    async def go() -> None:
        core = FakeCore(max_model_len=8, step_s=0.005)
        engine = await started(core)
        with pytest.raises(Rejected) as exc:
            await engine.submit(req("long", max_tokens=6, prompt="a b c"))
        assert exc.value.param == "params.max_tokens"
        stream = await engine.submit(req("dup", max_tokens=4))
        with pytest.raises(Rejected, match="already in flight"):
            await engine.submit(req("dup"))
        assert [c async for c in stream][-1].finish_reason == FinishReason.LENGTH
        assert engine.in_flight == 0
        await engine.stop()

    run(go)


def test_full_waiting_queue_refuses_with_queue_full() -> None:
    async def go() -> None:
        core = FakeCore(max_batch=1, step_s=0.005, max_model_len=10_000)
        engine = await started(core, queue_limit=1)
        running = await engine.submit(req("a", 1000))
        waiting = await engine.submit(req("b", 1000))
        assert engine.waiting == 1
        with pytest.raises(WaitingQueueFull):
            await engine.submit(req("c"))
        running.abort()
        waiting.abort()
        await engine.stop()

    run(go)


def test_drain_waits_for_in_flight_then_refuses() -> None:
    async def go() -> None:
        core = FakeCore(step_s=0.005)
        engine = await started(core)
        task = asyncio.ensure_future(collect(engine, req("r1", max_tokens=10)))
        await asyncio.sleep(0.02)
        assert await engine.drain(5.0) == 0  # finished here, none handed back
        assert (await task)[-1].finish_reason == FinishReason.LENGTH
        with pytest.raises(NotServing, match="draining"):
            await engine.submit(req("r2"))
        await engine.stop()

    run(go)


def test_drain_hands_back_what_cannot_finish_before_the_deadline() -> None:
    async def go() -> None:
        core = FakeCore(step_s=0.005, max_model_len=100_000)
        engine = await started(core)
        task = asyncio.ensure_future(collect(engine, req("r1", max_tokens=50_000)))
        await asyncio.sleep(0.02)
        assert await engine.drain(0.05) == 1
        last = (await task)[-1]
        assert last.finish_reason == FinishReason.MIGRATE and "drain" in (last.error or "")
        assert last.text == ""  # held-back text stays for the instance that resumes it
        await engine.stop()
        assert "r1" in core.aborted

    run(go)


def test_load_report_and_set_max_batch() -> None:
    async def go() -> None:
        core = FakeCore(max_batch=2, max_model_len=64)
        engine = await started(core)
        await collect(engine, req("r1", max_tokens=5))
        report = engine.load_report(instance="w-0", model="m", ready=True)
        assert report.ready and report.max_batch == 2 and report.max_model_len == 64
        assert report.waiting == report.running == 0
        assert report.tokens_per_s > 0
        assert report.engine_steps >= 5  # one token a step: the gateway's progress signal
        assert engine.set_max_batch(7) is True
        await collect(engine, req("r2", max_tokens=1))  # the setter ran before this step
        assert core.max_batch == 7 and engine.max_batch == 7
        later = engine.load_report(instance="w-0", model="m", ready=True)
        assert later.engine_steps > report.engine_steps
        await engine.stop()
        report = engine.load_report(instance="w-0", model="m", ready=True)
        assert not report.ready and report.draining

    run(go)


def test_token_rate_is_a_sliding_window() -> None:
    rate = TokenRate(window_s=10.0, since=0.0)
    rate.add(1.0, 10)
    rate.add(5.0, 10)
    assert rate.rate(2.0) == 10.0  # young: divided by at least one second
    assert rate.rate(10.0) == 2.0
    assert rate.rate(12.0) == 1.0  # the first sample fell out of the window
    assert rate.rate(30.0) == 0.0


def test_a_step_that_does_not_end_fails_readiness_until_it_does() -> None:
    """Busy with no step ended for the stall bound: `failure` says so (readiness fails,
    admission stops); once the step ends the engine serves again."""

    async def go() -> None:
        core = FakeCore(step_s=0.8)
        engine = await started(core)
        engine.liveness.stall_s = 0.3
        task = asyncio.ensure_future(collect(engine, req("r1", max_tokens=1)))
        await asyncio.sleep(0.5)
        assert "engine stalled" in (engine.failure or "") and not engine.accepting
        await task
        assert engine.failure is None and engine.accepting
        await engine.stop()

    run(go)
