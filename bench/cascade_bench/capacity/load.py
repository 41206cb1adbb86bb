"""Closed-loop load: exactly n requests in flight per worker, for a fixed time.

Each slot sends one `/v1/generate` request (fixed prompt ids, greedy, `ignore_eos`, so
every request decodes exactly `max_tokens`), records each NDJSON chunk's arrival time
and token count, and sends the next as soon as one finishes. At the window's end every
open stream is cut (the worker aborts it when the client goes) and the driver waits a
moment so the next phase starts on an idle engine. One asyncio loop in one process: the
load generator stays light next to the quota'd workers it measures.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp

from cascade_bench.capacity.stats import Chunk, CurvePoint, Window, curve_point
from cascade_bench.worker_auth import headers_for


@dataclass(frozen=True)
class Load:
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    warmup_s: float
    duration_s: float
    settle_s: float = 1.5  # idle time after cutting streams, before the next phase


@dataclass
class _Record:
    streams: list[list[Chunk]] = field(default_factory=list)
    finished: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _body(load: Load) -> dict[str, object]:
    return {
        "request_id": f"capacity-{uuid.uuid4().hex[:12]}",
        "prompt_token_ids": list(load.prompt_token_ids),
        "params": {"max_tokens": load.max_tokens, "temperature": 0.0, "ignore_eos": True},
        "request_class": "batch",
    }


async def _one(session: aiohttp.ClientSession, url: str, load: Load, rec: _Record) -> None:
    stream: list[Chunk] = []
    rec.streams.append(stream)
    async with session.post(url, json=_body(load), headers=headers_for(url)) as resp:
        if resp.status != 200:
            rec.errors.append(f"{url}: HTTP {resp.status} {(await resp.text())[:200]}")
            await asyncio.sleep(0.5)
            return
        async for line in resp.content:
            if not line.strip():
                continue
            chunk = json.loads(line)
            now = time.monotonic()
            stream.append((now, len(chunk.get("token_ids") or [])))
            if chunk.get("error"):
                rec.errors.append(f"{url}: {chunk['error']}")
            if chunk.get("finish_reason"):
                rec.finished.append(now)
                return


async def _slot(session: aiohttp.ClientSession, url: str, load: Load, rec: _Record) -> None:
    while True:
        try:
            await _one(session, url, load, rec)
        except (aiohttp.ClientError, json.JSONDecodeError) as exc:
            rec.errors.append(f"{url}: {type(exc).__name__}: {exc}")
            await asyncio.sleep(0.5)


async def measure(label_batch: int, targets: Sequence[tuple[str, int]], load: Load) -> CurvePoint:
    """Keep `n` requests in flight at each `(generate_url, n)` for warm-up + window."""
    rec = _Record()
    timeout = aiohttp.ClientTimeout(total=None, sock_read=120)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        start = time.monotonic()
        tasks = [
            asyncio.create_task(_slot(session, url, load, rec))
            for url, n in targets
            for _ in range(n)
        ]
        window = Window(start + load.warmup_s, start + load.warmup_s + load.duration_s)
        await asyncio.sleep(window.end - time.monotonic())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(load.settle_s)
    if rec.errors:
        raise RuntimeError(f"{len(rec.errors)} request error(s), first: {rec.errors[0]}")
    return curve_point(label_batch, rec.streams, rec.finished, window)


async def prefill_ttfts(url: str, prompt_token_ids: Sequence[int], samples: int) -> list[float]:
    """Time to the first token of `samples` one-token requests sent one after another to
    an idle worker: each is one prompt's prefill (plus a local HTTP round trip)."""
    load = Load(tuple(prompt_token_ids), 1, 0.0, 0.0)
    out: list[float] = []
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for _ in range(samples + 1):  # the first warms the engine's kernels: dropped
            rec = _Record()
            began = time.monotonic()
            await _one(session, url, load, rec)
            if rec.errors:
                raise RuntimeError(f"prefill probe: {rec.errors[0]}")
            stream = rec.streams[0]
            if not stream:
                raise RuntimeError("prefill probe: the stream ended without a chunk")
            out.append(stream[0][0] - began)
    return out[1:]
