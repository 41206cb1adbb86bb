"""The gateway: per-class queues with strict priority, role routing, 429 when full.

As the real gateway (cascade_gateway.policy and .router): one queue per class, first
come first served among the requests still on time and then among the late ones
(`cascade_protocol.queue_order`), interactive served before batch, a class queue holding
at most its limit (one more is refused), and for the head of a queue the backend chosen
by

1. a free slot in its batch (in flight < cap) before a `slack` slot (in flight < cap +
   slack, queued at the worker);
2. role tier: the request's own role, then mixed (cascade_protocol.roles); the other role
   only when no instance of the class's roles is ready at all (the router's fallback);
3. least loaded: in flight / cap, then age (the router breaks ties by KV use and URL).

Batch requests on a non-batch instance get only its spare room under the cap, never
the slack slots: those stay for interactive arrivals, which the engine then runs by
preempting a batch sequence (`Instance.admit`).

`routing="pack"` replaces (3) by age, oldest first: instances fill one after another, as
Chiron routes, so interactive backpressure counts only the instances the load needs
(docs/simulate.md compares the two). The invariant the simulator keeps: after each
dispatch no instance can take the head of a non-empty queue, so when one instance gains
room only that instance needs to be offered work (`accepts`).
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Iterator, Sequence

from cascade_protocol.queue_order import late_at
from cascade_sim.config import Routing
from cascade_sim.instance import Instance
from cascade_sim.workload import Req

INTERACTIVE_ROLE = "interactive"
MIXED_ROLE = "mixed"
BATCH_ROLE = "batch"


class ClassQueue:
    """One class's waiting requests: those still on time, then the late ones, each in
    arrival order. A request moves to `late` when it is first looked at past its time,
    so each move is O(1) and the head is always the rule's next request."""

    def __init__(self, ttft_slo_s: float, timeout_s: float) -> None:
        self.ttft_slo_s = ttft_slo_s
        self.timeout_s = timeout_s
        self.on_time: deque[Req] = deque()
        self.late: deque[Req] = deque()

    def __len__(self) -> int:
        return len(self.on_time) + len(self.late)

    def __iter__(self) -> Iterator[Req]:
        """Oldest first (every late request arrived before every on-time one)."""
        return itertools.chain(self.late, self.on_time)

    def append(self, r: Req) -> None:
        self.on_time.append(r)

    def head(self, now: float) -> Req | None:
        """The next request to serve, dropping those whose client gave up on them."""
        on_time, late = self.on_time, self.late
        while on_time and now >= late_at(on_time[0].arrival, self.ttft_slo_s):
            late.append(on_time.popleft())
        for q in (late, on_time):
            while q and now - q[0].arrival > self.timeout_s:
                q.popleft().timed_out = True
        if on_time:
            return on_time[0]
        return late[0] if late else None

    def take(self, r: Req) -> None:
        """Remove `r`, the head just returned."""
        (self.on_time if self.on_time and self.on_time[0] is r else self.late).popleft()


class Gateway:
    def __init__(
        self,
        routing: Routing,
        slack: int,
        limits: tuple[int, int],
        timeout_s: float,
        ttft_slos_s: tuple[float, float] = (math.inf, math.inf),
    ):
        self.routing = routing
        self.slack = slack
        self.limit_i, self.limit_b = limits
        self.q_i = ClassQueue(ttft_slos_s[0], timeout_s)
        self.q_b = ClassQueue(ttft_slos_s[1], timeout_s)
        self.last_arrival: float | None = None

    def queue(self, batch: bool) -> ClassQueue:
        return self.q_b if batch else self.q_i

    def arrive(self, r: Req) -> bool:
        """Queue `r`; False (429) when its class queue is already at its limit."""
        self.last_arrival = r.arrival
        q, limit = (self.q_b, self.limit_b) if r.batch else (self.q_i, self.limit_i)
        if len(q) >= limit:
            r.rejected = True
            return False
        q.append(r)
        return True

    def room(self, inst: Instance, batch: bool) -> bool:
        """May `inst` take one more of this class (its role allowing it)?"""
        if batch and inst.role != BATCH_ROLE:
            return inst.inflight < inst.cap
        return inst.inflight < inst.cap + self.slack

    def accepts(self, inst: Instance, batch: bool, serving: Sequence[Instance]) -> bool:
        """Would `inst` take the head of this class, were it the only one with room?"""
        if not self.room(inst, batch):
            return False
        other = INTERACTIVE_ROLE if batch else BATCH_ROLE
        return inst.role != other or all(i.role == other for i in serving)

    def pick(self, serving: Sequence[Instance], batch: bool) -> Instance | None:
        """Where the head of the class queue goes now, or None (it waits).

        The hot path of a run (once per dispatched request): one plain loop with the
        preference folded into a number, (slot tier x 2 + role tier) x 1e6 + load.
        """
        own = BATCH_ROLE if batch else INTERACTIVE_ROLE
        other = INTERACTIVE_ROLE if batch else BATCH_ROLE
        pack, slack = self.routing == "pack", self.slack
        best: Instance | None = None
        low = math.inf
        eligible = False
        for inst in serving:
            role = inst.role
            if role == other:
                continue
            eligible = True
            used, cap = inst.inflight, inst.cap
            if used < cap:
                key = 0.0
            elif used < cap + slack and (role == own or not batch):
                key = 2e6
            else:
                continue
            if role != own:
                key += 1e6
            key += inst.iid if pack else used / cap
            if key < low:
                best, low = inst, key
        if eligible:
            return best
        for inst in serving:  # no instance of the class's roles: any, as if mixed
            if self.room(inst, batch):
                key = (0.0 if inst.inflight < inst.cap else 2e6) + inst.inflight / inst.cap
                if key < low:
                    best, low = inst, key
        return best

    def pop_live(self, batch: bool, now: float) -> Req | None:
        """The next request of a class queue (see `ClassQueue.head`); it stays queued
        until `take`n."""
        return self.queue(batch).head(now)
