"""One serving instance as a fluid model of continuous batching, event-driven.

Stepping every decode iteration of 50+ instances over hours is far too slow, and
unnecessary: between two events (an admission, a first token, a finish, a cap change)
the running set is constant, so every rate is constant and the next event's time is
known in closed form. The engine's iteration-level batching becomes:

- **Decode.** With d requests decoding, one step takes `step(d)` = d / tokens_per_s(d)
  (the capacity profile) and gives each of them one token. A per-instance *virtual
  token clock* V counts the tokens every decoding request has received since the
  instance started (dV/dt = 1 / step time); a request that starts decoding at V0 with
  g tokens to go finishes at V0 + g. Finishes sit in a heap keyed by that V, so an event
  costs O(log d), not O(d).
- **Prefill** (the engine's chunked prefill: up to `budget` prompt tokens per step, mixed
  with the decodes). While prompts wait to be prefilled, a step also carries
  c = min(budget, prompt tokens left) of them, costing c / prefill rate: the step time is
  `step(d) + c / prefill rate`, so prefill slows the decoders as it does in the engine.
  The prompt tokens go to the prefilling requests first-come-first-served (the engine
  spreads a step's budget over them; the total rate is the same). A request's first
  token comes with the step that ends its prefill: TTFT = queue wait + this.
- **Admission.** Up to `cap` requests run (prefilling or decoding); the gateway may send
  `slack` more, which wait here, interactive first (the engine's class priority). When
  exactly `cap` run and an interactive request waits, the latest batch request is
  preempted as the engine's scheduler does (by recompute): it waits again, and when
  readmitted prefills its prompt and the tokens it had generated before it resumes.

The local autoscaler's window (tokens, summed gaps, peaks) accumulates here too, since
only `advance` knows the step time of each stretch.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from enum import Enum

from cascade_autoscaler.batch_size import BatchState
from cascade_sim.workload import Req

EPS = 1e-6  # tokens: a due event is done when this little is left (float error)


class Phase(Enum):
    STARTING = "starting"  # ordered, not ready: counts as an instance, serves nothing
    READY = "ready"  # routable
    DRAINING = "draining"  # removed: finishes what it has, takes nothing new
    GONE = "gone"


class Instance:
    __slots__ = (
        "R",
        "V",
        "bstate",
        "budget",
        "cap",
        "created",
        "dec",
        "dec_inter",
        "gone_at",
        "idle_since",
        "iid",
        "inflight",
        "inter",
        "last",
        "phase",
        "pre",
        "pre_sum",
        "ready_at",
        "role",
        "room",
        "seq",
        "steps",
        "tokens",
        "version",
        "w_bat",
        "w_busy_s",
        "w_cap",
        "w_dec_s",
        "w_dec_tokens",
        "w_gap",
        "w_int",
        "w_off",
        "w_run",
        "w_start",
        "w_steps",
        "w_tokens",
        "w_wait",
        "wait_b",
        "wait_i",
    )

    def __init__(
        self,
        iid: int,
        role: str,
        created: float,
        ready_at: float,
        cap: int,
        steps: list[float],
        prefill_rate: float,
        budget: int,
    ) -> None:
        self.iid = iid  # creation order: older instances are filled first when packing
        self.role = role
        self.created = created
        self.ready_at = ready_at
        self.phase = Phase.READY if ready_at <= created else Phase.STARTING
        self.gone_at: float | None = None
        self.cap = cap
        self.steps = steps  # step time by decoding batch size (profile.step_table)
        self.R = prefill_rate
        self.budget = budget
        self.dec: list[tuple[float, int, Req]] = []  # (finish V, seq, request)
        self.dec_inter = 0  # of those, interactive
        self.pre: deque[Req] = deque()  # prefilling, FCFS; the head's `remaining` moves
        self.pre_sum = 0.0  # prompt tokens left over all of `pre`
        self.wait_i: deque[Req] = deque()  # sent by the gateway, over the cap
        self.wait_b: deque[Req] = deque()
        self.V = 0.0
        self.last = max(created, ready_at)
        self.seq = 0
        self.version = 0  # bumps on every change: stale heap events are skipped
        self.inflight = 0  # everything the gateway sent here and is not finished
        self.inter = 0  # of those, interactive (IBP: an instance with any is busy)
        self.tokens = 0.0  # decode tokens since start: its reported tokens/s come from it
        self.bstate: BatchState | None = None  # local autoscaler state (adaptive only)
        self.room = 0  # its latency room (cascade_autoscaler.latency_room); 0: the cap
        self.idle_since: float | None = None  # start of its current idle stretch
        self.restart_window(self.last, cap)

    @property
    def running(self) -> int:
        return len(self.dec) + len(self.pre)

    @property
    def waiting(self) -> int:
        return len(self.wait_i) + len(self.wait_b)

    def restart_window(self, now: float, cap: int) -> None:
        self.w_start, self.w_cap = now, cap
        self.w_tokens = self.w_gap = self.w_dec_tokens = self.w_dec_s = self.w_steps = 0.0
        self.w_busy_s = 0.0  # time spent stepping: w_busy_s / w_steps is the mean step
        self.w_run = self.w_wait = 0
        self.w_int = self.w_bat = self.w_off = False

    def _rates(self) -> tuple[float, float]:
        """(step time, prompt tokens per step) for the current running set."""
        c = min(float(self.budget), self.pre_sum) if self.pre else 0.0
        return self.steps[len(self.dec)] + c / self.R, c

    def advance(self, now: float) -> None:
        """Move the fluid state to `now` (no event may fall strictly inside)."""
        dt = now - self.last
        if dt <= 0:
            return
        self.last = now
        nd = len(self.dec)
        if not nd and not self.pre:
            return
        s, c = self._rates()
        k = dt / s  # engine steps in this stretch
        self.w_steps += k
        self.w_busy_s += dt
        if nd:
            self.V += k
            self.tokens += nd * k
            self.w_tokens += nd * k
            self.w_gap += nd * dt
            if not c:  # a pure decode stretch: the batch's own speed (the worker's rule)
                self.w_dec_tokens += nd * k
                self.w_dec_s += dt
            if self.dec_inter:
                self.w_int = True
            if nd > self.dec_inter:
                self.w_bat = True
        if self.pre:
            done = dt * c / s
            self.pre[0].remaining -= done
            self.pre_sum = max(0.0, self.pre_sum - done)

    def next_time(self) -> float:
        """When the next first token or finish happens, at the current rates."""
        if not self.dec and not self.pre:
            return math.inf
        s, c = self._rates()
        t = math.inf
        if self.dec:
            t = self.last + max(0.0, self.dec[0][0] - self.V) * s
        if self.pre:
            t = min(t, self.last + max(0.0, self.pre[0].remaining) * s / c)
        return t

    def accept(self, r: Req, now: float) -> None:
        """The gateway sends `r` here."""
        self.advance(now)
        (self.wait_b if r.batch else self.wait_i).append(r)
        self.inflight += 1
        if not r.batch:
            self.inter += 1
        self.admit()

    def admit(self) -> None:
        """Start waiting requests while fewer than `cap` run (interactive first)."""
        while self.wait_i and len(self.dec) + len(self.pre) == self.cap and self._preempt():
            pass
        while (self.wait_i or self.wait_b) and len(self.dec) + len(self.pre) < self.cap:
            r = self.wait_i.popleft() if self.wait_i else self.wait_b.popleft()
            r.remaining = float(r.prompt + (r.output - r.left if r.left >= 0 else 0))
            self.pre.append(r)
            self.pre_sum += r.remaining
        self.touch()

    def _preempt(self) -> bool:
        """Send the latest-admitted running batch request back to waiting (if any)."""
        victim: Req | None = None
        for r in self.pre:
            if r.batch and (victim is None or r.dispatched > victim.dispatched):
                victim = r
        for _, _, r in self.dec:
            if r.batch and (victim is None or r.dispatched > victim.dispatched):
                victim = r
        if victim is None:
            return False
        if victim in self.pre:
            self.pre.remove(victim)
            self.pre_sum = max(0.0, self.pre_sum - victim.remaining)
        else:
            i = next(k for k, e in enumerate(self.dec) if e[2] is victim)
            victim.left = max(0.0, self.dec[i][0] - self.V)
            self.dec[i] = self.dec[-1]
            self.dec.pop()
            heapq.heapify(self.dec)
        victim.preempted += 1
        self.wait_b.appendleft(victim)
        return True

    def touch(self) -> None:
        """Window peaks after a change; running above the window's cap spoils it."""
        n = len(self.dec) + len(self.pre)
        self.w_run = max(self.w_run, n)
        self.w_wait = max(self.w_wait, len(self.wait_i) + len(self.wait_b))
        if n > self.w_cap:
            self.w_off = True

    def fire(self, now: float) -> list[Req]:
        """Advance to `now` and settle what is due: first tokens, then finishes."""
        self.advance(now)
        done: list[Req] = []
        while self.pre and self.pre[0].remaining <= EPS:
            r = self.pre.popleft()
            left = r.left if r.left >= 0 else r.output - 1  # resumed, or a first token
            if r.left < 0:
                r.first = now
            r.left = -1.0
            if left <= EPS:
                r.finished = now
                done.append(r)
            else:
                self.seq += 1
                heapq.heappush(self.dec, (self.V + left, self.seq, r))
                if not r.batch:
                    self.dec_inter += 1
        if not self.pre:
            self.pre_sum = 0.0
        while self.dec and self.dec[0][0] <= self.V + EPS:
            r = heapq.heappop(self.dec)[2]
            r.finished = now
            done.append(r)
            if not r.batch:
                self.dec_inter -= 1
        for r in done:
            self.inflight -= 1
            if not r.batch:
                self.inter -= 1
        if done:
            self.admit()
        return done
