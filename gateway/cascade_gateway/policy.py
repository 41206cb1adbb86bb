"""Queue policy: which waiting request goes to which backend, as a pure function.

The gateway keeps one queue per request class and serves them in strict priority order:
interactive requests (people waiting on tokens) before batch ones (throughput work that
tolerates queueing). Within a class, requests still on time for their time-to-first-token
SLO go first come first served, then the late ones, in the same order
(`cascade_protocol.queue_order`: under a backlog plain FIFO makes every request miss).
Each time something changes (a request arrives or finishes, a load
report lands, a cool-down ends) the scheduler asks ``assign`` for a set of placements
and applies them. Placing one request uses up one unit of a backend's capacity in the
snapshot, so one call can place many requests without overfilling anyone.

Chiron's global queue control, in its simplest form: bounded per-class queues (a full
one answers 429 so clients back off), strict priority, role-aware routing (each class
to its own instances, then mixed ones: :mod:`cascade_gateway.router`), and queue depth
exported to the autoscaler (/v1/load), which adds instances when queues build up. With
no routable backend at all (scaled to zero, the first instance starting) nothing is
placed and requests stay queued until one appears or their deadline passes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from cascade_gateway.router import BackendView, pick_backend
from cascade_protocol.generate import RequestClass

# Service order: earlier classes are always served first.
CLASS_ORDER: tuple[RequestClass, ...] = (RequestClass.INTERACTIVE, RequestClass.BATCH)


@dataclass(frozen=True)
class Waiter:
    """A queued request as the policy sees it."""

    key: int
    request_class: RequestClass
    # Backends this request already failed on (avoided while others exist).
    tried: frozenset[str] = frozenset()
    # When it can no longer meet its TTFT SLO (`queue_order.late_at`); inf: no SLO.
    late_at: float = math.inf


def service_order(queues: Mapping[RequestClass, Iterable[Waiter]], now: float) -> list[Waiter]:
    """All waiters, highest class first; within a class the on-time ones (and retries,
    accepted long ago and maybe mid-stream) in queue order, then the late ones."""
    order: list[Waiter] = []
    for cls in CLASS_ORDER:
        waiters = list(queues.get(cls, ()))
        order += [w for w in waiters if w.tried or now < w.late_at]
        order += [w for w in waiters if not w.tried and now >= w.late_at]
    return order


def over_limit(depth: int, limit: int) -> bool:
    """A class queue may hold ``limit`` waiting requests; one more is refused."""
    return depth > limit


def assign(
    waiters: Sequence[Waiter], views: Sequence[BackendView], now: float, slack: int
) -> list[tuple[int, str]]:
    """Placements ``(waiter key, backend url)`` in service order, while capacity lasts.

    A waiter that fits nowhere (e.g. its only open backend is one it already failed on
    while another is merely full, or its class's backends are full while the other
    class's have room) is skipped, not blocking those behind it. Room only shrinks
    during one call, so once a waiter that avoids nothing found none, the rest of its
    class are not looked at.
    """
    snapshot = {v.url: v for v in views}
    placed: list[tuple[int, str]] = []
    full: set[RequestClass] = set()
    for waiter in waiters:
        if waiter.request_class in full:
            if len(full) == len(CLASS_ORDER):
                break
            continue
        url = pick_backend(snapshot.values(), now, slack, waiter.tried, waiter.request_class)
        if url is None:
            if not waiter.tried:
                full.add(waiter.request_class)
            continue
        placed.append((waiter.key, url))
        view = snapshot[url]
        snapshot[url] = replace(view, in_flight=view.in_flight + 1)
    return placed
