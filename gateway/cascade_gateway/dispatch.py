"""Dispatch one accepted request: queue, pick a backend, stream, retry or resume.

The rule that keeps accepted requests from being dropped: a backend that fails a
request (:class:`cascade_gateway.upstream.Failed`) or hands it back
(:class:`~cascade_gateway.upstream.Moved`, a draining worker's MIGRATE) is replaced by
another, and the request continues there from what the caller already has:

- nothing yet: a plain retry, up to ``max_attempts`` failed backends in all (a hand-back
  costs no attempt);
- some tokens: a migration (resume.py): the next backend prefills the prompt plus those
  tokens and streams what follows, so the caller sees one stream with no seam, up to
  ``max_migrations`` times. Past that, a stream ends with ``StreamBroken`` (the caller
  writes an error event) and a buffered request fails 502.

Every new backend comes through the scheduler's retry path: the head of the class
queue, never refused for a full queue, backends already tried skipped while others
exist. Non-streaming requests are ``buffered``: chunks are held and handed over at the
end, so the caller sees one response; streaming chunks go out as they come.

A backend that makes no progress on any of its streams for the stall bound while others
are healthy has them cut (stalls.py): each ends here as ``upstream.Stalled``, a failure
like a broken connection, and resumes elsewhere.

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
from cascade_gateway.resume import Delivered, attempt_request
from cascade_gateway.runtime import Gateway
from cascade_protocol.generate import GenerateChunk

log = logging.getLogger(__name__)


class StreamBroken(Exception):
    """The request cannot go on after chunks reached the client."""


@dataclass
class Progress:
    """What happened to one request so far, for deadlines and latency metrics."""

    arrived: float
    dispatched: bool = False
    first_token_at: float | None = None
    last_token_at: float | None = None


@dataclass
class _Tally:
    """Backends one request went through, and why it left each."""

    tried: list[str]
    failures: int = 0  # failed before any token reached the caller
    migrations: int = 0  # moved (handed back, or broken after tokens)


async def run(
    gw: Gateway, job: Job, progress: Progress, *, buffered: bool
) -> AsyncGenerator[GenerateChunk, None]:
    cls = job.request_class
    tally = _Tally(tried=[])
    sent = Delivered()
    held: list[GenerateChunk] = []
    ticket = Ticket(
        arrived=progress.arrived,
        deadline=progress.arrived + gw.config.ttft_slo_s(cls),
        prompt_tokens=prompt_tokens(job.request),
        max_tokens=job.request.params.max_tokens,
    )
    while True:
        tried = frozenset(tally.tried)
        url = await gw.scheduler.acquire(cls, tried, retry=bool(tried), ticket=ticket)
        if not progress.dispatched:
            now = gw.pool.clock()
            gw.metrics.observe_wait(cls, now, now - progress.arrived)
            progress.dispatched = True
        request = attempt_request(job.request, len(tally.tried), sent)
        tally.tried.append(url)
        before = len(sent.token_ids)
        cut = gw.pool.open_stream(url)
        try:
            async with aclosing(upstream.generate(gw.http(), url, request, cut)) as chunks:
                async for chunk in chunks:
                    gw.pool.progressed(url)
                    _observe(gw, job, progress, chunk)
                    sent.add(chunk)
                    if buffered:
                        held.append(chunk)
                    else:
                        yield chunk
        except upstream.Failed as exc:
            gw.pool.avoid(url, exc.cool_down, exc.detail)
            fresh = len(sent.token_ids) > before  # this backend had streamed tokens
            _after_failure(gw, job, url, exc, tally, sent, fresh=fresh, streamed=not buffered)
            continue
        finally:
            gw.pool.close_stream(url, cut)
            gw.scheduler.release(url, cls)
        for chunk in held:
            yield chunk
        return


def _after_failure(
    gw: Gateway,
    job: Job,
    url: str,
    exc: upstream.Failed,
    tally: _Tally,
    sent: Delivered,
    *,
    fresh: bool,
    streamed: bool,
) -> None:
    """Count what happened; raise when the request may not go on elsewhere.

    A move is a hand-back, or a failure after the backend streamed tokens; a failure
    before that (refused, unreachable) is a failed attempt, also for a resumed request.
    """
    rid = job.request.request_id
    moved = isinstance(exc, upstream.Moved)
    if moved or fresh:
        tally.migrations += 1
        going_on = tally.migrations <= gw.config.max_migrations
        if not moved:
            gw.metrics.backend_failures.labels("yes" if going_on else "no").inc()
        if going_on:
            why = "drain" if moved else "stall" if isinstance(exc, upstream.Stalled) else "failure"
            gw.metrics.migrations.labels(why).inc()
        log.log(
            logging.INFO if moved and going_on else logging.WARNING,
            "request %s: backend %s %s after %d token(s) (migration %d/%d, %s): %s",
            rid, url, "handed it back" if moved else "failed", len(sent.token_ids),
            tally.migrations, gw.config.max_migrations,
            "resuming elsewhere" if going_on else "giving up", exc.detail,
        )  # fmt: skip
        if not going_on:
            _give_up(f"{exc.detail}; moved {tally.migrations - 1} time(s) already",
                     len(tally.tried), sent, streamed)  # fmt: skip
        return
    tally.failures += 1
    attempts = gw.config.max_attempts
    retried = tally.failures < attempts
    gw.metrics.backend_failures.labels("yes" if retried else "no").inc()
    log.warning(
        "request %s: backend %s failed (attempt %d/%d, %s): %s",
        rid, url, tally.failures, attempts, "retrying" if retried else "giving up", exc.detail,
    )  # fmt: skip
    if not retried:
        _give_up(exc.detail, tally.failures, sent, streamed)


def _give_up(detail: str, attempts: int, sent: Delivered, streamed: bool) -> None:
    """A stream that reached the client ends with an error event; anything else is 502."""
    if streamed and sent.token_ids:
        raise StreamBroken(detail)
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
