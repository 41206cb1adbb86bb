"""Dispatch one accepted request: queue, pick a backend, stream, retry what is safe.

The rule that keeps accepted requests from being dropped silently: a backend failure
(:class:`cascade_gateway.upstream.Failed`) is retried on another backend, up to
``max_attempts`` in all, as long as the client has seen nothing of the failed attempt.

- Streaming: the first chunk handed to the caller commits the request to its backend
  (the caller starts the SSE response then); a later failure raises ``StreamBroken``
  and the caller ends the stream with an error event.
- Non-streaming (``buffered``): an attempt's chunks are held until its final chunk, so
  any failure, even mid-generation, is retried; only the last failure surfaces (502).

A worker's 4xx (``upstream.Rejected``) is never retried: it propagates to the handler,
which passes it through. The caller bounds the whole thing with its deadline, and
closing this generator early (client gone) closes the backend stream, which aborts the
request on the worker.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

from cascade_gateway import errors, upstream
from cascade_gateway.api_request import Job
from cascade_gateway.demand import Ticket, prompt_tokens
from cascade_gateway.runtime import Gateway
from cascade_protocol.generate import GenerateChunk, GenerateRequest

log = logging.getLogger(__name__)


class StreamBroken(Exception):
    """The backend failed after chunks reached the client."""


@dataclass
class Progress:
    """What happened to one request so far, for deadlines and latency metrics."""

    arrived: float
    dispatched: bool = False
    first_token_at: float | None = None
    last_token_at: float | None = None


def attempt_request(job: Job, attempt: int) -> GenerateRequest:
    """A fresh request id per attempt, so a retry never collides with a dying original."""
    if attempt == 0:
        return job.request
    return job.request.model_copy(update={"request_id": f"{job.request.request_id}-{attempt}"})


async def run(
    gw: Gateway, job: Job, progress: Progress, *, buffered: bool
) -> AsyncGenerator[GenerateChunk, None]:
    cls = job.request_class
    tried: list[str] = []
    detail = "no attempt made"
    attempts = gw.config.max_attempts
    ticket = Ticket(
        arrived=progress.arrived,
        deadline=progress.arrived + gw.config.ttft_slo_s(cls),
        prompt_tokens=prompt_tokens(job.request),
        max_tokens=job.request.params.max_tokens,
    )
    for attempt in range(attempts):
        url = await gw.scheduler.acquire(cls, frozenset(tried), retry=attempt > 0, ticket=ticket)
        if not progress.dispatched:
            now = gw.pool.clock()
            gw.metrics.observe_wait(cls, now, now - progress.arrived)
            progress.dispatched = True
        tried.append(url)
        held: list[GenerateChunk] = []
        committed = False
        try:
            stream = upstream.generate(gw.http(), url, attempt_request(job, attempt))
            async with aclosing(stream) as chunks:
                async for chunk in chunks:
                    _observe(gw, job, progress, chunk)
                    if buffered:
                        held.append(chunk)
                    else:
                        committed = True
                        yield chunk
        except upstream.Failed as exc:
            gw.pool.avoid(url, exc.cool_down, exc.detail)
            retried = not committed and attempt + 1 < attempts
            gw.metrics.backend_failures.labels("yes" if retried else "no").inc()
            log.warning(
                "request %s: backend %s failed (attempt %d/%d, %s): %s",
                job.request.request_id, url, attempt + 1, attempts,
                "retrying" if retried else "giving up", exc.detail,
            )  # fmt: skip
            if committed:
                raise StreamBroken(exc.detail) from exc
            detail = exc.detail
            continue
        finally:
            gw.scheduler.release(url, cls)
        for chunk in held:
            yield chunk
        return
    raise errors.upstream_failed(detail, attempts)


def _observe(gw: Gateway, job: Job, progress: Progress, chunk: GenerateChunk) -> None:
    """TTFT, inter-token latency and token counters, as chunks arrive at the gateway."""
    cls = job.request_class
    new_tokens = len(chunk.token_ids)
    if chunk.finish_reason is not None:
        gw.demand.finished(chunk.completion_tokens)
        if chunk.prompt_tokens:
            gw.metrics.prompt_tokens.labels(cls.value).inc(chunk.prompt_tokens)
    if not new_tokens:
        return
    now = gw.pool.clock()
    gw.metrics.generated_tokens.labels(cls.value).inc(new_tokens)
    if progress.first_token_at is None:
        progress.first_token_at = now
        gw.metrics.observe_ttft(cls, now, now - progress.arrived)
    elif progress.last_token_at is not None:
        gw.metrics.itl.labels(cls.value).observe((now - progress.last_token_at) / new_tokens)
    progress.last_token_at = now
