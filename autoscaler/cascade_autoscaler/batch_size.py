"""Chiron's local autoscaler (Algorithm 1): one worker's max batch from its own backpressure.

Each tick (a change of the running queue, or a short fixed tick) the worker summarises
the window since the last measured tick and calls `step`:

    LBP = mean ITL / tightest ITL SLO among running requests
    TBP = throughput at the previous batch cap / throughput at the current one
    backpressure = max(LBP, TBP)
    backpressure < 1:  value <- alpha · value / backpressure + (1 - alpha) · value
    otherwise:         value <- value / 2                          (alpha = 0.5)

so growth is fast when far from the SLO and slows as backpressure approaches 1. The
engine gets `floor(value)`, bounded to [1, engine limit]. Where the paper is vague:

- **Continuous value.** The EWMA runs on a real number; only the engine's cap is an
  integer (rounding each tick would freeze small batches: 1 · 1.4 rounds back to 1).
- **"Previous throughput"** is the mean throughput under the last *different* cap
  (`ref_batch`); "current" the mean so far under this cap (running over up to `samples`
  binding windows, an EWMA after), re-checked each tick with one more sample so a noisy
  first window fades. No reference yet: TBP is None, LBP alone decides.
- **TBP brakes; it does not pace a gain.** Read literally, a clear gain after growing
  (TBP = 1/step on a linear stretch) enters max(LBP, TBP) and shrinks the next step, so
  the steps decay geometrically and the batch stalls far below the inflection (from 1 on
  a curve peaking at 63 it stopped at 29, in simulation). After a growth: TBP < 1 - tol
  paces the next step by LBP alone; TBP in [1 - tol, 1] holds (growth no longer pays:
  the inflection); TBP in (1, 1 + margin] steps back to the reference cap, which did at
  least as well; TBP > 1 + margin halves (margin: see Noise; both wait for a second
  window at the cap). After a decrease: a drop beyond the tolerance is
  the expected price of halving on the rising side, not backpressure (literally, it
  would halve again, down to 1), so LBP paces; a rise beyond it means we were past the
  inflection, and max(LBP, TBP) paces a cautious climb back, as in the paper; in
  between, hold.
- **Noise: a throughput loss must be told apart from the windows' own spread.** One
  0.5 s window of a busy engine swings by 10-20 %; read raw, one low window halved the
  cap, and a worker under a tight SLO sawed between half and full of the batch that
  meets it. So TBP halves only beyond `margin = max(tolerance, noise_z · cv · sqrt(1/n +
  1/n_ref))` (`cv` of the current cap's per-window throughputs, `n` and `n_ref` the
  windows behind the two means, capped at `samples`: about 95 %). With one window at a
  cap a loss is *unconfirmed* and the cap holds for a second window; a loss after a growth
  within the margin steps back to the reference cap rather than halving. LBP is neither
  smoothed nor confirmed: LBP >= 1 halves on the window that shows it (but see Prefill).
- **Thin windows.** A window with fewer than `min_tokens` decoded tokens or fewer than
  `min_steps` engine steps is not judged (`measured=False`; the worker keeps
  accumulating it). Under a CPU quota (100 ms CFS period) a step that exhausts the quota
  waits out the period, so a 0.5 s window of three mixed steps read LBP 1.0-4.7 where
  the requests' own mean ITL met the SLO (77 halvings in one bench run); eight steps
  span several periods.
- **Idle.** No running requests: hold and keep the reference; after `idle_reset_s`,
  `after_idle` restarts at the limit (a cap halved in one burst held the next one back).
- **Binding.** Throughput measures the cap only when the cap limits the batch (running
  >= cap, or requests waiting). Otherwise TBP is None, the cap does not grow (an
  unbinding cap would drift to the limit, and the next burst would run at a size never
  tried), and a halving halves the batch actually running, not the idle cap.
- **Start.** At 1 by default (slow start); the worker and the simulator use the limit.
- **Units.** Every throughput sample of a state is the speed of pure decode steps in
  CPU time; a window with no such step has none (`throughput=None`), not a wall-clock
  substitute (10-17x lower under a CPU quota: TBP read 10-17 and halved the cap).
- **SLO.** No running request carries an ITL SLO: `default_itl_slo_s`, or no latency
  bound at all (LBP = 0) when that is None.
- **Prefill.** LBP >= 1 does not halve where prompt chunks make most of each step
  (`prefill_share`: halving would cut throughput, not ITL).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from cascade_autoscaler.latency_room import room_after
from cascade_autoscaler.prefill_share import DecodeSpeeds, decode_step_s, halving_outlook, remember

Action = Literal["grow", "halve", "step_back", "hold", "reset"]


@dataclass(frozen=True)
class BatchLimits:
    engine_max: int  # the engine's own max batch: the cap never goes above it
    alpha: float = 0.5  # EWMA smoothing factor of Algorithm 1
    tolerance: float = 0.05  # TBP within 1 ± tolerance is "flat" (noise band)
    min_tokens: int = 8  # a window with fewer decoded tokens is not judged
    min_steps: int = 8  # nor one of fewer engine steps (see Thin windows)
    samples: int = 8  # throughput is averaged over up to this many windows per cap
    noise_z: float = 2.0  # a throughput loss must exceed this many standard errors of TBP
    default_itl_slo_s: float | None = None  # used when no running request has an ITL SLO
    idle_reset_s: float | None = 10.0  # idle this long: start over at the limit (None: never)


@dataclass(frozen=True)
class BatchObservation:
    """One window of the engine, since the last measured tick."""

    running: int  # requests in the running batch (peak over the window)
    tokens: int  # decode tokens produced in the window
    steps: float  # engine steps in the window (fractional in the simulator's fluid model)
    itl_s: float | None  # mean inter-token latency over the window; None: no tokens
    throughput: float | None  # decode tokens/s of the batch; None: not measured (see Units)
    itl_slos_s: tuple[float, ...] = ()  # ITL SLOs of the running requests
    waiting: int = 0  # requests admitted but held back (by the cap or memory)
    mean_step_s: float | None = None  # mean compute time of the window's steps; None: unknown


@dataclass(frozen=True)
class BatchState:
    value: float  # the continuous EWMA max batch; the engine gets floor(value)
    ref_batch: int | None = None  # the last different cap that was measured binding
    ref_throughput: float | None = None  # its mean throughput: "previous throughput"
    throughput: float | None = None  # mean throughput measured at the current cap
    samples: int = 0  # binding windows behind that mean
    variance: float = 0.0  # their (population) variance, running then EWMA like the mean
    ref_samples: int = 1  # windows behind ref_throughput (capped at limits.samples)
    decode: DecodeSpeeds = ()  # pure decode speed by batch, kept across caps (see Prefill)
    room: int | None = None  # latency_room.py's room; None: no LBP halving yet

    @property
    def max_batch(self) -> int:
        return max(1, math.floor(self.value))


@dataclass(frozen=True)
class BatchDecision:
    max_batch: int  # the cap to apply to the engine now
    lbp: float | None  # latency backpressure; None when the window was not judged
    tbp: float | None  # throughput backpressure; None when nothing comparable
    backpressure: float | None  # max(LBP, TBP)
    action: Action
    reason: str
    measured: bool  # False: the window was too thin; keep accumulating it


def initial_state(limits: BatchLimits, start: int | None = None) -> BatchState:
    """The first state: `start` (default 1, slow start), within bounds."""
    return BatchState(value=float(_bound(start or 1, limits)))


def tightest_slo(obs: BatchObservation, limits: BatchLimits) -> float | None:
    """The smallest ITL SLO among running requests: the batch serves them all."""
    positive = [s for s in obs.itl_slos_s if s > 0]
    return min(positive) if positive else limits.default_itl_slo_s


def latency_backpressure(obs: BatchObservation, limits: BatchLimits) -> float:
    slo = tightest_slo(obs, limits)
    if slo is None or obs.itl_s is None:
        return 0.0
    return obs.itl_s / slo


def throughput_backpressure(
    state: BatchState, current: float | None, limits: BatchLimits
) -> tuple[float | None, str]:
    """TBP of the current cap's mean throughput against the last different cap's mean,
    or None with why the two are not comparable."""
    if current is None:
        return None, "cap not binding or not measured yet"
    if state.ref_batch is None or state.ref_throughput is None:
        return None, "no reference throughput yet"
    if current <= 0:
        return None, "no throughput measured"
    tbp = state.ref_throughput / current
    if state.max_batch < state.ref_batch and tbp > 1 + limits.tolerance:
        return None, "throughput fell after a decrease, as expected"
    return tbp, f"vs batch {state.ref_batch}"


def noise_margin(state: BatchState, limits: BatchLimits) -> float | None:
    """How far above 1 TBP must be to count as a loss, from the spread of the current
    cap's windows (see Noise in the module docstring); None with one window: unknown."""
    n = min(state.samples, max(1, limits.samples))
    if n < 2 or state.throughput is None or state.throughput <= 0:
        return None
    cv = math.sqrt(max(0.0, state.variance) * n / (n - 1)) / state.throughput
    ref_n = min(max(1, state.ref_samples), max(1, limits.samples))
    return max(limits.tolerance, limits.noise_z * cv * math.sqrt(1 / n + 1 / ref_n))


