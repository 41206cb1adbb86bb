"""Requests held while no backend is ready (scale from zero), on loopback listeners.

A gateway starts with no backend at all; requests wait in their class queues (counted
as `demand.held` in /v1/load) until a fake worker appears through discovery, then are
served. Held streams get SSE keep-alive comments, so their headers go out before any
backend exists; a held request whose deadline passes gets a clear error: plain JSON
when nothing was sent yet, an OpenAI error event once the stream started.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp.test_utils import TestServer
from gateway_fakes import MODEL, FakeWorker, Running, running, sse_events
from waiting import until

from cascade_gateway.discovery import Discovered
from cascade_protocol.gateway_load import GatewayLoad
from cascade_protocol.generate import RequestClass
from cascade_protocol.roles import InstanceRole

INTERACTIVE, BATCH = RequestClass.INTERACTIVE, RequestClass.BATCH
pytestmark = pytest.mark.timeout(60)

COMPLETION = {"model": MODEL, "prompt": "hi", "max_tokens": 2}
KEEPALIVE = ": keep-alive"


@asynccontextmanager
async def started(worker: FakeWorker) -> AsyncIterator[FakeWorker]:
    worker.server = TestServer(worker.app())
    async with worker.server:
        yield worker


def discover(run: Running, *found: tuple[FakeWorker, str, InstanceRole]) -> None:
    """What a pod listing does: the pool now has these pods as backends."""
    run.gw.pool.set_discovered(Discovered(w.url, pod, role) for w, pod, role in found)


async def load(run: Running, http: aiohttp.ClientSession) -> GatewayLoad:
    async with http.get(run.gateway.make_url("/v1/load")) as resp:
        return GatewayLoad.model_validate_json(await resp.read())


async def post(
    http: aiohttp.ClientSession, run: Running, body: dict[str, Any], path: str = "/v1/completions"
) -> tuple[int, Any, str]:
    async with http.post(run.gateway.make_url(path), json=body) as resp:
        text = await resp.text()
        data = json.loads(text) if resp.content_type == "application/json" else text
        return resp.status, data, resp.content_type


def with_empty_gateway(
    test: Callable[[Running, aiohttp.ClientSession], Awaitable[None]], **config: Any
) -> None:
    async def go() -> None:
        async with running([], **config) as run, aiohttp.ClientSession() as http:
            await test(run, http)

    asyncio.run(go())


def test_held_requests_are_reported_then_served_when_a_backend_appears() -> None:
    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        assert (await http.get(run.gateway.make_url("/readyz"))).status == 200
        interactive = asyncio.create_task(post(http, run, COMPLETION))
        batch_body = COMPLETION | {"prompt": [1, 2, 3, 4, 5], "max_tokens": 3,
                                   "request_class": "batch"}  # fmt: skip
        batch = asyncio.create_task(post(http, run, batch_body))
        await until(
            lambda: run.gw.scheduler.depth(INTERACTIVE) + run.gw.scheduler.depth(BATCH) == 2
        )
        report = await load(run, http)
        assert (report.backends_total, report.backends_ready, report.backends) == (0, 0, [])
        assert report.classes["interactive"].queued == 1
        assert report.classes["batch"].queued == 1
        assert report.demand.held == 2
        assert report.demand.last_arrival_age_s is not None
        assert report.demand.last_arrival_age_s < 5
        [queued] = report.demand.batch_queue
        assert (queued.prompt_tokens, queued.max_tokens) == (5, 3)
        assert 0 <= queued.age_s < 5
        assert queued.deadline_in_s == pytest.approx(60.0 - queued.age_s, abs=0.01)

        async with started(FakeWorker("w")) as worker:
            discover(run, (worker, "worker-0", InstanceRole.MIXED))
            status, body, _ = await interactive
            assert status == 200 and body["choices"][0]["text"] == "w0 w1 "
            status, body, _ = await batch
            assert status == 200 and body["choices"][0]["text"] == "w0 w1 w2 "
            report = await load(run, http)
            assert report.demand.held == 0 and report.demand.batch_queue == []
            assert (report.demand.output_samples, report.demand.output_tokens_mean) == (2, 2.5)
            [backend] = report.backends
            assert (backend.pod, backend.role, backend.ready) == ("worker-0", "mixed", True)

    with_empty_gateway(test, request_timeout=20.0)


def test_a_held_stream_gets_keepalives_then_its_tokens() -> None:
    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 2, "stream": True}  # fmt: skip
        async with http.post(run.gateway.make_url("/v1/chat/completions"), json=body) as resp:
            # Headers go out with the first keep-alive, before any backend exists.
            assert resp.status == 200
            assert resp.content_type == "text/event-stream"
            for _ in range(3):  # nothing but comments while held
                assert await resp.content.readline() == b": keep-alive\n"
                assert await resp.content.readline() == b"\n"
            assert run.gw.scheduler.held() == 1
            async with started(FakeWorker("w")) as worker:
                discover(run, (worker, "worker-0", InstanceRole.INTERACTIVE))
                rest = (await resp.content.read()).decode()
        events = sse_events(rest)
        assert events[-1] == "[DONE]"
        chunks = [e for e in events if isinstance(e, dict)]
        # The role chunk still comes first, though keep-alives started the stream.
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "w0 w1 "

    with_empty_gateway(test, keepalive_seconds=0.05)


def test_a_held_stream_past_its_deadline_ends_with_an_error_event() -> None:
    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        status, body, ctype = await post(http, run, COMPLETION | {"stream": True})
        assert (status, ctype) == (200, "text/event-stream")
        assert body.count(KEEPALIVE) >= 2  # every 0.1 s of the 0.5 s
        [error, done] = sse_events(body)
        assert done == "[DONE]"
        assert isinstance(error, dict)
        assert error["error"]["code"] == "no_backend"
        assert error["error"]["type"] == "service_unavailable"
        assert "no ready instance (scaled to zero" in error["error"]["message"]
        # Through the official client: an APIError with the message.
        client = openai.AsyncOpenAI(base_url=run.base_url, api_key="x", max_retries=0)
        async with client:
            stream = await client.completions.create(model=MODEL, prompt="hi", stream=True)
            with pytest.raises(openai.APIError) as exc:
                async for _ in stream:
                    pass
        assert "no ready instance" in exc.value.message

    with_empty_gateway(test, request_timeout=0.5, keepalive_seconds=0.1)


def test_held_requests_past_their_deadline_before_any_keepalive_get_json_errors() -> None:
    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        for body in (COMPLETION, COMPLETION | {"stream": True}):
            status, error, ctype = await post(http, run, body)
            assert (status, ctype) == (503, "application/json")
            assert error["error"]["code"] == "no_backend"
            assert "no ready instance" in error["error"]["message"]
        assert run.gw.scheduler.held() == 0

    with_empty_gateway(test, request_timeout=0.3, keepalive_seconds=5.0)


def test_a_worker_refusal_after_keepalives_is_an_error_event() -> None:
    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        task = asyncio.create_task(post(http, run, COMPLETION | {"prompt": "too long",
                                                                 "stream": True}))  # fmt: skip
        await until(lambda: run.gw.scheduler.held() == 1)
        await asyncio.sleep(0.2)  # a few keep-alives: the stream has started
        async with started(FakeWorker("w")) as worker:
            discover(run, (worker, "worker-0", InstanceRole.MIXED))
            status, body, _ = await task
        assert status == 200 and body.startswith(KEEPALIVE)
        [error, done] = sse_events(body)
        assert isinstance(error, dict) and done == "[DONE]"
        assert error["error"]["code"] == "context_length_exceeded"

    with_empty_gateway(test, keepalive_seconds=0.05)


def test_load_report_names_pods_roles_and_interactive_in_flight() -> None:
    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        async with started(FakeWorker("i")) as inter, started(FakeWorker("b")) as bat:
            discover(
                run,
                (inter, "worker-i", InstanceRole.INTERACTIVE),
                (bat, "worker-b", InstanceRole.BATCH),
            )
            await run.wait_ready(2)
            inter.gate.clear()
            bat.gate.clear()
            calls = [
                asyncio.create_task(post(http, run, COMPLETION)),
                asyncio.create_task(post(http, run, COMPLETION | {"request_class": "batch"})),
            ]
            await until(lambda: inter.active == 1 and bat.active == 1)
            report = await load(run, http)
            by_pod = {b.pod: b for b in report.backends}
            assert by_pod["worker-i"].role == "interactive"
            assert (by_pod["worker-i"].in_flight, by_pod["worker-i"].interactive_in_flight) == (
                1, 1
            )  # fmt: skip
            assert by_pod["worker-b"].role == "batch"
            assert (by_pod["worker-b"].in_flight, by_pod["worker-b"].interactive_in_flight) == (
                1, 0
            )  # fmt: skip
            # The operator relabels worker-b interactive: the next listing re-routes.
            discover(
                run,
                (inter, "worker-i", InstanceRole.INTERACTIVE),
                (bat, "worker-b", InstanceRole.INTERACTIVE),
            )
            report = await load(run, http)
            assert {b.pod: b.role for b in report.backends} == {
                "worker-i": "interactive", "worker-b": "interactive"
            }  # fmt: skip
            assert {b.pod: b.in_flight for b in report.backends} == {"worker-i": 1, "worker-b": 1}
            inter.gate.set()
            bat.gate.set()
            assert [(await c)[0] for c in calls] == [200, 200]

    with_empty_gateway(test)
