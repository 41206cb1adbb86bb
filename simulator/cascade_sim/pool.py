"""The instances of one deployment: start, ready, remove (drain), relabel, and their cost.

Decisions where the operator is not the whole story:

- **Start.** A new instance counts (spec.replicas, IBP's N, instance-seconds) from the
  tick that orders it and serves `time_to_ready` later.
- **Remove.** Instances not ready yet go first (they serve nothing; the operator's
  `scale_down_victims` also gives up unplaced and loading pods first), then ready ones,
  least in flight first, newest first on a tie. A removed ready instance drains: the
  gateway stops routing to it, it finishes what it holds, and it costs instance-seconds
  until then.
- **Roles** follow the operator's `relabel`: ready instances keep their role first, an
  instance keeps its role while that role is not over its count, the rest fill the
  roles short of their count (interactive, mixed, batch). No roles (baselines, owner
  External): everything is mixed.
"""

from __future__ import annotations

from cascade_autoscaler.batch_size import BatchLimits
from cascade_autoscaler.policy_types import Roles
from cascade_sim import local
from cascade_sim.instance import Instance, Phase

ORDER = ("interactive", "mixed", "batch")


class Pool:
    def __init__(
        self,
        steps: list[float],
        prefill_rate: float,
        budget: int,
        engine_max: int,
        limits: BatchLimits | None,
    ) -> None:
        self.steps = steps
        self.prefill_rate = prefill_rate
        self.budget = budget
        self.engine_max = engine_max
        self.limits = limits  # None: fixed cap at the engine's max batch
        self.all: list[Instance] = []  # every instance ever (for instance-seconds)
        self.alive: list[Instance] = []  # starting or ready: spec.replicas of them
        self.serving: list[Instance] = []  # ready, oldest first: where the gateway routes
        self.draining: list[Instance] = []

    def start(self, count: int, now: float, time_to_ready_s: float) -> list[Instance]:
        """Order `count` new instances (mixed until relabelled)."""
        new = []
        for _ in range(count):
            inst = Instance(
                len(self.all),
                "mixed",
                now,
                now + time_to_ready_s,
                self.engine_max,
                self.steps,
                self.prefill_rate,
                self.budget,
            )
            if self.limits is not None:
                local.start(inst, self.limits)
            self.all.append(inst)
            self.alive.append(inst)
            new.append(inst)
        self._reindex()
        return new

    def make_ready(self, inst: Instance, now: float) -> None:
        if inst.phase is Phase.STARTING:
            inst.phase = Phase.READY
            inst.last = now
            inst.restart_window(now, inst.cap)
            self._reindex()

    def remove(self, count: int, now: float) -> list[Instance]:
        """Give up `count` instances; returns the ones that went at once (nothing held)."""
        ranked = sorted(self.alive, key=lambda i: (i.phase is Phase.READY, i.inflight, -i.iid))
        gone = []
        for inst in ranked[:count]:
            self.alive.remove(inst)
            if inst.phase is Phase.READY and inst.inflight > 0:
                inst.phase = Phase.DRAINING
                self.draining.append(inst)
            else:
                self.retire(inst, now)
                gone.append(inst)
        self._reindex()
        return gone

    def retire(self, inst: Instance, now: float) -> None:
        """The instance is gone (drained, or removed with nothing held)."""
        inst.phase = Phase.GONE
        inst.gone_at = now
        inst.version += 1  # its pending events are stale
        if inst in self.draining:
            self.draining.remove(inst)

    def relabel(self, wanted: Roles | None) -> None:
        """Roles towards `wanted` with the fewest changes (None: all mixed)."""
        if wanted is None:
            for inst in self.alive:
                inst.role = "mixed"
            return
        target = {"interactive": wanted.interactive, "mixed": wanted.mixed, "batch": wanted.batch}
        kept = dict.fromkeys(ORDER, 0)
        loose = []
        for inst in sorted(self.alive, key=lambda i: (i.phase is not Phase.READY, i.iid)):
            if kept[inst.role] < target[inst.role]:
                kept[inst.role] += 1
            else:
                loose.append(inst)
        for inst in loose:
            short = next((r for r in ORDER if kept[r] < target[r]), None)
            if short is None:
                break
            kept[short] += 1
            inst.role = short

    def instance_seconds(self, end: float) -> float:
        """Integral of instances (starting and draining included) over [0, end]."""
        total = 0.0
        for inst in self.all:
            stop = end if inst.gone_at is None else min(inst.gone_at, end)
            total += max(0.0, stop - inst.created)
        return total

    def _reindex(self) -> None:
        self.serving = [i for i in self.alive if i.phase is Phase.READY]
