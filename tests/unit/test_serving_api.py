"""/v1/generate and /v1/load over real loopback HTTP, with a fake engine behind them."""

from __future__ import annotations

import asyncio
import json

import pytest
from serving_harness import Factory, request, run, worker
from waiting import until

from cascade_worker.serving import api


def test_generate_streams_ndjson_chunks() -> None:
    async def go() -> None:
        async with worker() as w:
            await w.serve()
            status, lines = await w.generate(request("r1", max_tokens=3))
            assert status == 200
            assert [line["token_ids"] for line in lines] == [[100], [101], [102]]
            assert "".join(line["text"] for line in lines) == " t0 t1 t2"
            assert [line["finish_reason"] for line in lines] == [None, None, "length"]
            assert lines[-1]["completion_tokens"] == 3 and lines[-1]["prompt_tokens"] == 2
            assert all(line["request_id"] == "r1" for line in lines)

    run(go)


def test_concurrent_requests_are_batched() -> None:
    async def go() -> None:
        async with worker(Factory(step_s=0.01)) as w:
            await w.serve({"maxBatch": 4})
            results = await asyncio.gather(
                *(w.generate(request(f"r{i}", max_tokens=6)) for i in range(6))
            )
            assert all(s == 200 and lines[-1]["finish_reason"] == "length" for s, lines in results)
            assert w.factory.core.peak_running == 4

    run(go)


def test_client_disconnect_aborts_the_request() -> None:
    async def go() -> None:
        async with worker(Factory(step_s=0.01)) as w:
            await w.serve()
            resp = await w.http.post(w.base + "/v1/generate", json=request("gone", 4000))
            assert json.loads(await resp.content.readline())["token_ids"] == [100]
            resp.close()  # drop the connection mid-stream
            await until(lambda: "gone" in w.factory.core.aborted)
            await until(lambda: w.serving.engine is not None and w.serving.engine.in_flight == 0)

    run(go)


def test_client_that_leaves_while_queued_is_noticed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "DISCONNECT_CHECK_S", 0.05)

    async def go() -> None:
        async with worker(Factory(step_s=0.01, max_batch=1)) as w:
            await w.serve()
            first = await w.http.post(w.base + "/v1/generate", json=request("a", 4000))
            await first.content.readline()
            queued = await w.http.post(w.base + "/v1/generate", json=request("b", 4000))
            assert "b" in w.factory.core.added and "b" not in w.factory.core.running
            queued.close()  # the client gives up before its first token
            await until(lambda: "b" in w.factory.core.aborted)
            first.close()

    run(go)


def test_engine_failure_gives_an_error_chunk_not_a_hang() -> None:
    async def go() -> None:
        async with worker(Factory(step_s=0.01)) as w:
            await w.serve()
            task = asyncio.ensure_future(w.generate(request("r1", 4000)))
            await until(lambda: "r1" in w.factory.core.running)
            w.factory.core.fail_next_step = True
            status, lines = await task
            assert status == 200
            assert lines[-1]["finish_reason"] == "error" and "boom" in lines[-1]["error"]

    run(go)


@pytest.mark.parametrize(
    ("body", "param", "code", "words"),
    [
        (b"{not json", None, "invalid_json", "not valid JSON"),
        (b"[1, 2]", None, None, "JSON object"),
        (json.dumps({"prompt": "hi"}).encode(), "request_id", None, "request_id"),
        (
            json.dumps({"request_id": "x", "prompt": "hi", "params": {"max_tokens": 0}}).encode(),
            "params.max_tokens",
            None,
            "greater than or equal to 1",
        ),
        (json.dumps({"request_id": "x"}).encode(), None, None, "exactly one of"),
        (
            json.dumps({"request_id": "x", "prompt": "hi", "temperature": 1}).encode(),
            "temperature",
            None,
            "Extra inputs",
        ),
        (
            json.dumps(request("x", max_tokens=4095)).encode(),
            "params.max_tokens",
            "context_length_exceeded",
            "maximum context length",
        ),
        (
            json.dumps({"request_id": "x", "prompt_token_ids": [5, 99999]}).encode(),
            "prompt_token_ids",
            None,
            "out of range",
        ),
    ],
)
def test_bad_requests_get_openai_style_400(
    body: bytes, param: str | None, code: str | None, words: str
) -> None:
    async def go() -> None:
        async with worker() as w:
            await w.serve()
            status, doc = await w.call("POST", "/v1/generate", body)
            assert status == 400, doc
            error = doc["error"]
            assert set(error) == {"message", "type", "param", "code"}
            assert error["type"] == "invalid_request_error"
            assert (error["param"], error["code"]) == (param, code)
            assert words in error["message"]

    run(go)


def test_full_queue_answers_429_with_retry_after() -> None:
    async def go() -> None:
        async with worker(Factory(step_s=0.01, max_batch=1), queue_limit=1) as w:
            await w.serve()
            running = await w.http.post(w.base + "/v1/generate", json=request("a", 4000))
            waiting = await w.http.post(w.base + "/v1/generate", json=request("b", 4000))
            async with w.http.post(w.base + "/v1/generate", json=request("c")) as resp:
                assert resp.status == 429
                assert resp.headers["Retry-After"] == "1"
                assert (await resp.json())["error"]["code"] == "queue_full"
            running.close()
            waiting.close()

    run(go)


def test_503_when_not_serving_and_while_draining() -> None:
    async def go() -> None:
        async with worker(Factory(step_s=0.01)) as w:
            status, doc = await w.call("POST", "/v1/generate", request("r0"))
            assert status == 503 and doc["error"]["code"] == "not_serving"
            await w.serve()
            task = asyncio.ensure_future(w.generate(request("r1", max_tokens=30)))
            await until(lambda: "r1" in w.factory.core.running)
            status, _ = await w.call("POST", "/v1/control/drain", {})
            assert status == 202
            status, doc = await w.call("POST", "/v1/generate", request("r2"))
            assert status == 503 and "draining" in doc["error"]["message"]
            _, lines = await task  # the in-flight request still finishes
            assert lines[-1]["finish_reason"] == "length"

    run(go)


def test_load_report() -> None:
    async def go() -> None:
        async with worker(Factory(max_batch=3, max_model_len=512)) as w:
            status, doc = await w.call("GET", "/v1/load")
            assert status == 200
            assert doc["ready"] is False and doc["instance"] == "fake-w-0"
            await w.serve()
            await w.generate(request("r1", max_tokens=5))
            status, doc = await w.call("GET", "/v1/load")
            assert doc["ready"] is True and doc["model"] == "fake-model"
            assert (doc["max_batch"], doc["max_model_len"]) == (3, 512)
            assert doc["layers"] == [0, 4]
            assert doc["tokens_per_s"] > 0 and doc["waiting"] == doc["running"] == 0

    run(go)
