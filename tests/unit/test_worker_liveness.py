"""The worker's engine stall check (issue 34 item 4): readiness fails while the engine
holds requests and no step ends for the bound; an idle engine never stalls."""

from __future__ import annotations

from cascade_worker.serving.liveness import Liveness


def test_busy_without_a_step_for_the_bound_is_stalled_until_a_step_ends() -> None:
    live = Liveness(stall_s=10.0)
    assert live.stall(0.0, busy=True) is None  # busy from now
    assert live.stall(9.9, busy=True) is None
    why = live.stall(10.0, busy=True)
    assert why is not None and "no step ended for 10s" in why
    live.stepped(12.0)
    assert live.stall(12.5, busy=True) is None and live.steps == 1


def test_an_idle_engine_never_stalls_and_busy_time_starts_when_work_comes() -> None:
    live = Liveness(stall_s=10.0)
    live.stepped(0.0)
    assert live.stall(100.0, busy=False) is None
    assert live.stall(200.0, busy=True) is None  # became busy at 200, not stalled since 0
    assert live.stall(209.0, busy=True) is None
    assert live.stall(210.0, busy=True) is not None


def test_zero_turns_it_off() -> None:
    live = Liveness(stall_s=0.0)
    live.stall(0.0, busy=True)
    assert live.stall(1e6, busy=True) is None
