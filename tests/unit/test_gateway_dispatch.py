"""Queueing, routing and failure handling of the gateway against fake workers.

Each test starts real listeners on loopback (fake workers + gateway) and drives them
over HTTP: class queues (429 + Retry-After, interactive first), least-loaded routing,
retries before the first token, a clean error after it, deadlines, client disconnects.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import aiohttp
import openai
import pytest
from gateway_fakes import MODEL, FakeWorker, Running, gateway_config, run_with, running, sse_events
from waiting import until

from cascade_gateway import upstream
from cascade_gateway.main import build_app
from cascade_protocol.generate import RequestClass
from cascade_protocol.service import serve

INTERACTIVE, BATCH = RequestClass.INTERACTIVE, RequestClass.BATCH

pytestmark = pytest.mark.timeout(60)

COMPLETION = {"model": MODEL, "prompt": "hi", "max_tokens": 2}


async def post(
    http: aiohttp.ClientSession, run: Running, body: Any, **kwargs: Any
) -> tuple[int, Any, aiohttp.ClientResponse]:
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    async with http.post(run.gateway.make_url(path), json=body, **kwargs) as resp:
        text = await resp.text()
        data = json.loads(text) if resp.content_type == "application/json" else text
        return resp.status, data, resp


def test_full_queue_answers_429_with_retry_after() -> None:
    worker = FakeWorker("w", max_batch=1)

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        worker.gate.clear()
        first = asyncio.create_task(post(http, run, COMPLETION))  # in flight
        await until(lambda: worker.active == 1)
        second = asyncio.create_task(post(http, run, COMPLETION))  # waits in the queue
        await until(lambda: run.gw.scheduler.depth(INTERACTIVE) == 1)
        status, body, resp = await post(http, run, COMPLETION)
        assert status == 429
        assert resp.headers["Retry-After"] == "1"
        assert body["error"]["type"] == "rate_limit_exceeded"
        assert body["error"]["code"] == "rate_limit_exceeded"
        assert "interactive request queue is full" in body["error"]["message"]
        # The batch class has its own queue.
        status, body, _ = await post(http, run, COMPLETION | {"request_class": "batch"})
        assert status == 429 and "batch request queue" in body["error"]["message"]
        worker.gate.set()
        assert [(await t)[0] for t in (first, second)] == [200, 200]

    run_with([worker], test, backend_slack=0, interactive_queue=1, batch_queue=0)


def test_openai_client_sees_rate_limit_error() -> None:
    worker = FakeWorker("w", max_batch=1)

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        worker.gate.clear()
        first = asyncio.create_task(post(http, run, COMPLETION))
        await until(lambda: worker.active == 1)
        client = openai.AsyncOpenAI(base_url=run.base_url, api_key="x", max_retries=0)
        with pytest.raises(openai.RateLimitError) as exc:
            await client.completions.create(model=MODEL, prompt="x")
        assert exc.value.response.headers["retry-after"] == "1"
        worker.gate.set()
        assert (await first)[0] == 200
        await client.close()

    run_with([worker], test, backend_slack=0, interactive_queue=0)


def test_interactive_is_dispatched_before_batch() -> None:
    worker = FakeWorker("w", max_batch=1)

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        worker.gate.clear()
        tasks = [asyncio.create_task(post(http, run, COMPLETION | {"prompt": "first"}))]
        await until(lambda: worker.active == 1)
        for i in range(2):
            body = COMPLETION | {"prompt": f"batch{i}"}
            tasks.append(
                asyncio.create_task(post(http, run, body, headers={"X-Request-Class": "batch"}))
            )
        await until(lambda: run.gw.scheduler.depth(BATCH) == 2)
        tasks.append(asyncio.create_task(post(http, run, COMPLETION | {"prompt": "urgent"})))
        await until(lambda: run.gw.scheduler.depth(INTERACTIVE) == 1)
        load = await (await http.get(run.gateway.make_url("/v1/load"))).json()
        assert load["classes"]["batch"]["queued"] == 2
        assert load["classes"]["interactive"]["in_flight"] == 1
        worker.gate.set()
        assert [(await t)[0] for t in tasks] == [200] * 4
        order = [r.prompt for r in worker.received]
        assert order == ["first", "urgent", "batch0", "batch1"]
        assert [r.request_class.value for r in worker.received] == [
            "interactive", "interactive", "batch", "batch"
        ]  # fmt: skip

    run_with([worker], test, backend_slack=0)


def test_least_loaded_backend_is_chosen() -> None:
    busy = FakeWorker("busy", max_batch=4, running_reported=3)
    idle = FakeWorker("idle", max_batch=4)

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        idle.gate.clear()
        busy.gate.clear()
        # idle (0/4) takes requests until its occupancy reaches busy's reported 3/4;
        # on a tie the one with fewer of our requests in flight wins.
        tasks = [asyncio.create_task(post(http, run, COMPLETION)) for _ in range(5)]
        await until(lambda: len(idle.received) + len(busy.received) == 5)
        assert (len(idle.received), len(busy.received)) == (3, 2)
        idle.gate.set()
        busy.gate.set()
        await asyncio.gather(*tasks)

    run_with([busy, idle], test)


@pytest.mark.parametrize("mode", ["drop", "429", "503", "500", "error_chunk"])
@pytest.mark.parametrize("stream", [False, True])
def test_failure_before_first_token_is_retried_elsewhere(mode: str, stream: bool) -> None:
    bad = FakeWorker("a", mode=mode, die_after=0)
    good = FakeWorker("b", running_reported=1)  # "a" looks less loaded: tried first

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        status, body, _ = await post(http, run, COMPLETION | {"stream": stream})
        assert status == 200
        text = (
            "".join(e["choices"][0]["text"] for e in sse_events(body) if isinstance(e, dict))
            if stream
            else body["choices"][0]["text"]
        )
        assert text == "b0 b1 "
        assert len(bad.received) == 1 and len(good.received) == 1
        assert good.received[0].request_id == bad.received[0].request_id + "-1"

    run_with([bad, good], test)


def test_non_streaming_failure_mid_generation_is_resumed() -> None:
    bad = FakeWorker("a", mode="die_after", die_after=1)
    good = FakeWorker("b", running_reported=1)

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        status, body, _ = await post(http, run, COMPLETION)
        assert status == 200 and body["choices"][0]["text"] == "a0 b1 "
        assert body["usage"]["completion_tokens"] == 2

    run_with([bad, good], test)


def test_stream_broken_past_the_migration_bound_ends_with_error_and_gateway_serves() -> None:
    bad = FakeWorker("a", mode="die_after", die_after=2, fail_times=1)
    other = FakeWorker("b", running_reported=1)

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        client = openai.AsyncOpenAI(base_url=run.base_url, api_key="x", max_retries=0)
        stream = await client.completions.create(
            model=MODEL, prompt="hi", max_tokens=5, stream=True
        )
        seen = []
        with pytest.raises(openai.APIError) as exc:
            async for chunk in stream:
                seen.append(chunk.choices[0].text)
        assert seen == ["a0 ", "a1 "]
        assert "failed after part of the response was streamed" in exc.value.message
        assert exc.value.code == "upstream_failed"
        # Raw SSE: the error event, then [DONE].
        status, body, _ = await post(http, run, COMPLETION | {"stream": True, "max_tokens": 3})
        assert status == 200 and sse_events(body)[-1] == "[DONE]"
        out = await client.completions.create(model=MODEL, prompt="again", max_tokens=2)
        assert out.choices[0].text in ("a0 a1 ", "b0 b1 ")
        await client.close()

    run_with([bad, other], test, max_migrations=0)  # a broken stream is not resumed


def test_all_attempts_failing_is_502() -> None:
    worker = FakeWorker("a", mode="503")

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        status, body, _ = await post(http, run, COMPLETION)
        assert status == 502
        assert body["error"]["code"] == "upstream_failed"
        assert "after 2 attempt(s)" in body["error"]["message"]
        assert "a says 503" in body["error"]["message"]
        assert len(worker.received) == 2

    run_with([worker], test, max_attempts=2)


def test_deadline_bounds_a_hung_backend_and_an_empty_pool() -> None:
    worker = FakeWorker("w")

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        worker.gate.clear()  # generation never starts
        loop = asyncio.get_running_loop()
        start = loop.time()
        status, body, _ = await post(http, run, COMPLETION)
        assert status == 504 and body["error"]["code"] == "timeout"
        status, body, _ = await post(http, run, COMPLETION | {"stream": True})
        assert status == 504
        assert loop.time() - start < 3
        await until(lambda: len(worker.cancelled) == 2)  # the worker saw both go away

        worker.ready = False
        await until(lambda: not run.gw.serving())
        status, body, resp = await post(http, run, COMPLETION)
        assert status == 503 and body["error"]["code"] == "no_backend"
        assert "no ready instance" in body["error"]["message"]
        assert resp.headers["Retry-After"] == "1"

    run_with([worker], test, request_timeout=0.5)


def test_client_disconnect_cancels_the_backend_request() -> None:
    worker = FakeWorker("w", chunk_delay=0.05)

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        body = COMPLETION | {"stream": True, "max_tokens": 200}
        async with http.post(run.gateway.make_url("/v1/completions"), json=body) as resp:
            await resp.content.readline()
        await until(lambda: worker.cancelled != [])
        assert run.gw.scheduler.in_flight(INTERACTIVE) == 0
        assert run.gw.pool.states()[0].in_flight == 0

    run_with([worker], test)


def test_drain_refuses_new_requests_and_finishes_accepted_ones() -> None:
    worker = FakeWorker("w")

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        assert (await http.get(run.gateway.make_url("/readyz"))).status == 200
        worker.gate.clear()
        accepted = asyncio.create_task(post(http, run, COMPLETION))
        await until(lambda: worker.active == 1)
        run.gw.health.draining = True  # what serve() does on SIGTERM
        assert (await http.get(run.gateway.make_url("/readyz"))).status == 503
        status, body, _ = await post(http, run, COMPLETION)
        assert status == 503 and body["error"]["code"] == "draining"
        worker.gate.set()
        status, body, _ = await accepted
        assert status == 200 and body["choices"][0]["text"] == "w0 w1 "

    run_with([worker], test)


def test_readiness_does_not_follow_backends() -> None:
    """The gateway holds requests while no backend is ready, so it stays in its Service."""
    worker = FakeWorker("w", ready=False)

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        assert (await http.get(run.gateway.make_url("/readyz"))).status == 200
        worker.ready = True
        await run.wait_ready(1)
        assert (await http.get(run.gateway.make_url("/readyz"))).status == 200
        worker.draining = True
        await until(lambda: not run.gw.serving())
        assert (await http.get(run.gateway.make_url("/readyz"))).status == 200
        run.gw.health.draining = True  # only its own drain takes it out
        assert (await http.get(run.gateway.make_url("/readyz"))).status == 503

    run_with([worker], test)


def test_disconnect_is_noticed_without_handler_cancellation() -> None:
    """Under serve() (production), aiohttp does not cancel handlers: the watcher does."""
    worker = FakeWorker("w")

    async def go() -> None:
        async with running([worker]):
            app = build_app(gateway_config(backends=(worker.url,)))
            stop = asyncio.Event()
            started: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            server = asyncio.create_task(
                serve(app, "127.0.0.1", 0, drain_seconds=0, stop=stop, started=started)
            )
            port = await started
            worker.gate.clear()
            async with aiohttp.ClientSession() as http:
                url = f"http://127.0.0.1:{port}/v1/completions"
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await http.post(url, json=COMPLETION)
            await until(lambda: worker.cancelled != [], timeout=5)
            stop.set()
            await server

    asyncio.run(go())


def test_backend_sockets_notice_a_vanished_peer() -> None:
    """Keep-alive probes and a user timeout bound a silent backend (upstream.py)."""
    info = (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", 0))
    with upstream.connect_socket(info) as sock:
        tcp = socket.IPPROTO_TCP
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(tcp, socket.TCP_KEEPIDLE) == upstream.DEAD_PEER_IDLE_S
        assert sock.getsockopt(tcp, socket.TCP_KEEPCNT) == upstream.DEAD_PEER_PROBES
        assert sock.getsockopt(tcp, socket.TCP_USER_TIMEOUT) == upstream.DEAD_PEER_S * 1000
    assert upstream.DEAD_PEER_S < 15  # well under the request deadline and SSE keep-alives