def step(
    state: BatchState, obs: BatchObservation, limits: BatchLimits
) -> tuple[BatchState, BatchDecision]:
    """One tick of Algorithm 1: the next state and the decision to apply and export."""
    state = replace(state, value=float(_bound(state.value, limits)))
    cap = state.max_batch
    if obs.running <= 0 or obs.itl_s is None:
        return state, _hold(cap, "idle: no running requests", measured=False)
    if obs.tokens < limits.min_tokens:
        why = f"too few tokens to judge ({obs.tokens} < {limits.min_tokens})"
        return state, _hold(cap, why, measured=False)
    if obs.steps < limits.min_steps:
        why = f"too few steps to judge ({obs.steps:.0f} < {limits.min_steps})"
        return state, _hold(cap, why, measured=False)

    binding = obs.running >= cap or obs.waiting > 0
    if obs.throughput is not None:
        state = replace(state, decode=remember(state.decode, obs.running, obs.throughput))
        state = _with_sample(state, obs.throughput, limits.samples) if binding else state
    lbp = latency_backpressure(obs, limits)
    tbp, tbp_note = throughput_backpressure(state, state.throughput if binding else None, limits)
    bp = max(lbp, tbp if tbp is not None else 0.0)
    grew = state.ref_batch is not None and cap > state.ref_batch
    margin = noise_margin(state, limits) if tbp is not None else None
    loss = tbp is not None and tbp > 1 and (grew or tbp > 1 + limits.tolerance)
    tail = f"LBP {lbp:.2f}, TBP {'n/a' if tbp is None else f'{tbp:.2f}'} ({tbp_note}"
    tail += f", noise margin {margin:.2f})" if margin is not None else ")"

    value = state.value
    action: Action = "hold"
    tbp_loss = tbp is not None and margin is not None and tbp > 1 + margin
    half = None  # what half the batch would do: asked only of an ITL over its SLO
    if lbp >= 1:
        decode_s = decode_step_s(state.decode, obs.running)
        half = halving_outlook(obs.itl_s, tightest_slo(obs, limits), decode_s, obs.mean_step_s)
    if half is not None and not tbp_loss and not half.helps:
        assert half.decode_share is not None and half.itl_at_half_s is not None
        reason = (
            f"ITL over SLO but prefill makes it: at half the batch ITL would still be "
            f"{1e3 * half.itl_at_half_s:.0f} ms (decode {half.decode_share:.0%} of a step): "
            f"hold {cap}; {tail}"
        )
    elif lbp >= 1 or tbp_loss:
        base = state.value if binding else min(state.value, float(obs.running))
        value, action = base / 2, "halve"
        why = "ITL over SLO" if lbp >= 1 else "throughput fell beyond noise as the batch grew"
        reason = f"{why}: halve {math.floor(base)} -> {_cap(value, limits)}; {tail}"
    elif loss and margin is None:
        reason = f"throughput fell in one window at batch {cap}: unconfirmed, hold; {tail}"
    elif not binding:
        reason = f"cap {cap} not binding ({obs.running} running): no evidence to grow; {tail}"
    elif grew and tbp is not None and tbp > 1 and state.ref_batch is not None:
        value, action = float(state.ref_batch), "step_back"
        reason = f"growing to {cap} did not pay: back to {state.ref_batch}; {tail}"
    elif tbp is not None and tbp >= 1 - limits.tolerance:
        reason = f"throughput flat at batch {cap}: the inflection; {tail}"
    elif cap >= limits.engine_max:
        reason = f"at the engine limit {limits.engine_max}; {tail}"
    else:
        # A clear gain from growing argues for growth: it paces nothing (see docstring).
        pace = lbp if grew else bp
        value, action = _ewma_grow(state.value, pace, limits), "grow"
        reason = f"backpressure {pace:.2f} < 1: grow {cap} -> {_cap(value, limits)}; {tail}"

    value, halved = float(_bound(value, limits)), action == "halve" and lbp >= 1
    room = room_after(state.room, halved, lbp < 1, _cap(value, limits), obs.running)
    new = replace(state, value=value, room=room)
    if new.max_batch != cap:
        # Leaving this cap: its mean throughput becomes the reference, if it was measured.
        measured = state.throughput is not None
        new = replace(
            new,
            ref_batch=cap if measured else None,
            ref_throughput=state.throughput,
            ref_samples=max(1, min(state.samples, limits.samples)),
            throughput=None,
            samples=0,
            variance=0.0,
        )
    decision = BatchDecision(new.max_batch, lbp, tbp, bp, action, reason, measured=True)
    return new, decision


