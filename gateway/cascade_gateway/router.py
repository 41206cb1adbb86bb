"""Routing decisions: which backend may take a request now, and which one should.

A backend is any URL that answers the worker protocol: a whole-model instance or the
head of an execute-while-load pipeline, both say in their ``LoadReport`` whether they
are ready and how big their batch is, so they are treated alike. The gateway counts its
own in-flight requests per backend (fresh to the millisecond) and reads the rest from
the last report (up to a poll interval old):

- routable: a report said ready and not draining, and no recent failure put the backend
  on a short cool-down;
- has room: in-flight < max_batch + slack, so the worker's batch stays full while the
  gateway, not the worker, holds the queue (where class priority can act);
- least loaded: lowest (load / max_batch), then KV-cache use, then fewest in-flight.

Roles (Chiron §5; the operator labels worker pods, an unlabelled pod is mixed): each
request goes to its own role first, then to mixed instances, as in Chiron's routing.

- Interactive: interactive backends while one has a free batch slot, then mixed ones
  (the ``slack`` slots above a batch come after every free batch slot). Packing
  interactive work onto interactive instances keeps mixed instances free for bursts,
  which is what IBP (instances running interactive requests / interactive + mixed)
  measures; spreading it over every mixed instance would make any load look like
  IBP = 1.
- Batch: batch backends with their full room, then a mixed backend's *spare room*:
  batch may fill a mixed backend's batch (in-flight < max_batch) but never the
  ``slack`` slots above it. Those stay for interactive arrivals, which the worker runs
  at once by preempting a batch sequence when its batch is full (its scheduler does
  that), so batch work never makes an interactive request wait at the gateway for a
  minutes-long batch request to end. max_batch is at least 1, so an idle mixed backend
  always takes batch work (no starvation when every instance is mixed, as without
  labels); what changes is only that surplus batch requests wait at the gateway, where
  priority acts, instead of in the worker's queue.
- Fallback: when no backend of the class's roles (own + mixed) is routable at all, e.g.
  every ready pod is labelled batch while an interactive request waits, any routable
  backend serves it rather than letting it starve; such a backend counts as mixed for
  the request (batch gets only spare room on an interactive instance).

Pure functions of a snapshot with ``now`` passed in; unit-tested without sockets.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from cascade_protocol.generate import RequestClass
from cascade_protocol.load import LoadReport
from cascade_protocol.roles import InstanceRole

# The role a class is meant for; mixed instances serve both.
OWN_ROLE = {
    RequestClass.INTERACTIVE: InstanceRole.INTERACTIVE,
    RequestClass.BATCH: InstanceRole.BATCH,
}


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
    # Its pod's role label (static backends and unlabelled pods are mixed).
    role: InstanceRole = InstanceRole.MIXED


def routable(view: BackendView, now: float) -> bool:
    report = view.report
    return report is not None and report.ready and not report.draining and now >= view.avoid_until


def capacity(view: BackendView, slack: int) -> int:
    """How many more requests this backend may take from the gateway right now."""
    if view.report is None:
        return 0
    return max(0, max(1, view.report.max_batch) + slack - view.in_flight)


def room(view: BackendView, request_class: RequestClass, slack: int) -> int:
    """How many more requests of ``request_class`` this backend may take now.

    Batch requests get a batch backend's whole capacity but only the spare room of any
    other (its batch without the slack, kept for interactive arrivals).
    """
    if request_class is RequestClass.BATCH and view.role is not InstanceRole.BATCH:
        return capacity(view, 0)
    return capacity(view, slack)


def tier(view: BackendView, request_class: RequestClass) -> int:
    """Routing preference, lowest first: own role, then mixed, then the other role."""
    if view.role is OWN_ROLE[request_class]:
        return 0
    return 1 if view.role is InstanceRole.MIXED else 2


def load_key(view: BackendView) -> tuple[float, float, int, str]:
    """Sort key, lowest first: batch occupancy, KV-cache use, in-flight, URL (stable)."""
    report = view.report
    assert report is not None
    # The report's running+waiting counts other clients too but lags; ours is fresh.
    busy = max(view.in_flight, report.running + report.waiting)
    return (busy / max(1, report.max_batch), report.kv_cache_usage, view.in_flight, view.url)


def candidates(
    views: Iterable[BackendView], now: float, request_class: RequestClass
) -> list[BackendView]:
    """Routable backends of the class's roles (own + mixed), else every routable one."""
    live = [v for v in views if routable(v, now)]
    eligible = [v for v in live if tier(v, request_class) < 2]
    return eligible or live


def pick_backend(
    views: Iterable[BackendView],
    now: float,
    slack: int,
    tried: Collection[str] = (),
    request_class: RequestClass = RequestClass.INTERACTIVE,
) -> str | None:
    """The backend for one request of ``request_class``, or None if it must wait.

    A free slot in a batch first (a slack slot queues at the worker), then own role
    before mixed, then least loaded. Backends this request
    already failed on are skipped while any other candidate exists (even a full one:
    then the request waits for it). Only when every candidate was tried does a retry go
    back to one of them.
    """
    live = candidates(views, now, request_class)
    fresh = [v for v in live if v.url not in tried]
    open_ = [v for v in fresh or live if room(v, request_class, slack) > 0]
    if not open_:
        return None
    return min(open_, key=lambda v: preference(v, request_class)).url


def preference(
    view: BackendView, request_class: RequestClass
) -> tuple[bool, int, tuple[float, float, int, str]]:
    """Sort key, lowest first: batch slot free, role tier, load."""
    return (capacity(view, 0) == 0, tier(view, request_class), load_key(view))


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


def prompt_bytes_bound(views: Sequence[BackendView]) -> int:
    """The most UTF-8 bytes a text prompt may have and still fit the context (0: no
    bound known): the context length times the longest token any ready backend's
    tokenizer has (the largest: the safe side while a rollout mixes tokenizers)."""
    longest = [
        v.report.max_token_bytes
        for v in views
        if v.report is not None and v.report.ready and v.report.max_token_bytes > 0
    ]
    return context_length(views) * max(longest, default=0)


def next_wakeup(views: Iterable[BackendView], now: float) -> float | None:
    """The earliest cool-down end in the future: when waiting requests should look again."""
    ends = [
        v.avoid_until
        for v in views
        if v.report is not None and v.report.ready and v.avoid_until > now
    ]
    return min(ends, default=None)
