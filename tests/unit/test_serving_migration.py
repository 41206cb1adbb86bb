"""A draining worker hands its streams back and the gateway resumes them elsewhere.

First the rule (serving/migration.py): which requests go when a drain starts, and that
it looks again while the drain lasts. Then the whole path in one process, without a
cluster: two real workers with a real tiny engine (slowed to 10 ms a step so a drain
lands mid-stream) behind a real gateway; greedy streams run once uninterrupted, then
again while one worker is told to drain: every stream completes, and each client's text
equals its uninterrupted run's.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer
from engine_harness import make_model
from gateway_fakes import MODEL, gateway_config, sse_events
from serving_harness import FakeCore, Worker, run, worker

from cascade_gateway.handlers import GATEWAY_KEY
from cascade_gateway.main import build_app
from cascade_protocol.generate import FinishReason, GenerateChunk, GenerateRequest
from cascade_worker.engine.core import EngineCore
from cascade_worker.engine.options import EngineOptions
from cascade_worker.serving.async_engine import AsyncEngine
from cascade_worker.serving.factory import default_engine_factory
from cascade_worker.serving.migration import InFlightRequest, migrate_now
from cascade_worker.serving.stream import RequestStream

STREAMS = 8
MAX_TOKENS = 60


def test_migrate_now_moves_unstarted_stuck_and_too_long_requests() -> None:
    requests = [
        InFlightRequest("queued", remaining_tokens=10, tokens_per_s=0.0),
        InFlightRequest("short", remaining_tokens=10, tokens_per_s=20.0),
        InFlightRequest("long", remaining_tokens=500, tokens_per_s=20.0),
        InFlightRequest("no-rate-yet", remaining_tokens=500, tokens_per_s=None),
    ]
    assert migrate_now(requests, seconds_left=5.0) == ["queued", "long"]
    assert migrate_now(requests, seconds_left=0.1) == ["queued", "short", "long"]
    assert migrate_now(requests, seconds_left=100.0) == ["queued"]


def test_a_drain_looks_again_as_streams_slow_down() -> None:
    """Streams that could finish at the rate they had go later, once they slow down."""

    async def go() -> None:
        core = FakeCore(step_s=0.01, max_batch=8, max_model_len=10_000)
        engine = AsyncEngine(core)
        await engine.start()
        streams = [await engine.submit(req(f"r{i}", 300)) for i in range(4)]
        readers = [asyncio.ensure_future(collect(s)) for s in streams]
        await asyncio.sleep(0.3)  # ~100 tokens/s each: 3 s left, in a 10 s deadline
        core.step_s = 0.05  # now 20 tokens/s: they cannot make it
        started = asyncio.get_running_loop().time()
        assert await engine.drain(10.0) == 4
        waited = asyncio.get_running_loop().time() - started
        assert 1.0 <= waited < 3.0  # handed back at a later look, not at the deadline
        finals = [(await r)[-1] for r in readers]
        assert all(c.finish_reason == FinishReason.MIGRATE for c in finals)
        await engine.stop()

    run(go)


def req(rid: str, max_tokens: int) -> GenerateRequest:
    return GenerateRequest.model_validate(
        {"request_id": rid, "prompt": "a b", "params": {"max_tokens": max_tokens}}
    )


async def collect(stream: RequestStream) -> list[GenerateChunk]:
    return [chunk async for chunk in stream]


class SlowCore:
    """The real engine, a little slower per step, so a test can act mid-stream."""

    def __init__(self, core: EngineCore, step_s: float) -> None:
        self.core = core
        self.step_s = step_s

    def step(self) -> list[GenerateChunk]:
        time.sleep(self.step_s)
        return self.core.step()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.core, name)


def slow_factory(store: Any, options: EngineOptions) -> Any:
    return SlowCore(default_engine_factory(store, options), 0.01)


def in_flight(w: Worker) -> int:
    return w.serving.engine.in_flight if w.serving.engine is not None else 0


async def stream(http: aiohttp.ClientSession, url: str, i: int, seen: list[int]) -> str:
    body = {
        "model": MODEL,
        "prompt": f"Request number {i} says hello",
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    text, finish = [], None
    async with http.post(f"{url}/v1/completions", json=body) as resp:
        assert resp.status == 200
        buffer = ""
        async for raw in resp.content:
            buffer += raw.decode()
            if not buffer.endswith("\n\n"):
                continue
            for event in sse_events(buffer):
                assert isinstance(event, dict | str) and "error" not in event, event
                if isinstance(event, dict):
                    text.append(event["choices"][0]["text"])
                    finish = event["choices"][0]["finish_reason"] or finish
                    seen[i] += 1
            buffer = ""
    assert finish == "length"
    return "".join(text)


def test_draining_a_worker_moves_its_streams_and_greedy_output_is_unchanged(
    tmp_path: Path,
) -> None:
    model = make_model(tmp_path / "m")
    config = {"serve_on_start": True, "model_path": str(model), "blocks": 2,
              "max_batch": 8, "max_model_len": 128}  # fmt: skip

    async def go() -> None:
        async with (
            worker(slow_factory, **config) as a,
            worker(slow_factory, **config) as b,
            aiohttp.ClientSession() as http,
        ):
            for w in (a, b):
                assert (await w.wait_engine("serving", "failed", timeout=60))["engine"] == "serving"
            gateway = TestServer(build_app(gateway_config(backends=(a.base, b.base))))
            await gateway.start_server()
            try:
                await check(gateway, (a, b), http)
            finally:
                await gateway.close()

    async def check(
        gateway: TestServer, workers: tuple[Worker, Worker], http: aiohttp.ClientSession
    ) -> None:
        url = str(gateway.make_url("")).rstrip("/")
        seen = [0] * STREAMS
        reference = await asyncio.gather(*(stream(http, url, i, seen) for i in range(STREAMS)))
        seen = [0] * STREAMS
        tasks = [asyncio.ensure_future(stream(http, url, i, seen)) for i in range(STREAMS)]
        while min(seen) < 5:
            await asyncio.sleep(0.005)
        victim = max(workers, key=in_flight)  # the busier one, whatever the routing did
        on_victim = in_flight(victim)
        status, _ = await victim.call("POST", "/v1/control/drain", {"timeoutS": 0.1})
        assert status == 202
        moved = await asyncio.gather(*tasks)
        assert moved == reference
        metrics = gateway.app[GATEWAY_KEY].metrics
        assert on_victim > 0
        assert metrics.migrations.labels("drain")._value.get() == on_victim
        assert max(seen) < MAX_TOKENS + 2  # nothing repeated

    run(go, timeout=120)
