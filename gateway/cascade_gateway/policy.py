"""Queue policy: which waiting request goes to which backend, as a pure function.

The gateway keeps one FIFO per request class and serves them in strict priority order:
interactive requests (people waiting on tokens) before batch ones (throughput work that
tolerates queueing). Each time something changes (a request arrives or finishes, a load
report lands, a cool-down ends) the scheduler asks ``assign`` for a set of placements
and applies them. Placing one request uses up one unit of a backend's capacity in the
snapshot, so one call can place many requests without overfilling anyone.

Chiron's global queue control, in its simplest form: bounded per-class queues (a full
one answers 429 so clients back off), strict priority, and queue depth exported to the
autoscaler (/v1/load), which adds instances when queues build up.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from cascade_gateway.router import BackendView, capacity, pick_backend, routable
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


def service_order(queues: Mapping[RequestClass, Iterable[Waiter]]) -> list[Waiter]:
    """All waiters, highest class first, FIFO within a class."""
    return [w for cls in CLASS_ORDER for w in queues.get(cls, ())]


def over_limit(depth: int, limit: int) -> bool:
    """A class queue may hold ``limit`` waiting requests; one more is refused."""
    return depth > limit


def assign(
    waiters: Sequence[Waiter], views: Sequence[BackendView], now: float, slack: int
) -> list[tuple[int, str]]:
    """Placements ``(waiter key, backend url)`` in service order, while capacity lasts.

    A waiter that fits nowhere (e.g. its only open backend is one it already failed on
    while another is merely full) is skipped, not blocking those behind it.
    """
    snapshot = {v.url: v for v in views}
    placed: list[tuple[int, str]] = []
    for waiter in waiters:
        if not any(routable(v, now) and capacity(v, slack) > 0 for v in snapshot.values()):
            break
        url = pick_backend(snapshot.values(), now, slack, waiter.tried)
        if url is None:
            continue
        placed.append((waiter.key, url))
        view = snapshot[url]
        snapshot[url] = replace(view, in_flight=view.in_flight + 1)
    return placed
