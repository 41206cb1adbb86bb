"""The local autoscaler on one simulated instance: its window in, a batch cap out.

The policy is `cascade_autoscaler.batch_size.step` (Chiron Algorithm 1), unchanged. This
is the worker's glue (cascade_worker.serving.local_autoscaler) restated for the fluid
instance, with the same rules so a simulated cap moves as a real one would:

- start at the engine's max batch (no violation seen yet);
- a window in which more requests ran than its cap (a lowered cap still draining)
  measures the old batch: dropped, a fresh one starts;
- an idle window is dropped (the next burst must not divide by idle time), and idle
  since `idle_reset_s` the cap goes back to the engine limit (`after_idle`);
- a window the policy cannot judge (too few tokens or steps) keeps accumulating;
- the observation: peak running and waiting, decode tokens, mean ITL (summed gaps over
  tokens), the decode speed of the stretches without prefill (None when there were
  none), the mean step time, and the ITL SLOs of the classes that decoded.
"""

from __future__ import annotations

from collections.abc import Mapping

from cascade_autoscaler.batch_size import (
    BatchLimits,
    BatchObservation,
    after_idle,
    initial_state,
    step,
)
from cascade_autoscaler.latency_room import latency_room
from cascade_sim.config import BATCH, INTERACTIVE, Slo
from cascade_sim.instance import Instance


def start(inst: Instance, limits: BatchLimits) -> None:
    """Turn the local autoscaler on for `inst`, at the engine's limit."""
    inst.bstate = initial_state(limits, start=limits.engine_max)
    _follow(inst, limits)
    inst.restart_window(inst.last, inst.cap)


def _follow(inst: Instance, limits: BatchLimits) -> None:
    """The engine's cap and the reported latency room, from the controller's state."""
    assert inst.bstate is not None
    inst.cap = inst.bstate.max_batch
    inst.room = latency_room(inst.bstate.room, inst.cap, limits.engine_max)


def observation(inst: Instance, slos: Mapping[str, Slo]) -> BatchObservation:
    bounds = []
    if inst.w_int and slos[INTERACTIVE].itl_s is not None:
        bounds.append(slos[INTERACTIVE].itl_s)
    if inst.w_bat and slos[BATCH].itl_s is not None:
        bounds.append(slos[BATCH].itl_s)
    tokens = inst.w_tokens
    return BatchObservation(
        running=inst.w_run,
        tokens=int(tokens),
        steps=inst.w_steps,
        itl_s=inst.w_gap / tokens if tokens > 0 else None,
        throughput=inst.w_dec_tokens / inst.w_dec_s if inst.w_dec_s > 0 else None,
        itl_slos_s=tuple(sorted(b for b in bounds if b is not None)),
        waiting=inst.w_wait,
        mean_step_s=inst.w_busy_s / inst.w_steps if inst.w_steps > 0 else None,
    )


def tick(inst: Instance, now: float, limits: BatchLimits, slos: Mapping[str, Slo]) -> float | None:
    """Judge the window up to `now` (the instance advanced to it) and set the new cap.

    Returns the window's decode throughput when it was judged (what the instance would
    report as tokens/s), None otherwise.
    """
    assert inst.bstate is not None
    inst.touch()
    idle = inst.w_run == 0 or inst.running + inst.waiting == 0
    if idle:  # nothing runs now (a thin window left from a burst is dropped with it)
        if inst.idle_since is None:
            inst.idle_since = inst.w_start if inst.w_run == 0 else now
        reset = after_idle(inst.bstate, now - inst.idle_since, limits)
        if reset is not None:
            inst.bstate = reset[0]
            _follow(inst, limits)
    else:
        inst.idle_since = None
    if inst.w_off or idle:
        inst.restart_window(now, inst.cap)
        return None
    obs = observation(inst, slos)
    inst.bstate, decision = step(inst.bstate, obs, limits)
    if not decision.measured:
        return None
    _follow(inst, limits)  # the decision's cap is the new state's
    inst.restart_window(now, inst.cap)
    return obs.throughput
