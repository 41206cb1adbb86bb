"""Which requests a draining instance hands back at once, rather than at its deadline.

A drain (scale-down, a drain order, SIGTERM) closes admission and gives the requests in
flight until a deadline. A request still running there is not cut: it ends with
`FinishReason.MIGRATE` and the gateway resumes it on a surviving instance, which
prefills prompt + tokens so far (see cascade_protocol.generate). A request that cannot
finish before the deadline anyway is better handed back when the drain starts: it
continues elsewhere after one short pause instead of first running here until the
deadline, and the pod is gone sooner. This module decides which ones, from what the
serving layer knows (pure; the async engine applies it):

- one that has produced no token yet (queued, or in its first prefill) loses nothing by
  moving: it goes now;
- one whose remaining budget (max_tokens - generated) takes longer than the time left
  at its decode rate so far goes now; max_tokens bounds the length (EOS may come
  earlier), so this may move a few streams that would have made it;
- one with no rate yet (a single token) stays until the deadline.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class InFlightRequest:
    request_id: str
    remaining_tokens: int  # max_tokens minus the tokens generated so far
    started: bool  # it has generated a token on this instance
    tokens_per_s: float = 0.0  # its decode rate here so far; 0 = not known yet


def migrate_now(requests: Iterable[InFlightRequest], seconds_left: float) -> list[str]:
    """Ids of the requests to hand back when the drain starts."""
    out = []
    for req in requests:
        rate = req.tokens_per_s
        if not req.started or (rate > 0 and req.remaining_tokens / rate > seconds_left):
            out.append(req.request_id)
    return out
