"""The discrete-event loop: arrivals, instance events, local and global ticks.

Time jumps from event to event. The next event is the earliest of: the next arrival,
the earliest instance event (a first token or a finish, from the fluid model; a heap
with a version per instance, stale entries skipped; or an instance becoming ready),
the next local autoscaler tick (every `local_tick_s`, all instances) and the next
policy tick (every `tick_s`). On a tie, instance events go first (a finish frees a slot
the arrival at the same instant can use), then arrivals, then ticks.

The run ends when every request has arrived and none is queued or in flight (the
replay's wall time: its schedule start to its last request's end), or `drain_s` after
the last arrival, whichever is first; what is unfinished then counts as missed.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cascade_autoscaler.batch_size import BatchLimits
from cascade_sim import local
from cascade_sim.config import BATCH, INTERACTIVE, Deployment, SimConfig
from cascade_sim.gateway import Gateway
from cascade_sim.instance import Instance, Phase
from cascade_sim.observe import Observer, sample
from cascade_sim.policies import LOCAL_CONTROL, Policy
from cascade_sim.pool import Pool
from cascade_sim.profile import CapacityProfile
from cascade_sim.workload import Arrival, Req

READY = -1  # heap entry version marking "instance becomes ready"


@dataclass(frozen=True)
class ScaleEvent:
    t: float
    before: int
    after: int
    roles: dict[str, int]
    reason: str


@dataclass
class Result:
    policy: str
    requests: list[Req]
    pool: Pool
    events: list[ScaleEvent]
    timeline: list[dict[str, Any]]
    end_s: float


def simulate(
    arrivals: Sequence[Arrival],
    deployment: Deployment,
    profile: CapacityProfile,
    policy: Policy,
    cfg: SimConfig,
) -> Result:
    """Run `policy` over `arrivals` (sorted by time) and return every request's record."""
    return _Sim(arrivals, deployment, profile, policy, cfg).run()


