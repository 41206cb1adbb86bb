"""Chiron's local autoscaler in the worker: engine steps in, a batch cap out.

The policy is `cascade_autoscaler.batch_size` (Algorithm 1, pure). This module is the
glue that feeds it, with no clock and no I/O of its own, so it is tested tick by tick:

- `BatchWindow` accumulates what the event loop sees between two ticks: every engine
  step (running and waiting counts after it, and the cap the engine ran under) and
  every decode token (its gap since the request's previous token, and the request's
  class). The first token of a request comes from its prefill, not a decode step: it
  counts in neither the ITL nor the throughput.
- `LocalAutoscaler.tick(now)` turns the window into a `BatchObservation` and calls
  `batch_size.step`: peak running, decode tokens, mean ITL (the sum of the gaps over
  the tokens), decode throughput, the ITL SLOs of the classes that decoded in it
  (--interactive-itl-slo-ms, --batch-itl-slo-ms), peak waiting and the steps' mean
  compute time (what tells a prefill-made ITL from the batch's own: `prefill_share`).

Where the worker adds to the policy:

- **Throughput is the speed of pure decode steps**: the tokens of the window's steps
  that prefilled nothing over those steps' compute time (`EngineStats.step_s`), i.e.
  the batch's own tokens/s (the capacity curve's quantity); a window without one has no
  throughput (batch_size's Units: a wall-clock substitute mixed with CPU-time samples
  read 10-17x low and halved the cap). Tokens over the window's span would also count
  the time spent prefilling the requests that arrived: under open-loop arrivals a
  larger cap admits more of them, its window spends more of its time in prefill and
  its decode rate looks lower, so TBP read "growing did not pay" and held the cap at
  2-6 where 32 served best (measured: `cascade bench autoscale` run 4, 73 step-backs
  and TBP halvings against 36 ITL halvings over one run).

- **Start at the engine's own max batch**, not at 1 as `initial_state` defaults: no
  SLO violation has been seen yet, so nothing argues for serving below the limit the
  deployment configured (slow start would hold the first burst of requests to one at
  a time), and a violation halves the cap on every judged window, so an SLO that the
  full batch breaks brings the cap down within a few ticks (log2 of the limit).
- **A window measures one cap.** Steps run under another cap (the change has not
  reached the engine thread yet) or with more requests running than the cap (a lowered
  cap waits for the running set to drain; it never cuts sequences) measure the old
  batch, not this one: the window is dropped, not judged, and the next one starts. Else
  a violation seen at 16 running would halve 8 to 4 to 2 while the 16 still drain.
- **Idle is not a window.** A window in which nothing ran is dropped too, so the first
  window of the next burst does not divide its tokens by the idle time before it; idle
  since `idle_reset_s`, the cap goes back to the engine limit (`batch_size.after_idle`).
- A window too thin to judge (`measured=False`: fewer than `min_tokens` decode tokens
  or `min_steps` engine steps) keeps accumulating, as the policy asks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cascade_autoscaler.batch_size import (
    BatchDecision,
    BatchLimits,
    BatchObservation,
    BatchState,
    after_idle,
    initial_state,
    step,
)
from cascade_autoscaler.latency_room import latency_room
from cascade_protocol.generate import RequestClass


@dataclass(frozen=True)
class ItlSlos:
    """The ITL SLO of each request class, in seconds (the worker's flags)."""

    interactive_s: float
    batch_s: float

    def of(self, request_class: RequestClass) -> float:
        return self.batch_s if request_class is RequestClass.BATCH else self.interactive_s


@dataclass
class BatchWindow:
    """Engine steps and decode tokens since `start`, all under cap `cap` (or not)."""

    start: float  # monotonic time the window began
    cap: int  # the cap this window measures
    steps: int = 0
    peak_running: int = 0
    peak_waiting: int = 0
    tokens: int = 0  # decode tokens (a request's second token onwards)
    gap_s: float = 0.0  # the time those tokens took, summed per request
    classes: set[RequestClass] = field(default_factory=set)  # of the requests that decoded
    off_cap: bool = False  # a step ran under another cap, or above this one
    decode_tokens: int = 0  # tokens of the pure decode steps (one per running request)
    decode_s: float = 0.0  # those steps' compute time
    step_s: float = 0.0  # every step's compute time (decode and prefill)
    timed_steps: int = 0  # the steps behind it

    def restart(self, now: float, cap: int) -> None:
        """A fresh window from `now` measuring `cap` (the same object: feeders keep it)."""
        self.start, self.cap = now, cap
        self.steps = self.peak_running = self.peak_waiting = self.tokens = 0
        self.gap_s = 0.0
        self.classes = set()
        self.off_cap = False
        self.decode_tokens, self.decode_s = 0, 0.0
        self.step_s, self.timed_steps = 0.0, 0

    def step(
        self, running: int, waiting: int, max_batch: int, took_s: float = 0.0, prefill: int = 0
    ) -> None:
        """One engine step: its counts after it, the cap it ran under, its compute time and
        the prompt tokens it prefilled (0: a pure decode step, `running` tokens)."""
        self.steps += 1
        if took_s > 0:
            self.step_s += took_s
            self.timed_steps += 1
        if prefill == 0 and took_s > 0 and running > 0:
            self.decode_tokens += running
            self.decode_s += took_s
        self.peak_running = max(self.peak_running, running)
        self.peak_waiting = max(self.peak_waiting, waiting)
        if max_batch != self.cap or running > self.cap:
            self.off_cap = True

    def token(self, n: int, gap_s: float | None, request_class: RequestClass) -> None:
        """`n` tokens of one request, `gap_s` after its previous one (None: its first)."""
        if gap_s is None:
            return
        self.tokens += n
        self.gap_s += gap_s
        self.classes.add(request_class)

    def throughput(self) -> float | None:
        """Decode tokens/s of the pure decode steps; None when no such step was timed."""
        return self.decode_tokens / self.decode_s if self.decode_s > 0 else None

    def observation(self, slos: ItlSlos) -> BatchObservation:
        return BatchObservation(
            running=self.peak_running,
            tokens=self.tokens,
            steps=self.steps,
            itl_s=self.gap_s / self.tokens if self.tokens else None,
            throughput=self.throughput(),
            itl_slos_s=tuple(sorted(slos.of(c) for c in self.classes)),
            waiting=self.peak_waiting,
            mean_step_s=self.step_s / self.timed_steps if self.timed_steps else None,
        )


@dataclass(frozen=True)
class Tick:
    """What one tick did: the policy's decision, or why the window was not judged."""

    decision: BatchDecision | None  # None: the window was dropped (`skipped` says why)
    skipped: str | None = None

    @property
    def max_batch(self) -> int | None:
        return self.decision.max_batch if self.decision is not None else None


class LocalAutoscaler:
    """Algorithm 1's state between ticks, and the window being measured."""

    def __init__(self, limits: BatchLimits, slos: ItlSlos, now: float) -> None:
        self.limits = limits
        self.slos = slos
        self.state: BatchState = initial_state(limits, start=limits.engine_max)
        self.window = BatchWindow(now, self.state.max_batch)
        self.last: BatchDecision | None = None  # the last judged window's decision
        self.idle_since: float | None = None  # the tick after which no engine step ran
        self.ticked = (now, 0)  # the last tick's time and the window's steps then

    @property
    def max_batch(self) -> int:
        """The cap the engine should run under now."""
        return self.state.max_batch

    @property
    def latency_room(self) -> int:
        """The largest batch known to meet the ITL SLO (cascade_autoscaler.latency_room)."""
        return latency_room(self.state.room, self.state.max_batch, self.limits.engine_max)

    def tick(self, now: float) -> Tick:
        """Judge the window up to `now`; the caller applies `max_batch` when it changed."""
        last_at, last_steps = self.ticked
        tick = self._judge(now, last_at, last_steps)
        self.ticked = (now, self.window.steps)
        return tick

    def _judge(self, now: float, last_at: float, last_steps: int) -> Tick:
        window = self.window
        if window.off_cap:
            window.restart(now, self.max_batch)
            return Tick(None, f"cap {window.cap} not in force yet: window dropped")
        if window.peak_running == 0 or window.steps == last_steps:
            # Idle: nothing ran, or no step since the last tick (a thin window left over
            # from the end of a burst is dropped, not carried into the next one).
            if self.idle_since is None:
                self.idle_since = last_at
            reset = after_idle(self.state, now - self.idle_since, self.limits)
            if reset is not None:
                self.state = reset[0]
            window.restart(now, self.max_batch)
            return Tick(reset[1]) if reset is not None else Tick(None, "idle")
        self.idle_since = None
        self.state, decision = step(self.state, window.observation(self.slos), self.limits)
        if decision.measured:
            self.last = decision
            window.restart(now, decision.max_batch)
        return Tick(decision)