def _with_sample(state: BatchState, throughput: float, window: int) -> BatchState:
    """Running mean and variance of the current cap's throughput (Welford), EWMAs of
    weight 1/window later: with w = 1/n the variance update is exactly Welford's."""
    n = state.samples + 1
    old = state.throughput if state.throughput is not None else throughput
    w = 1 / min(n, max(1, window))
    delta = throughput - old
    variance = (1 - w) * (state.variance + w * delta * delta)
    return replace(state, throughput=old + w * delta, samples=n, variance=variance)


def _ewma_grow(value: float, backpressure: float, limits: BatchLimits) -> float:
    """Algorithm 1, line 10: alpha · (1/bp) · value + (1 - alpha) · value; bp 0 means unbounded."""
    if backpressure <= 0:
        return float(limits.engine_max)
    return limits.alpha * value / backpressure + (1 - limits.alpha) * value


def _bound(value: float, limits: BatchLimits) -> float:
    """Within [1, engine_max]; the float survives so the EWMA keeps its fraction."""
    return min(max(value, 1.0), float(max(1, limits.engine_max)))


def _cap(value: float, limits: BatchLimits) -> int:
    return max(1, math.floor(_bound(value, limits)))


def after_idle(
    state: BatchState, idle_s: float, limits: BatchLimits
) -> tuple[BatchState, BatchDecision] | None:
    """Back to the engine limit after `idle_s` without running requests (see Idle)."""
    reset = limits.idle_reset_s
    if reset is None or idle_s < reset or state.max_batch >= limits.engine_max:
        return None
    new = replace(initial_state(limits, start=limits.engine_max), decode=state.decode)
    why = f"idle {idle_s:.0f} s: back to the engine limit"
    return new, BatchDecision(new.max_batch, None, None, None, "reset", why, False)


def _hold(cap: int, reason: str, measured: bool) -> BatchDecision:
    return BatchDecision(cap, None, None, None, "hold", reason, measured)