class _Sim:
    def __init__(
        self,
        arrivals: Sequence[Arrival],
        dep: Deployment,
        profile: CapacityProfile,
        policy: Policy,
        cfg: SimConfig,
    ) -> None:
        self.arrivals, self.dep, self.policy, self.cfg = arrivals, dep, policy, cfg
        adaptive = cfg.local == "adaptive" or (
            cfg.local == "auto" and policy.name in LOCAL_CONTROL and dep.adaptive_batch
        )
        limits = BatchLimits(engine_max=dep.engine_max_batch) if adaptive else None
        rate = cfg.prefill_rate(profile)
        steps = profile.step_table(dep.engine_max_batch)
        self.pool = Pool(steps, rate, dep.prefill_budget, dep.engine_max_batch, limits)
        self.gw = Gateway(
            cfg.routing,
            cfg.slack,
            (cfg.interactive_queue, cfg.batch_queue),
            cfg.client_timeout_s,
            (dep.slos[INTERACTIVE].ttft_s, dep.slos[BATCH].ttft_s),
        )
        self.limits = limits
        self.heap: list[tuple[float, int, int, int]] = []
        self.seq = itertools.count()
        self.now = 0.0
        self.inflight = 0
        self.requests: list[Req] = []
        self.events: list[ScaleEvent] = []
        self.timeline: list[dict[str, Any]] = []
        self.observer = Observer(cfg, dep.engine_max_batch)

    # The loop.

    def run(self) -> Result:
        self._start(self.policy.initial(), ttr=0.0)
        arrivals, cfg = self.arrivals, self.cfg
        last = arrivals[-1].at_s if arrivals else 0.0
        horizon = last + cfg.drain_s
        i, n = 0, len(arrivals)
        t_pol, t_loc = cfg.tick_s, (cfg.local_tick_s if self.limits else math.inf)
        end = horizon
        while True:
            ta = arrivals[i].at_s if i < n else math.inf
            th = self.heap[0][0] if self.heap else math.inf
            if i >= n and not self.inflight and not self.gw.q_i and not self.gw.q_b:
                end = max(self.now, last)
                break
            t = min(ta, th, t_pol, t_loc)
            if t > horizon:
                break
            self.now = t
            if th == t:
                self._instance_event()
            elif ta == t:
                self._arrive(arrivals[i])
                i += 1
            elif t_loc == t:
                self._local_tick()
                t_loc += cfg.local_tick_s
            else:
                self._policy_tick()
                t_pol += cfg.tick_s
        self.now = end
        return Result(self.policy.name, self.requests, self.pool, self.events, self.timeline, end)

    def _schedule(self, inst: Instance) -> None:
        inst.version += 1
        t = inst.next_time()
        if t < math.inf:
            heapq.heappush(self.heap, (t, next(self.seq), inst.iid, inst.version))

    def _instance_event(self) -> None:
        _, _, iid, version = heapq.heappop(self.heap)
        inst = self.pool.all[iid]
        if version == READY:
            if inst.phase is Phase.STARTING:
                self.pool.make_ready(inst, self.now)
                self._dispatch(False)
                self._dispatch(True)
            return
        if version != inst.version:
            return
        done = inst.fire(self.now)
        for r in done:
            self.inflight -= 1
            self.observer.finished(r)
        if inst.phase is Phase.DRAINING and inst.inflight == 0:
            self.pool.retire(inst, self.now)
            return
        if done and inst.phase is Phase.READY:
            self._offer(inst)
        self._schedule(inst)

    def _arrive(self, a: Arrival) -> None:
        r = Req(a, self.dep.slos[BATCH].ttft_s)
        self.requests.append(r)
        self.observer.arrived(r)
        if self.gw.arrive(r) and len(self.gw.queue(a.batch)) == 1:
            self._dispatch(a.batch)

    # Gateway dispatch.

    def _send(self, r: Req, inst: Instance) -> None:
        self.gw.queue(r.batch).take(r)
        r.dispatched = self.now
        r.instance = inst.iid
        inst.accept(r, self.now)
        self.inflight += 1

    def _dispatch(self, batch: bool) -> None:
        """Place the head of a class queue while any instance can take it."""
        touched: set[Instance] = set()
        while (r := self.gw.pop_live(batch, self.now)) is not None:
            inst = self.gw.pick(self.pool.serving, batch)
            if inst is None:
                break
            self._send(r, inst)
            touched.add(inst)
        for inst in touched:
            self._schedule(inst)

    def _offer(self, inst: Instance) -> None:
        """`inst` gained room: by the gateway's invariant only it can take queued work."""
        gw = self.gw
        for batch in (False, True):
            while (r := gw.pop_live(batch, self.now)) is not None and self._takes(inst, batch):
                self._send(r, inst)

    def _takes(self, inst: Instance, batch: bool) -> bool:
        """Would the gateway send the head of this class to `inst` now?"""
        return self.gw.accepts(inst, batch, self.pool.serving)

    # Ticks.

    def _local_tick(self) -> None:
        assert self.limits is not None
        for inst in [*self.pool.serving, *self.pool.draining]:
            inst.advance(self.now)
            old = inst.cap
            local.tick(inst, self.now, self.limits, self.dep.slos)
            if inst.cap != old:
                inst.admit()
                if inst.cap > old and inst.phase is Phase.READY:
                    self._offer(inst)
                self._schedule(inst)

    def _start(self, count: int, ttr: float) -> None:
        for inst in self.pool.start(count, self.now, ttr):
            if inst.phase is Phase.STARTING:
                heapq.heappush(self.heap, (inst.ready_at, next(self.seq), inst.iid, READY))

    def _policy_tick(self) -> None:
        order = self.policy.tick(self.observer.view(self.now, self.pool, self.gw))
        before = len(self.pool.alive)
        if order.write and order.replicas != before:
            if order.replicas > before:
                self._start(order.replicas - before, self.cfg.time_to_ready_s)
            else:
                self.pool.remove(before - order.replicas, self.now)
            self.policy.applied(before, order.replicas, self.now)
        self.pool.relabel(order.roles)
        if order.write and order.replicas != before:
            roles = Counter(i.role for i in self.pool.alive)
            self.events.append(
                ScaleEvent(self.now, before, order.replicas, dict(roles), order.reason)
            )
        self._dispatch(False)
        self._dispatch(True)
        if self.cfg.timeline:
            self.timeline.append(sample(self.now, self.pool, self.gw, self.inflight))
