"""The scheduler: per-class bounded queues in front of the backend pool.

``acquire`` puts a request in its class queue and returns once the policy
(:func:`cascade_gateway.policy.assign`) placed it on a backend, with one in-flight slot
there reserved; ``release`` gives the slot back. Placement runs whenever anything that
could free capacity happens (a release, a load report, a backend appearing, a cool-down
ending), never on a timer of its own, so nothing busy-waits. The caller bounds the wait
with its deadline; a cancelled waiter leaves the queue (or hands back a slot it was
given in the same instant), so slots cannot leak.

With no routable backend (none discovered yet, the deployment scaled to zero, the first
instance still loading) requests simply stay queued: they are *held*, counted in the
load report so the autoscaler scales from zero, and placed as soon as a backend's load
report says ready, or refused when their own deadline passes.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from cascade_gateway.backends import BackendPool
from cascade_gateway.demand import Ticket
from cascade_gateway.policy import Waiter, assign, over_limit, service_order
from cascade_gateway.router import next_wakeup, ready_count
from cascade_protocol.generate import RequestClass
from cascade_protocol.queue_order import QueueOrder, late_at


class ClassQueueFull(Exception):
    def __init__(self, request_class: RequestClass, limit: int) -> None:
        super().__init__(f"{request_class} queue full ({limit})")
        self.request_class = request_class
        self.limit = limit


@dataclass
class _Entry:
    waiter: Waiter
    future: asyncio.Future[str]
    ticket: Ticket | None = None


class Scheduler:
    def __init__(
        self,
        pool: BackendPool,
        limits: Mapping[RequestClass, int],
        slack: int,
        order: QueueOrder = QueueOrder.ON_TIME_FIRST,
    ) -> None:
        self.pool = pool
        self.limits = dict(limits)
        self.slack = slack
        self.order = order  # FIFO: no request is ever late for the service order
        self._queues: dict[RequestClass, deque[_Entry]] = {c: deque() for c in RequestClass}
        self._in_flight: dict[RequestClass, int] = dict.fromkeys(RequestClass, 0)
        self._keys = itertools.count()
        self._wakeup: asyncio.TimerHandle | None = None
        self._wakeup_at = 0.0
        pool.on_change = self.pump

    def depth(self, request_class: RequestClass) -> int:
        return len(self._queues[request_class])

    def in_flight(self, request_class: RequestClass) -> int:
        return self._in_flight[request_class]

    def queued(self, request_class: RequestClass) -> list[Ticket]:
        """What is known of the class's waiting requests, in queue order."""
        return [e.ticket for e in self._queues[request_class] if e.ticket is not None]

    def held(self) -> int:
        """Requests waiting while no backend is routable at all (0 while one is)."""
        if ready_count(self.pool.views(), self.pool.clock()) > 0:
            return 0
        return sum(len(q) for q in self._queues.values())

    async def acquire(
        self,
        request_class: RequestClass,
        tried: frozenset[str] = frozenset(),
        *,
        retry: bool = False,
        ticket: Ticket | None = None,
    ) -> str:
        """Wait for a backend; returns its URL with a slot reserved for the caller.

        A retry (the request was accepted before, then its backend failed) goes to the
        head of its queue and is never refused for a full queue.
        """
        late = math.inf
        if ticket is not None and self.order == QueueOrder.ON_TIME_FIRST:
            late = late_at(ticket.arrived, ticket.deadline - ticket.arrived)
        entry = _Entry(
            Waiter(next(self._keys), request_class, tried, late),
            asyncio.get_running_loop().create_future(),
            ticket,
        )
        queue = self._queues[request_class]
        if retry:
            queue.appendleft(entry)
        else:
            queue.append(entry)
        self.pump()
        if not entry.future.done() and not retry:
            limit = self.limits.get(request_class, 0)
            if over_limit(len(queue), limit):
                queue.remove(entry)
                raise ClassQueueFull(request_class, limit)
        try:
            return await entry.future
        except BaseException:
            if entry.future.done() and not entry.future.cancelled():
                self.release(entry.future.result(), request_class)
            elif entry in queue:
                queue.remove(entry)
            raise

    def release(self, url: str, request_class: RequestClass) -> None:
        self.pool.release(url, request_class)
        self._in_flight[request_class] -= 1
        self.pump()

    def pump(self) -> None:
        """Place as many waiting requests as the backends have room for, in order."""
        waiting = {c: [e.waiter for e in q] for c, q in self._queues.items()}
        if not any(waiting.values()):
            return
        views = self.pool.views()
        now = self.pool.clock()
        entries = {e.waiter.key: e for q in self._queues.values() for e in q}
        for key, url in assign(service_order(waiting, now), views, now, self.slack):
            entry = entries[key]
            self._queues[entry.waiter.request_class].remove(entry)
            if entry.future.done():  # cancelled in this very instant
                continue
            self.pool.reserve(url, entry.waiter.request_class)
            self._in_flight[entry.waiter.request_class] += 1
            entry.future.set_result(url)
        if any(self._queues.values()):
            self._wake_at(next_wakeup(self.pool.views(), now), now)

    def _wake_at(self, when: float | None, now: float) -> None:
        """Look again when the earliest backend cool-down ends (if one is pending)."""
        if when is None or (self._wakeup is not None and self._wakeup_at <= when):
            return
        if self._wakeup is not None:
            self._wakeup.cancel()

        def fire() -> None:
            self._wakeup = None
            self.pump()

        self._wakeup_at = when
        delay = max(0.0, when - now) + 0.001
        self._wakeup = asyncio.get_running_loop().call_later(delay, fire)

    def close(self) -> None:
        if self._wakeup is not None:
            self._wakeup.cancel()
            self._wakeup = None
