"""The closed-set cause of each tick (the metric label), driven through `decide` the
way the operator drives it, plus the precedence rules of `cause_of` alone."""

from __future__ import annotations

import pytest
from test_autoscaler_policy import NO_DOWN_WINDOW, TICK, Sim, behavior, fleet, pods, queue

from cascade_autoscaler.behavior import Outcome, Reason
from cascade_autoscaler.cause import Cause, Moves, cause_of
from cascade_autoscaler.policy import AutoscaleSpec


def test_interactive_load_up_then_steady_then_idle_down() -> None:
    sim = Sim(AutoscaleSpec(1, 20, behavior=NO_DOWN_WINDOW), fleet(10))
    assert sim.tick(0.0, demand=7).cause is Cause.STEADY
    up = sim.tick(TICK, demand=9)  # IBP 0.9 > 0.8
    assert (up.cause, up.replicas, up.ibp) == (Cause.INTERACTIVE_BACKPRESSURE, 13, 0.9)
    assert sim.tick(2 * TICK, demand=9).cause is Cause.STEADY
    down = sim.tick(3 * TICK, demand=2)
    assert down.cause is Cause.INTERACTIVE_IDLE and down.replicas < 13


def test_batch_queue_is_batch_backpressure_then_the_window_holds_it() -> None:
    sim = Sim(AutoscaleSpec(1, 20), fleet(2))
    rec = sim.tick(0.0, demand=1, q=queue(30, 0.0))
    assert rec.cause is Cause.BATCH_BACKPRESSURE and rec.bbp == 1
    held = sim.tick(TICK, demand=1)  # queue gone: the 300 s down window holds the count
    assert held.cause is Cause.SCALE_DOWN_STABILIZED


def test_a_batch_queue_that_empties_without_a_window_is_batch_drained() -> None:
    sim = Sim(AutoscaleSpec(1, 20, behavior=NO_DOWN_WINDOW), fleet(2))
    sim.tick(0.0, demand=1, q=queue(30, 0.0))
    assert sim.tick(TICK, demand=1).cause is Cause.BATCH_DRAINED


def test_behavior_and_bounds_name_themselves() -> None:
    limited = Sim(
        AutoscaleSpec(1, 30, behavior=behavior(scaleUp={"policies": [pods(2, 60)]})), fleet(4)
    )
    assert limited.tick(0.0, demand=20).cause is Cause.SCALE_UP_LIMIT
    capped = Sim(AutoscaleSpec(1, 5), fleet(1))
    assert capped.run(0.0, 10, demand=50)[-1].cause is Cause.TOO_MANY_REPLICAS
    floor = Sim(AutoscaleSpec(1, 10), fleet(3))
    assert floor.run(0.0, 40)[-1].cause is Cause.TOO_FEW_REPLICAS
    paused = Sim(AutoscaleSpec(2, 10), fleet(0))
    assert paused.tick(0.0, demand=5).cause is Cause.SCALING_DISABLED


def test_keep_alive_to_zero_and_back_from_zero() -> None:
    spec = AutoscaleSpec(0, 10, keep_alive_s=60, behavior=NO_DOWN_WINDOW)
    sim = Sim(spec, fleet(1))
    causes = [sim.tick(t * TICK).cause for t in range(8)]
    assert Cause.KEEP_ALIVE_EXPIRED in causes
    assert causes[-1] is Cause.STEADY and sim.fleet.replicas == 0
    back = Sim(
        AutoscaleSpec(0, 10, behavior=behavior(scaleUp={"selectPolicy": "Disabled"})), fleet(0)
    )
    assert back.tick(0.0, demand=1).cause is Cause.SCALE_FROM_ZERO


def test_every_cause_is_a_documented_label() -> None:
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "observability.md").read_text()
    missing = [c.value for c in Cause if f"`{c.value}`" not in doc]
    assert not missing


READY = Outcome(5, 5, Reason.READY_FOR_NEW_SCALE, Reason.DESIRED_WITHIN_RANGE, False)


@pytest.mark.parametrize(
    ("moves", "outcome", "cause"),
    [
        (Moves(3, 5, 2, 2, False, False), READY, Cause.INTERACTIVE_BACKPRESSURE),
        (Moves(3, 5, 0, 2, False, False), READY, Cause.BATCH_BACKPRESSURE),
        (Moves(6, 5, -1, 0, False, False), READY, Cause.INTERACTIVE_IDLE),
        (Moves(6, 5, 0, -1, False, False), READY, Cause.BATCH_DRAINED),
        (Moves(1, 0, -1, 0, True, False), READY, Cause.KEEP_ALIVE_EXPIRED),
        (Moves(0, 1, 1, 0, False, True), READY, Cause.SCALE_FROM_ZERO),
        (Moves(5, 5, 3, 0, False, False), READY, Cause.STEADY),
    ],
)
def test_precedence(moves: Moves, outcome: Outcome, cause: Cause) -> None:
    assert cause_of(moves, outcome) is cause
