"""Draining without cutting streams: which requests a leaving instance hands back, when.

A drain (scale-down, a drain order, SIGTERM) closes admission and gives the requests in
flight until a deadline. A request still running there is not cut: it ends with
`FinishReason.MIGRATE` and the gateway resumes it on a surviving instance, which
prefills prompt + tokens so far (see cascade_protocol.generate). A request that cannot
finish before the deadline anyway is better handed back early: it continues elsewhere
after one short pause instead of first crawling on here, and the pod is gone sooner.

`migrate_now` is the rule (pure), applied when the drain starts and again every
`TICK_S` while it lasts, with the time left then:

- a request that has produced no token here (queued, or in its first prefill) loses
  nothing by moving: it goes;
- one whose remaining budget (max_tokens - generated) takes longer than the time left
  at its decode rate goes; max_tokens bounds the length (EOS may come earlier), so
  this may move a few streams that would have made it;
- one whose rate is not known yet (a single token) stays for now.

The rate is the request's own: over its life here at the first look, then over the
drain so far, since what matters is how fast it goes now that the instance is leaving
(its neighbours may be moving away, or, on shared hardware, others may slow it down).
At the deadline whatever is left goes. `drain_requests` runs this on the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from cascade_protocol.generate import FinishReason, GenerateChunk
from cascade_worker.serving.stream import InFlight, RequestStream

log = logging.getLogger(__name__)

TICK_S = 1.0  # how often a drain looks again at what it should hand back


def handed_back(chunk: GenerateChunk) -> GenerateChunk:
    """A failed request's final chunk as a hand-back (its tokens so far stand)."""
    why = f"migrate: {chunk.error or 'step failed'}"
    return chunk.model_copy(update={"finish_reason": FinishReason.MIGRATE, "error": why})


@dataclass(frozen=True)
class InFlightRequest:
    request_id: str
    remaining_tokens: int  # max_tokens minus the tokens generated so far
    tokens_per_s: float | None  # its decode rate here; None = not known yet


def migrate_now(requests: Iterable[InFlightRequest], seconds_left: float) -> list[str]:
    """Ids of the requests to hand back now, with `seconds_left` to the deadline."""
    out = []
    for req in requests:
        rate = req.tokens_per_s
        if rate is None:
            continue
        if rate <= 0 or req.remaining_tokens / rate > seconds_left:
            out.append(req.request_id)
    return out


def _rate(stream: RequestStream, since: dict[str, int], elapsed: float) -> float | None:
    if stream.last_token_at is None:
        return 0.0  # nothing generated here: nothing lost by moving
    if elapsed < TICK_S:
        rate = stream.decode_rate()
        return rate if rate > 0 else None
    return (stream.tokens_here - since.get(stream.request_id, 0)) / elapsed


async def drain_requests(requests: InFlight, timeout_s: float) -> int:
    """Wait for `requests` to finish, handing back (MIGRATE) what cannot by the
    deadline; returns how many were handed back."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    since = {s.request_id: s.tokens_here for s in requests.streams()}
    moved = 0
    while (left := start + timeout_s - loop.time()) > 0:
        elapsed = loop.time() - start
        now = requests.streams()
        going = migrate_now(
            [
                InFlightRequest(s.request_id, s.max_tokens - s.completion_tokens,
                                _rate(s, since, elapsed))
                for s in now
            ],
            left,
        )  # fmt: skip
        if going:
            log.info(
                "drain: handing back %d of %d request(s) that cannot finish in %.1fs",
                len(going), len(now), left,
            )  # fmt: skip
            requests.migrate(going, "migrate: instance draining")
            moved += len(going)
        try:
            await asyncio.wait_for(requests.idle.wait(), min(TICK_S, left))
            return moved
        except TimeoutError:
            continue
    rest = [s.request_id for s in requests.streams()]
    if rest:
        log.warning("drain deadline: handing back %d request(s)", len(rest))
        requests.migrate(rest, "migrate: drain deadline")
    return moved + len(rest)
