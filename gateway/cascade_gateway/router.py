"""Routing decisions: which backend may take a request now, and which one should.

A backend is any URL that answers the worker protocol: a whole-model instance or the
head of an execute-while-load pipeline, both say in their ``LoadReport`` whether they
are ready and how big their batch is, so they are treated alike. The gateway counts its
own in-flight requests per backend (fresh to the millisecond) and reads the rest from
the last report (up to a poll interval old):

- routable: a report said ready and not draining, and no recent failure put the backend
  on a short cool-down;
- has capacity: in-flight < max_batch + slack, so the worker's batch stays full while the
  gateway, not the worker, holds the queue (where class priority can act);
- least loaded: lowest (load / max_batch), then KV-cache use, then fewest in-flight.

Pure functions of a snapshot with ``now`` passed in; unit-tested without sockets.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from cascade_protocol.load import LoadReport


@dataclass(frozen=True)
class BackendView:
    """One backend as the router sees it at one instant."""

    url: str
    # Last load report; None until the first successful poll (or after a failed one).
    report: LoadReport | None
    # Requests this gateway has sent there and not yet finished.
    in_flight: int = 0
    # Monotonic time before which the backend is skipped (it just failed or was full).
    avoid_until: float = 0.0


def routable(view: BackendView, now: float) -> bool:
    report = view.report
    return report is not None and report.ready and not report.draining and now >= view.avoid_until


def capacity(view: BackendView, slack: int) -> int:
    """How many more requests this backend may take from the gateway right now."""
    if view.report is None:
        return 0
    return max(0, max(1, view.report.max_batch) + slack - view.in_flight)


def load_key(view: BackendView) -> tuple[float, float, int, str]:
    """Sort key, lowest first: batch occupancy, KV-cache use, in-flight, URL (stable)."""
    report = view.report
    assert report is not None
    # The report's running+waiting counts other clients too but lags; ours is fresh.
    busy = max(view.in_flight, report.running + report.waiting)
    return (busy / max(1, report.max_batch), report.kv_cache_usage, view.in_flight, view.url)


def pick_backend(
    views: Iterable[BackendView], now: float, slack: int, tried: Collection[str] = ()
) -> str | None:
    """The least-loaded routable backend with capacity, or None if the request must wait.

    Backends this request already failed on are skipped while any other routable
    backend exists (even a full one: then the request waits for it). Only when every
    routable backend was tried does a retry go back to one of them.
    """
    live = [v for v in views if routable(v, now)]
    fresh = [v for v in live if v.url not in tried]
    candidates = fresh or live
    open_ = [v for v in candidates if capacity(v, slack) > 0]
    if not open_:
        return None
    return min(open_, key=load_key).url


def ready_count(views: Iterable[BackendView], now: float) -> int:
    return sum(1 for v in views if routable(v, now))


def context_length(views: Sequence[BackendView]) -> int:
    """The smallest context length any ready backend reports (0: none known).

    All backends serve the same model; the minimum is the safe bound while a rollout
    mixes configurations.
    """
    lengths = [
        v.report.max_model_len
        for v in views
        if v.report is not None and v.report.ready and v.report.max_model_len > 0
    ]
    return min(lengths, default=0)


def next_wakeup(views: Iterable[BackendView], now: float) -> float | None:
    """The earliest cool-down end in the future: when waiting requests should look again."""
    ends = [
        v.avoid_until
        for v in views
        if v.report is not None and v.report.ready and v.avoid_until > now
    ]
    return min(ends, default=None)
