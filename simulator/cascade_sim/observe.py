"""What the gateway and the pods would report, kept as the run goes: the policy's `View`.

The operator reads the gateway's load report and the pods each tick; the simulator
keeps the same figures incrementally (a full scan of every request each tick would
dominate an hour-long run):

- interactive arrivals per `arrival_interval_s`, for auto Θ;
- the output lengths of the last `OUTPUT_WINDOW` finished requests (exact sums);
- each instance's decode tokens/s since the previous tick, and the highest seen, as
  the operator keeps the highest tokens/s any backend reported (Algorithm 2's Θ).

It also samples the timeline (`sample`): instances by role, queues, in flight, caps.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter, deque
from typing import Any

from cascade_protocol.gateway_load import MAX_REPORTED_BATCH
from cascade_sim.config import SimConfig
from cascade_sim.gateway import Gateway
from cascade_sim.instance import Phase
from cascade_sim.pool import Pool
from cascade_sim.view import InstanceView, View
from cascade_sim.workload import Req

OUTPUT_WINDOW = 512  # finished requests behind the output-length mean and deviation (gateway's)


class Observer:
    def __init__(self, cfg: SimConfig, engine_max_batch: int) -> None:
        self.cfg = cfg
        self.engine_max_batch = engine_max_batch
        self.arrivals: Counter[int] = Counter()
        self.outputs: deque[int] = deque()
        self.out_sum = self.out_sq = 0
        self.peak_tps: float | None = None
        self.seen_tokens: dict[int, float] = {}
        self.last_tick = 0.0

    def arrived(self, r: Req) -> None:
        if not r.batch:
            self.arrivals[math.floor(r.arrival / self.cfg.arrival_interval_s)] += 1

    def finished(self, r: Req) -> None:
        if len(self.outputs) == OUTPUT_WINDOW:
            old = self.outputs.popleft()
            self.out_sum -= old
            self.out_sq -= old * old
        self.outputs.append(r.output)
        self.out_sum += r.output
        self.out_sq += r.output * r.output

    def _throughput(self, now: float, pool: Pool) -> None:
        dt = now - self.last_tick
        for inst in pool.serving:
            inst.advance(now)
            seen = self.seen_tokens.get(inst.iid, 0.0)
            self.seen_tokens[inst.iid] = inst.tokens
            rate = (inst.tokens - seen) / dt if dt > 0 else 0.0
            if rate > 0 and (self.peak_tps is None or rate > self.peak_tps):
                self.peak_tps = rate
        self.last_tick = now

    def view(self, now: float, pool: Pool, gw: Gateway) -> View:
        """The policy's observation at `now` (instances advanced to it)."""
        cfg = self.cfg
        self._throughput(now, pool)
        k = math.floor(now / cfg.arrival_interval_s)
        counts = tuple(
            float(self.arrivals.get(j, 0)) for j in range(max(0, k - cfg.arrival_intervals), k)
        )
        n = len(self.outputs)
        mean = self.out_sum / n if n else None
        std = math.sqrt(max(0.0, self.out_sq / n - (self.out_sum / n) ** 2)) if n else 0.0
        return View(
            now=now,
            replicas=len(pool.alive),
            instances=tuple(
                InstanceView(i.role, i.phase is Phase.READY, i.inflight, i.inter, i.cap, i.room)
                for i in pool.alive
            ),
            draining_inflight=sum(i.inflight for i in pool.draining),
            queued_interactive=len(gw.q_i),
            queued_batch=len(gw.q_b),
            batch_queue=tuple(
                r.queued
                for r in itertools.islice(gw.q_b, MAX_REPORTED_BATCH)
                if r.queued is not None
            ),
            last_arrival_s=gw.last_arrival,
            arrivals=counts,
            arrival_interval_s=cfg.arrival_interval_s,
            time_to_ready_s=cfg.time_to_ready_s,
            output_mean=mean,
            output_std=std,
            peak_tokens_per_s=self.peak_tps,
            engine_max_batch=self.engine_max_batch,
        )


def sample(now: float, pool: Pool, gw: Gateway, inflight: int) -> dict[str, Any]:
    """One timeline row: instances by role (starting included), queues, in flight."""
    roles = Counter(i.role for i in pool.alive)
    serving = pool.serving
    return {
        "t": round(now, 3),
        "interactive": roles["interactive"],
        "mixed": roles["mixed"],
        "batch": roles["batch"],
        "starting": len(pool.alive) - len(serving),
        "draining": len(pool.draining),
        "queued_interactive": len(gw.q_i),
        "queued_batch": len(gw.q_b),
        "in_flight": inflight,
        "mean_cap": round(sum(i.cap for i in serving) / len(serving), 1) if serving else 0,
    }
