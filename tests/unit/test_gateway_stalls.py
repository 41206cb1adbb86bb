"""A backend that makes no progress on its streams has them moved (issue 34 item 4).

The decision is pure and tested tick by tick; then fake workers on loopback: one stops
mid-stream as a SIGSTOPped worker does (its TCP connections stay open, nothing more
comes on them, its load polls go unanswered), and the streams on it finish on the other
one within the stall bound, seamless (fake workers continue a resumed request where its
`resume` says: "a0 a1 b2 b3 ..."), where without the watch they would wait for it.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import openai
import pytest
from gateway_fakes import MODEL, FakeWorker, Running, run_with

from cascade_gateway.backends import BackendPool
from cascade_gateway.stalls import Liveness, stalled
from cascade_protocol.load import LoadReport

pytestmark = pytest.mark.timeout(60)

BOUND = 5.0


def live(url: str, streams: int, progress_at: float, routable: bool = True) -> Liveness:
    return Liveness(url, streams, progress_at, routable)


def test_a_backend_with_streams_and_no_progress_for_the_bound_is_stalled() -> None:
    backends = [live("a", 3, progress_at=0.0), live("b", 1, progress_at=9.0)]
    assert stalled(backends, now=4.9, bound_s=BOUND) == []
    assert stalled(backends, now=5.0, bound_s=BOUND) == ["a"]
    assert stalled(backends, now=14.0, bound_s=BOUND) == []  # b stalled too: nowhere to go
    assert stalled([*backends, live("c", 0, 0.0)], now=14.0, bound_s=BOUND) == ["a", "b"]


def test_idle_backends_never_stall_and_zero_turns_the_watch_off() -> None:
    backends = [live("a", 0, progress_at=0.0), live("b", 0, progress_at=0.0)]
    assert stalled(backends, now=100.0, bound_s=BOUND) == []
    assert stalled([live("a", 2, 0.0), live("b", 0, 0.0)], now=100.0, bound_s=0.0) == []


def test_with_nowhere_to_go_streams_wait() -> None:
    """Every other backend is unroutable, or stalled too: cutting would only fail them."""
    assert stalled([live("a", 2, 0.0), live("b", 0, 0.0, routable=False)], 10.0, BOUND) == []
    assert stalled([live("a", 2, 0.0), live("b", 1, 0.0)], 10.0, BOUND) == []
    assert stalled([live("a", 2, 0.0), live("b", 1, 8.0)], 10.0, BOUND) == ["a"]


def test_a_moving_step_count_is_progress_without_chunks() -> None:
    """A long prefill streams nothing for a while, but its steps end."""
    clock = [0.0]
    pool = BackendPool(["http://a", "http://b"], clock=lambda: clock[0])
    report = LoadReport(instance="a", model=MODEL, ready=True, max_batch=4, engine_steps=10)
    for url in pool.urls():
        pool.update(url, report)
    pool.open_stream("http://a")
    for t, steps in ((2.0, 14), (4.0, 19), (6.0, 25), (8.0, 30)):
        clock[0] = t
        pool.update("http://a", report.model_copy(update={"engine_steps": steps}))
        assert pool.cut_stalled(BOUND) == []
    clock[0] = 13.0  # no step for 5 s
    assert pool.cut_stalled(BOUND) == ["http://a"]
    [a, _] = pool.states()
    assert a.streams == set() and a.avoid_until > 13.0 and a.error.startswith("stalled")


async def stream_text(run: Running, max_tokens: int) -> str:
    client = openai.AsyncOpenAI(base_url=run.base_url, api_key="x", max_retries=0)
    stream = await client.completions.create(
        model=MODEL, prompt="hi", max_tokens=max_tokens, stream=True
    )
    text = "".join([c.choices[0].text async for c in stream if c.choices])
    await client.close()
    return text


@pytest.mark.parametrize("mode", ["hang_after", "hang"])
def test_streams_on_a_hung_worker_finish_on_another_within_the_bound(mode: str) -> None:
    hangs = FakeWorker("a", mode=mode, die_after=2, chunk_delay=0.01)
    healthy = FakeWorker("b", running_reported=1, chunk_delay=0.01)  # "a" looks idler

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        began = time.monotonic()
        texts = await asyncio.gather(*(stream_text(run, 6) for _ in range(3)))
        took = time.monotonic() - began
        print(f"{mode}: 3 streams done in {took:.2f}s: {texts}")
        # Within the bound plus a check period, a poll and the resumed tail.
        assert took < 1.0 + 0.5 + 1.0
        expected = "a0 a1 b2 b3 b4 b5 " if mode == "hang_after" else "b0 b1 b2 b3 b4 b5 "
        assert expected in texts
        assert all(t.endswith("b5 ") and len(t.split()) == 6 for t in texts)
        assert run.gw.metrics.backend_stalls._value.get() >= 1
        if mode == "hang_after":
            assert run.gw.metrics.migrations.labels("stall")._value.get() >= 1

    run_with([hangs, healthy], test, stall_seconds=1.0)


def test_without_the_watch_a_hung_worker_holds_its_streams() -> None:
    """The same hang with stall_seconds 0: the stream is still waiting after 3 s."""
    hangs = FakeWorker("a", mode="hang_after", die_after=2)
    healthy = FakeWorker("b", running_reported=1)

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(stream_text(run, 6), timeout=3.0)

    run_with([hangs, healthy], test, stall_seconds=0.0)
