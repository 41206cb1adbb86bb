"""The gateway: per-class queues with strict priority, role routing, 429 when full.

As the real gateway (cascade_gateway.policy): one FIFO per class, interactive served
before batch, a class queue holding at most its limit (one more is refused), each
instance taking up to `cap + slack` requests in flight so its batch stays full while the
queue (where priority acts) stays here. Roles (cascade_protocol.roles): interactive
requests go to interactive and mixed instances, batch requests to batch instances and
to mixed instances' spare room, which the simulator defines as keeping `mixed_reserve`
slots under the cap free for interactive bursts (the engine's preemption of batch work
is not modelled; the free slot stands in for it).

Which instance, among those allowed:

- `pack` (Chiron §3, and the default): the request's own role first, then mixed; within
  a role the oldest instance with a free slot under its cap. Interactive backpressure
  (IBP = instances with interactive work / interactive+mixed instances) measures how
  many instances the load needs only if requests fill instances before spilling onto
  others: mixed instances then see interactive work only in a burst.
- `spread`: the least loaded (in flight / cap) of all allowed instances, as
  cascade_gateway.router.pick_backend does today. Every instance then runs a little
  interactive work, IBP stays near 1 under any load, and the IBP policy scales towards
  one request per instance (see docs/simulate.md).

Only when no allowed instance has a slot under its cap does `slack` apply (least loaded
first), in both modes. The invariant the simulator keeps: after each dispatch, no
instance can take the head of a non-empty queue, so when one instance gains room only
that instance needs to be offered work (`offer`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

from cascade_sim.config import Routing
from cascade_sim.instance import Instance
from cascade_sim.workload import Req

INTERACTIVE_ROLE = "interactive"
MIXED_ROLE = "mixed"
BATCH_ROLE = "batch"


class Gateway:
    def __init__(
        self, routing: Routing, slack: int, reserve: int, limits: tuple[int, int], timeout_s: float
    ) -> None:
        self.routing = routing
        self.slack = slack
        self.reserve = reserve
        self.limit_i, self.limit_b = limits
        self.timeout_s = timeout_s
        self.q_i: deque[Req] = deque()
        self.q_b: deque[Req] = deque()
        self.last_arrival: float | None = None

    def queue(self, batch: bool) -> deque[Req]:
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

    def allowed(self, inst: Instance, batch: bool) -> bool:
        """May `inst` take one more request of this class (slots under the cap)?"""
        if batch and inst.role == MIXED_ROLE:
            return inst.inflight + 1 + self.reserve <= inst.cap
        if inst.role == (BATCH_ROLE if batch else INTERACTIVE_ROLE) or inst.role == MIXED_ROLE:
            return inst.inflight < inst.cap
        return False

    def slack_ok(self, inst: Instance, batch: bool) -> bool:
        """May `inst` take one more over its cap (into the engine's waiting list)?"""
        if inst.role == MIXED_ROLE:
            return not batch and inst.inflight < inst.cap + self.slack
        return inst.role == (BATCH_ROLE if batch else INTERACTIVE_ROLE) and (
            inst.inflight < inst.cap + self.slack
        )

    def pick(self, serving: Sequence[Instance], batch: bool) -> Instance | None:
        """Where the head of the class queue goes now, or None (it waits).

        The hot path of a run (once per dispatched request), hence plain loops.
        """
        best: Instance | None = None
        if self.routing == "pack":
            own = BATCH_ROLE if batch else INTERACTIVE_ROLE
            for role in (own, MIXED_ROLE):
                for inst in serving:
                    if inst.role == role and self.allowed(inst, batch):
                        return inst
        else:
            low = math.inf
            for inst in serving:
                role, used, cap = inst.role, inst.inflight, inst.cap
                if batch:
                    ok = (
                        used < cap
                        if role == BATCH_ROLE
                        else (role == MIXED_ROLE and used + 1 + self.reserve <= cap)
                    )
                else:
                    ok = role != BATCH_ROLE and used < cap
                if ok and used / cap < low:
                    best, low = inst, used / cap
            if best is not None:
                return best
        low = math.inf
        for inst in serving:
            if self.slack_ok(inst, batch) and inst.inflight / max(1, inst.cap) < low:
                best, low = inst, inst.inflight / max(1, inst.cap)
        return best

    def pop_live(self, batch: bool, now: float) -> Req | None:
        """The head of a class queue, dropping requests their client gave up on."""
        q = self.queue(batch)
        while q:
            r = q[0]
            if now - r.arrival <= self.timeout_s:
                return r
            q.popleft()
            r.timed_out = True
        return None
