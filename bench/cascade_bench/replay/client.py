"""The open-loop load generator: each request leaves at its scheduled time.

Open loop means arrivals do not wait for completions: a slow server faces the trace's
load, as it would in production, instead of a client that politely backs off (closed loop
hides overload, the coordinated-omission trap). So the connection pool is unbounded and
every request is its own task. The generator's own lateness is recorded per request
(`sent_s - scheduled_s`) and reported, so a run where the client fell behind is visible.

A 429 is recorded as a rejection, not retried, unless `retry_429` asks for retries (then
waiting Retry-After, or `retry_wait_s`); TTFT and E2E still count from the first send.
`timeout_s` bounds a request from first send to its end, retries included.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from cascade_bench.replay.prompts import TokenRange, request_body, request_headers
from cascade_bench.replay.record import RequestRecord
from cascade_bench.replay.scale import Planned
from cascade_bench.replay.sse import parse_line

MAX_RETRY_WAIT_S = 60.0


@dataclass(frozen=True)
class ClientOptions:
    url: str  # gateway base URL, e.g. http://127.0.0.1:8000
    model: str
    token_range: TokenRange = field(default_factory=TokenRange)
    seed: int = 0
    class_via: str = "body"  # body, header or both
    timeout_s: float = 600.0
    retry_429: int = 0  # extra attempts after a 429
    retry_wait_s: float = 1.0  # wait before a retry when the 429 has no Retry-After


@dataclass
class ReplayResult:
    records: list[RequestRecord]
    wall_s: float  # replay start to the last request's end
    interrupted: bool  # stopped early (Ctrl-C): unsent requests are absent, in-flight failed


def completions_url(base: str) -> str:
    return base.rstrip("/") + "/v1/completions"


def _retry_after(headers: Any, default: float) -> float:
    try:
        return min(MAX_RETRY_WAIT_S, max(0.0, float(headers.get("Retry-After", default))))
    except (TypeError, ValueError):
        return default


async def _attempt(
    session: aiohttp.ClientSession,
    rec: RequestRecord,
    body: dict[str, Any],
    headers: dict[str, str],
    opts: ClientOptions,
    now: Callable[[], float],
) -> float | None:
    """One POST; folds what arrives into `rec`. Returns a retry wait after a 429, else None."""
    rec.attempts += 1
    rec.error, rec.rejected = None, False
    async with session.post(completions_url(opts.url), json=body, headers=headers) as resp:
        rec.status = resp.status
        if resp.status != 200:
            text = (await resp.text(errors="replace"))[:200]
            if resp.status == 429:
                rec.rejected, rec.error = True, f"http 429: {text}"
                return _retry_after(resp.headers, opts.retry_wait_s)
            rec.error = f"http {resp.status}: {text}"
            return None
        async for line in resp.content:
            event = parse_line(line)
            if event is None:
                continue
            rec.add(event, now())
            if event.error is not None or event.done:
                break
    if rec.rejected:
        return opts.retry_wait_s
    if rec.error is None and not rec.done:
        rec.error = "incomplete: stream ended before [DONE]"
    return None


async def send_one(
    session: aiohttp.ClientSession, p: Planned, opts: ClientOptions, now: Callable[[], float]
) -> RequestRecord:
    """Send one planned request (with any 429 retries) and record it. Never raises: a
    failure is in the record, and so is cancellation (the replay was stopped), keeping the
    tokens that had arrived."""
    rec = RequestRecord(p.index, p.request_class, p.at_s, p.prompt_tokens, p.output_tokens)
    body = request_body(p, opts.model, opts.token_range, opts.seed, opts.class_via)
    headers = request_headers(p, opts.class_via)
    rec.sent_s = now()
    try:
        async with asyncio.timeout(opts.timeout_s):
            for attempt in range(opts.retry_429 + 1):
                wait = await _attempt(session, rec, body, headers, opts, now)
                if wait is None or attempt == opts.retry_429:
                    break
                await asyncio.sleep(wait)
    except TimeoutError:
        rec.rejected, rec.error = False, f"timeout: no end after {opts.timeout_s:g} s"
    except aiohttp.ClientError as exc:
        rec.rejected, rec.error = False, f"connection: {type(exc).__name__}: {exc}"[:300]
    except ValueError as exc:  # e.g. an SSE line over aiohttp's buffer limit
        rec.rejected, rec.error = False, f"stream: {exc}"[:300]
    except asyncio.CancelledError:
        rec.rejected, rec.error = False, "interrupted: replay stopped"
    rec.end_s = now()
    return rec


async def replay(
    plan: Sequence[Planned],
    opts: ClientOptions,
    on_done: Callable[[RequestRecord], None] | None = None,
) -> ReplayResult:
    """Send `plan` open-loop; returns every sent request's record. Cancelling it (Ctrl-C)
    stops sending, cancels what is in flight and still returns what was recorded."""
    t0 = time.perf_counter()

    def now() -> float:
        return time.perf_counter() - t0

    records: list[RequestRecord] = []
    tasks: list[asyncio.Task[RequestRecord]] = []

    def finished(task: asyncio.Task[RequestRecord]) -> None:
        if not task.cancelled() and on_done is not None:
            on_done(task.result())

    interrupted = False
    connector = aiohttp.TCPConnector(limit=0)  # open loop: no client-side queue
    async with aiohttp.ClientSession(connector=connector) as session:
        try:
            for p in plan:
                delay = p.at_s - now()
                if delay > 0:
                    await asyncio.sleep(delay)
                task = asyncio.create_task(send_one(session, p, opts, now))
                task.add_done_callback(finished)
                tasks.append(task)
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            interrupted = True
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    for task, p in zip(tasks, plan, strict=False):
        if not task.cancelled():
            records.append(task.result())
        else:  # cancelled before it started: nothing was sent
            rec = RequestRecord(p.index, p.request_class, p.at_s, p.prompt_tokens, p.output_tokens)
            rec.error = "interrupted: replay stopped"
            records.append(rec)
    ends = [r.end_s for r in records if r.end_s is not None]
    return ReplayResult(records, max(ends, default=now()), interrupted)


async def first_model(url: str, timeout_s: float = 10.0) -> str:
    """The first model the gateway lists at /v1/models (used when --model is not given)."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url.rstrip("/") + "/v1/models") as resp,
    ):
        if resp.status != 200:
            raise RuntimeError(f"{url}/v1/models answered {resp.status}; pass --model")
        data = await resp.json()
    models = [m.get("id") for m in data.get("data", []) if isinstance(m, dict)]
    if not models or not isinstance(models[0], str):
        raise RuntimeError(f"{url}/v1/models lists no model; pass --model")
    return models[0]
