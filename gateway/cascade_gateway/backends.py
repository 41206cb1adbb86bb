"""The backend pool: which workers exist, what they last reported, what we sent them.

Backends come from two sources, merged: static URLs (flags/env, always mixed) and
discovered worker pods (kubernetes discovery replaces its set every listing; a backend
still listed keeps its report and in-flight counts, and takes the listing's pod name
and role, so the operator relabelling a pod re-routes it at once). Each backend's
``LoadReport`` is refreshed by ``poll_loop`` about once a second; a failed poll clears
the report, which makes the backend unroutable until it answers again. Dispatch failures put a
backend on a short cool-down (``avoid``) so the next requests go elsewhere without
waiting for the next poll. Every change calls ``on_change`` so the scheduler can place
waiting requests at once instead of polling for capacity. Each backend's open streams
and last progress feed the stall watch (stalls.py, ``stall_loop``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import aiohttp

from cascade_gateway.discovery import Discovered
from cascade_gateway.router import BackendView, routable
from cascade_gateway.stalls import Cut, Liveness, stalled
from cascade_gateway.upstream import fetch_load
from cascade_protocol.generate import RequestClass
from cascade_protocol.load import LoadReport
from cascade_protocol.roles import InstanceRole

log = logging.getLogger(__name__)


JOIN_POLL_S = 0.2  # how often backends that are not ready are polled between rounds
# A stalled backend is skipped for this many stall bounds: past the worker's own stall
# readiness (cascade_worker.serving.liveness), which then keeps it out until it steps.
STALL_AVOID_BOUNDS = 4
# The stall watch looks this many times per bound, so a hung backend's streams are cut
# at most a tenth of the bound late (a look is a pass over the pool, no I/O).
STALL_CHECKS_PER_BOUND = 10


@dataclass
class BackendState:
    url: str
    static: bool = False
    pod: str = ""  # the worker pod's name ("" for a static URL)
    role: InstanceRole = InstanceRole.MIXED
    report: LoadReport | None = None
    in_flight: int = 0
    # Of in_flight, interactive requests (the autoscaler's IBP counts such instances).
    interactive_in_flight: int = 0
    avoid_until: float = 0.0
    # Why the last poll or request failed; "" while healthy. For /v1/load and logs.
    error: str = ""
    # Open generate streams, and when the backend last made progress (stalls.py).
    streams: set[Cut] = field(default_factory=set)
    progress_at: float = 0.0

    def view(self) -> BackendView:
        return BackendView(self.url, self.report, self.in_flight, self.avoid_until, self.role)

    def liveness(self, now: float) -> Liveness:
        return Liveness(self.url, len(self.streams), self.progress_at, routable(self.view(), now))


class BackendPool:
    """Mutable state, touched only from the event loop's thread."""

    def __init__(
        self, static: Iterable[str] = (), clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._states = {url: BackendState(url, static=True) for url in static}
        self.clock = clock
        self.on_change: Callable[[], None] = lambda: None

    def urls(self) -> list[str]:
        return list(self._states)

    def states(self) -> list[BackendState]:
        return list(self._states.values())

    def views(self) -> list[BackendView]:
        return [s.view() for s in self._states.values()]

    def set_discovered(self, found: Iterable[Discovered]) -> None:
        """Replace the discovered backends (static ones stay); update pods and roles."""
        wanted = {d.url: d for d in found}
        for url, state in list(self._states.items()):
            if not state.static and url not in wanted:
                log.info("backend gone: %s (%s)", url, state.pod)
                del self._states[url]
        for url in sorted(wanted):
            d = wanted[url]
            known = self._states.get(url)
            if known is None:
                log.info("backend found: %s (%s, %s)", url, d.pod, d.role.value)
                self._states[url] = BackendState(url, pod=d.pod, role=d.role)
            elif not known.static and (known.pod, known.role) != (d.pod, d.role):
                log.info("backend %s: %s, role %s", url, d.pod, d.role.value)
                known.pod, known.role = d.pod, d.role
        self.on_change()

    def update(self, url: str, report: LoadReport | None, error: str = "") -> None:
        state = self._states.get(url)
        if state is None:
            return
        if report is None and state.report is not None:
            log.warning("backend %s down: %s", url, error)
        old = state.report
        if report is not None and old is not None and report.engine_steps != old.engine_steps:
            state.progress_at = self.clock()
        state.report, state.error = report, error
        self.on_change()

    def avoid(self, url: str, seconds: float, error: str) -> None:
        """Skip ``url`` for ``seconds`` after a failure (it answered 429/503 or broke)."""
        state = self._states.get(url)
        if state is not None:
            state.avoid_until = max(state.avoid_until, self.clock() + seconds)
            state.error = error

    def open_stream(self, url: str) -> Cut:
        """A stream to `url` starts: its handle, and the backend's stall clock restarts."""
        cut = Cut()
        state = self._states.get(url)
        if state is not None:
            state.streams.add(cut)
            state.progress_at = self.clock()
        return cut

    def close_stream(self, url: str, cut: Cut) -> None:
        state = self._states.get(url)
        if state is not None:
            state.streams.discard(cut)

    def progressed(self, url: str) -> None:
        """A chunk came from `url`."""
        state = self._states.get(url)
        if state is not None:
            state.progress_at = self.clock()

    def cut_stalled(self, bound_s: float) -> list[str]:
        """Stop routing to the backends stalled for `bound_s` and cut their streams (which
        resume elsewhere); their URLs."""
        now = self.clock()
        found = stalled([s.liveness(now) for s in self._states.values()], now, bound_s)
        for url in found:
            state = self._states[url]
            why = (
                f"no progress for {now - state.progress_at:.1f}s on {len(state.streams)} stream(s)"
            )
            log.warning("backend %s stalled: %s; moving its streams", url, why)
            self.avoid(url, bound_s * STALL_AVOID_BOUNDS, f"stalled: {why}")
            for cut in list(state.streams):
                cut.cut(f"backend stalled: {why}")
            state.streams.clear()
        if found:
            self.on_change()
        return found

    def reserve(self, url: str, request_class: RequestClass) -> None:
        state = self._states.get(url)
        if state is not None:
            state.in_flight += 1
            if request_class is RequestClass.INTERACTIVE:
                state.interactive_in_flight += 1

    def release(self, url: str, request_class: RequestClass) -> None:
        state = self._states.get(url)
        if state is not None and state.in_flight > 0:
            state.in_flight -= 1
            if request_class is RequestClass.INTERACTIVE and state.interactive_in_flight > 0:
                state.interactive_in_flight -= 1


async def poll_once(
    pool: BackendPool,
    session: aiohttp.ClientSession,
    timeout: float,
    urls: list[str] | None = None,
) -> None:
    """GET /v1/load from every backend (or `urls`) at once; a failure marks that one down."""
    urls = pool.urls() if urls is None else urls
    results = await asyncio.gather(
        *(fetch_load(session, url, timeout) for url in urls), return_exceptions=True
    )
    for url, result in zip(urls, results, strict=True):
        if isinstance(result, LoadReport):
            pool.update(url, result)
        elif isinstance(result, Exception):
            pool.update(url, None, f"load poll failed: {result or type(result).__name__}")
        else:  # a BaseException such as CancelledError: stop polling
            raise result


async def poll_loop(pool: BackendPool, session: aiohttp.ClientSession, interval: float) -> None:
    """Poll forever (until cancelled), one round per ``interval`` seconds; between rounds
    the backends not ready yet every JOIN_POLL_S, so new capacity (an instance that just
    got its weights, a pipeline head of a live scale-up) takes requests within that."""
    timeout = max(0.5, interval)
    while True:
        started = pool.clock()
        await poll_once(pool, session, timeout)
        while (left := interval - (pool.clock() - started)) > 0:
            await asyncio.sleep(min(left, JOIN_POLL_S))
            joining = [s.url for s in pool.states() if s.report is None or not s.report.ready]
            if joining and pool.clock() - started < interval:
                await poll_once(pool, session, timeout, joining)


async def stall_loop(pool: BackendPool, bound_s: float, on_stall: Callable[[str], None]) -> None:
    """Check for stalled backends STALL_CHECKS_PER_BOUND times per bound, forever (until
    cancelled)."""
    while True:
        await asyncio.sleep(bound_s / STALL_CHECKS_PER_BOUND)
        for url in pool.cut_stalled(bound_s):
            on_stall(url)
