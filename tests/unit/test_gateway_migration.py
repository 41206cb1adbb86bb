"""The gateway moves a stream whose worker hands it back (MIGRATE) or breaks mid-stream.

Fake workers continue a resumed request where its `resume` says (token i is 100 + i,
text "<name><i> "), so a seamless move shows as one stream whose pieces come from
several workers in order: "a0 a1 b2 b3 b4" -- same id, nothing repeated or missing,
usage counting every token once. Resume requests themselves are built by a pure
function, tested first.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai
import pytest
from gateway_fakes import MODEL, FakeWorker, Running, run_with, sse_events

from cascade_gateway.resume import Delivered, attempt_request
from cascade_protocol.generate import GenerateChunk, GenerateRequest, Resume

pytestmark = pytest.mark.timeout(60)


def migrations(run: Running, reason: str) -> float:
    return run.gw.metrics.migrations.labels(reason)._value.get()


async def stream_text(run: Running, body: dict[str, Any]) -> tuple[str, list[Any]]:
    client = openai.AsyncOpenAI(base_url=run.base_url, api_key="x", max_retries=0)
    stream = await client.completions.create(model=MODEL, stream=True, **body)
    chunks = [chunk async for chunk in stream]
    await client.close()
    return "".join(c.choices[0].text for c in chunks if c.choices), chunks


def test_attempt_requests_resume_from_what_was_delivered() -> None:
    base = GenerateRequest(request_id="r", prompt="hi")
    sent = Delivered()
    assert attempt_request(base, 0, sent) is base
    retry = attempt_request(base, 1, sent)  # nothing delivered: start over
    assert retry.request_id == "r-1" and retry.resume is None
    sent.add(GenerateChunk(request_id="r", text="ab", token_ids=[5, 6]))
    sent.add(GenerateChunk(request_id="r", text="", token_ids=[7]))  # text held back
    sent.add(GenerateChunk(request_id="r", text="ü", token_ids=[8]))
    moved = attempt_request(base, 2, sent)
    assert moved.request_id == "r-2"
    assert moved.resume == Resume(token_ids=[5, 6, 7, 8], text_chars=3)
    assert base.resume is None and moved.prompt == "hi"


def test_a_handed_back_stream_continues_on_another_worker_with_no_seam() -> None:
    leaving = FakeWorker("a", mode="migrate_after", die_after=2, fail_times=1)
    staying = FakeWorker("b", running_reported=1)  # "a" looks less loaded: chosen first

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        body = {"prompt": "hi", "max_tokens": 5, "stream_options": {"include_usage": True}}
        text, chunks = await stream_text(run, body)
        assert text == "a0 a1 b2 b3 b4 "
        assert len({c.id for c in chunks}) == 1
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
        (resumed,) = staying.received
        assert resumed.resume == Resume(token_ids=[100, 101], text_chars=len("a0 a1 "))
        assert resumed.request_id == leaving.received[0].request_id + "-1"
        assert migrations(run, "drain") == 1 and migrations(run, "failure") == 0

    run_with([leaving, staying], test)


@pytest.mark.parametrize("stream", [True, False])
def test_chat_streams_and_buffered_responses_move_too(stream: bool) -> None:
    leaving = FakeWorker("a", mode="migrate_after", die_after=1, fail_times=1)
    staying = FakeWorker("b", running_reported=1)

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 3, "stream": stream}  # fmt: skip
        async with http.post(run.gateway.make_url("/v1/chat/completions"), json=body) as resp:
            raw = await resp.text()
        if stream:
            events = [e for e in sse_events(raw) if isinstance(e, dict)]
            deltas = [e["choices"][0]["delta"] for e in events]
            assert sum("role" in d for d in deltas) == 1  # one stream: the role comes once
            assert "".join(d.get("content", "") for d in deltas) == "a0 b1 b2 "
        else:
            doc = json.loads(raw)
            assert doc["choices"][0]["message"]["content"] == "a0 b1 b2 "
            assert doc["usage"]["completion_tokens"] == 3
        assert migrations(run, "drain") == 1

    run_with([leaving, staying], test)


def test_a_stream_moves_again_and_again_up_to_the_bound() -> None:
    workers = [
        FakeWorker(name, mode="migrate_after", die_after=1, running_reported=load)
        for load, name in enumerate("abc")
    ]

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        workers[2].mode = "ok"
        text, _ = await stream_text(run, {"prompt": "hi", "max_tokens": 4})
        assert text == "a0 b1 c2 c3 "
        assert migrations(run, "drain") == 2
        # Past the bound the client gets what was streamed, then an error event.
        workers[2].mode = "migrate_after"
        with pytest.raises(openai.APIError) as exc:
            await stream_text(run, {"prompt": "hi", "max_tokens": 5})
        assert exc.value.code == "upstream_failed"
        assert "moved 2 time(s)" in exc.value.message

    run_with(workers, test, max_migrations=2)


def test_a_broken_stream_after_tokens_is_resumed_as_a_failure() -> None:
    bad = FakeWorker("a", mode="die_after", die_after=2, fail_times=1)
    good = FakeWorker("b", running_reported=1)

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        text, _ = await stream_text(run, {"prompt": "hi", "max_tokens": 4})
        assert text == "a0 a1 b2 b3 "
        assert migrations(run, "failure") == 1 and migrations(run, "drain") == 0
        failures = run.gw.metrics.backend_failures.labels("yes")._value.get()
        assert failures == 1

    run_with([bad, good], test)


def test_a_hand_back_before_any_token_is_a_plain_retry_not_a_failed_attempt() -> None:
    leaving = FakeWorker("a", mode="migrate_after", die_after=0)
    staying = FakeWorker("b", running_reported=1)

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        text, _ = await stream_text(run, {"prompt": "hi", "max_tokens": 2})
        assert text == "b0 b1 "
        assert staying.received[0].resume is None
        assert run.gw.metrics.backend_failures.labels("yes")._value.get() == 0

    run_with([leaving, staying], test, max_attempts=1)


def test_a_resume_refused_by_a_backend_is_a_failed_attempt_not_another_move() -> None:
    leaving = FakeWorker("a", mode="migrate_after", die_after=1, fail_times=1)
    refusing = FakeWorker("b", mode="503", fail_times=1, running_reported=1)
    staying = FakeWorker("c", running_reported=2)

    async def test(run: Running, http: aiohttp.ClientSession) -> None:
        text, _ = await stream_text(run, {"prompt": "hi", "max_tokens": 3})
        assert text == "a0 c1 c2 "
        assert (
            refusing.received[0].resume
            == staying.received[0].resume
            == Resume(token_ids=[100], text_chars=3)
        )
        assert staying.received[0].request_id.endswith("-2")
        assert migrations(run, "drain") == 1
        assert run.gw.metrics.backend_failures.labels("yes")._value.get() == 1

    run_with([leaving, refusing, staying], test, max_migrations=1)
