"""Zigzag scheduling (BlitzScale §5.2): the exact ILP optimum, best-effort, the timeline."""

from __future__ import annotations

import itertools
import time

import pytest

from cascade_planner.zigzag import (
    LoadLimit,
    Schedule,
    best_effort,
    layer_arrival,
    layers_loaded,
    make_schedule,
    solve,
    violations,
)
from cascade_planner.zigzag_timeline import PendingQueue, compare, simulate_timeline, timeline

MODES: tuple[LoadLimit, ...] = ("zigzag", "contiguous")


def brute_force(
    num_layers: int,
    num_batches: int,
    load_time: float,
    loaded_at_start: int,
    mode: LoadLimit,
    weights: list[float] | None = None,
) -> float:
    """The least objective over every T sequence that meets C1-C3."""
    best = float("inf")
    for targets in itertools.product(range(num_layers + 1), repeat=num_batches):
        s = make_schedule(
            targets,
            num_layers,
            load_time,
            loaded_at_start=loaded_at_start,
            weights=weights,
            load_limit=mode,
        )
        if not s.violations():
            best = min(best, s.objective)
    return best


def test_figure_12_zigzag_saves_the_papers_ten_units_over_best_effort() -> None:
    # 7 layers, loading a layer takes 6 layer computations, execution starts once layer 0
    # is on inst.1 (t = 0), six batches queued at t = 0 (req 1-6 in the paper).
    c = compare(7, 6, 6)
    assert c.best_effort.configs == ((1, 6),) * 6  # "req 1-6 can only use (1, 6)"
    assert c.best_effort_timeline.finish == (7, 13, 19, 25, 31, 37)
    assert c.zigzag.targets == (1, 2, 2, 3, 4, 4)
    assert c.zigzag.violations() == []
    assert c.zigzag_timeline.finish == (7, 12, 17, 21, 24, 27)
    # The paper: "request 3's latency is 17 (12 for the request 1 and 2's execution and 5
    # for its own)": the source ends batch 2 at 12 and batch 3 at 17, as here.
    assert c.zigzag_timeline.finish[2] == 17
    # The paper: "the overall inference time decreases from 32 to 22". Our makespans are
    # 37 and 27: the same 10-unit saving, both 5 later. No reading that also gives batch 3
    # = 17 from t = 0 can make 32 a makespan: six (1, 6) batches keep the source busy for
    # 36 units after t = 1. The paper's 32 and 22 equal the last batch's latency counted
    # from t = 5, when inst.1 starts its first layer in both schedules.
    assert c.best_effort_timeline.makespan == 37
    assert c.zigzag_timeline.makespan == 27
    assert c.best_effort_timeline.makespan - c.zigzag_timeline.makespan == 32 - 22
    assert c.zigzag_timeline.source_waits == (1, 0, 0, 0, 0, 0)  # only the head start
    assert c.zigzag.objective == pytest.approx(17.0)
    assert c.best_effort.objective == pytest.approx(21.0)


def test_figure_12_text_reading_and_the_printed_c3() -> None:
    # The text's (2, 5) for requests 2-5 (and 6): meets the zigzag C3, total time 32.
    text = make_schedule([1, 2, 2, 2, 2, 2], 7, 6)
    assert text.violations() == []
    assert timeline(text).finish == (7, 12, 17, 22, 27, 32)
    # The printed C3 (target clock, back to back) rejects batches 2-4 (layer 1 lands at 6,
    # after 1, 3, 5 units of target work) and cannot zigzag at all: its optimum is
    # best-effort's all-(1, 6).
    printed = make_schedule([1, 2, 2, 2, 2, 2], 7, 6, load_limit="contiguous")
    assert [v[:11] for v in printed.violations()] == ["C3: batch 2", "C3: batch 3", "C3: batch 4"]
    assert solve(7, 6, 6, load_limit="contiguous").configs == ((1, 6),) * 6


@pytest.mark.parametrize("mode", MODES)
def test_every_solved_schedule_meets_c1_to_c3(mode: LoadLimit) -> None:
    for num_layers, num_batches, load_time, a in itertools.product(
        range(1, 9), range(0, 7), (0, 1, 2, 3.5, 6), (0, 1, 2)
    ):
        s = solve(num_layers, num_batches, load_time, loaded_at_start=a, load_limit=mode)
        assert len(s.configs) == num_batches
        assert s.violations() == [], (num_layers, num_batches, load_time, a, s.configs)
        if load_time > 0 and num_batches:
            assert s.targets[0] <= a  # execution starts with the layers there at t = 0


@pytest.mark.parametrize("mode", MODES)
def test_dp_optimum_equals_brute_force(mode: LoadLimit) -> None:
    for num_layers, num_batches, load_time, a in itertools.product(
        range(1, 5), range(1, 5), (0, 1, 2.5), (0, 1, 2)
    ):
        got = solve(num_layers, num_batches, load_time, loaded_at_start=a, load_limit=mode)
        want = brute_force(num_layers, num_batches, load_time, a, mode)
        assert got.objective == pytest.approx(want), (num_layers, num_batches, load_time, a)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("weights", [[2.0, 0.5, 1.0, 1.5], [0.3, 1.7, 0.9, 1.1], [1, 1, 3, 1]])
def test_weighted_dp_optimum_equals_brute_force(mode: LoadLimit, weights: list[float]) -> None:
    for num_layers, load_time in itertools.product((3, 4), (1, 2.5)):
        got = solve(num_layers, 4, load_time, weights=weights, load_limit=mode)
        assert got.violations() == []
        want = brute_force(num_layers, 4, load_time, 1, mode, weights)
        assert got.objective == pytest.approx(want)


def test_all_one_weights_equal_no_weights() -> None:
    for mode in MODES:
        for num_layers, num_batches, load_time in itertools.product((4, 7, 12), (3, 6), (1, 6)):
            plain = solve(num_layers, num_batches, load_time, load_limit=mode)
            ones = solve(
                num_layers, num_batches, load_time, weights=[1.0] * num_batches, load_limit=mode
            )
            assert ones.configs == plain.configs
            assert ones.objective == plain.objective
    assert best_effort(7, 6, 6, weights=[1] * 6).configs == best_effort(7, 6, 6).configs


def test_checker_catches_each_constraint() -> None:
    def kinds(schedule: Schedule) -> set[str]:
        return {v[:2] for v in schedule.violations()}

    ok = make_schedule([1, 2, 2], 7, 6)
    assert kinds(ok) == set()
    assert kinds(Schedule(7, 6, ((1, 6), (2, 4), (2, 5)), 0.0)) == {"C1"}  # 2 + 4 != 7
    assert kinds(Schedule(7, 6, ((1, 6), (-1, 8)), 0.0)) == {"C1"}
    assert kinds(make_schedule([1, 6, 0], 7, 0)) == {"C2"}  # 1 + 6 > S_1 = 6
    assert kinds(make_schedule([1, 3, 0], 7, 6)) == {"C3"}  # layer 2 lands at 12 > 6
    assert kinds(make_schedule([2, 0], 7, 6)) == {"C3"}  # T_1 > loaded_at_start
    contiguous = make_schedule([1, 2], 7, 6, load_limit="contiguous")
    assert kinds(contiguous) == {"C3"}  # layer 1 lands at 6 > 1 unit of target work
    heavy = make_schedule([1, 3], 7, 1, weights=[0.5, 1.0])
    assert kinds(heavy) == {"C2"}  # 0.5 + 3 > 0.5 * 6, though 1 + 3 <= 6 unweighted
    assert violations([(1, 6), (3, 4)], 7, 6)[0].startswith("C3: batch 2")


def test_solve_32_layers_12_batches_is_fast() -> None:
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        s = solve(32, 12, 6)
        best = min(best, time.perf_counter() - start)
    print(f"solve(32 layers, 12 batches, load_time 6): {best * 1e3:.1f} ms (best of 3)")
    assert s.violations() == []
    assert best < 0.040


def test_best_effort_stays_within_half_and_loaded_layers() -> None:
    for num_layers, num_batches, load_time, a in itertools.product(
        (1, 2, 7, 8, 32), (1, 6, 12), (0, 1, 2.5, 6), (0, 1, 2)
    ):
        s = best_effort(num_layers, num_batches, load_time, loaded_at_start=a)
        clock = 0.0
        for t, src in s.configs:
            assert t + src == num_layers
            assert t <= num_layers // 2
            assert t <= layers_loaded(clock, num_layers, load_time, a)
            clock += t
        for run in timeline(s).target_runs:
            assert run.start >= layer_arrival(run.layer, load_time, a)
    weighted = best_effort(7, 4, 2, weights=[3, 1, 1, 1])
    assert weighted.targets == (1, 2, 3, 3)  # batch 2 starts at t = 3: layers 0-1 there


def test_pending_queue_releases_waiters_of_a_layer_in_fifo_order() -> None:
    q = PendingQueue()
    q.wait(4, 1)
    q.wait(2, 2)
    q.wait(7, 1)
    assert len(q) == 3
    assert q.layer_arrived(1) == [4, 7]
    assert q.layer_arrived(1) == []
    assert q.layer_arrived(3) == []
    assert q.layer_arrived(2) == [2]
    assert len(q) == 0
    with pytest.raises(ValueError, match="already arrived"):
        q.wait(9, 2)


def test_timeline_runs_later_batches_while_one_waits_for_its_layer() -> None:
    # Batch 1 wants layers 0-2 (layer 1 lands at 4, layer 2 at 8); batches 2 and 3 have
    # what they need and go first, then the target zigzags back.
    tl = simulate_timeline([3, 1, 1], 5, 4)
    assert [(r.batch, r.layer, r.start) for r in tl.target_runs] == [
        (0, 0, 0),
        (1, 0, 1),
        (2, 0, 2),
        (0, 1, 4),
        (0, 2, 8),
    ]
    assert tl.target_done == (9, 2, 3)
    assert tl.source_start == (9, 11, 15)  # FIFO: batches 2 and 3 queue behind batch 1
    assert tl.finish == (11, 15, 19)
    assert tl.source_waits == (9, 0, 0)


def test_timeline_obeys_arrivals_order_and_fifo_on_every_solved_schedule() -> None:
    for num_layers, num_batches, load_time in itertools.product((4, 7, 16), (3, 6, 9), (1, 3, 6)):
        weights = [1.0 + (i % 3) * 0.5 for i in range(num_batches)]
        for w in (None, weights):
            s = solve(num_layers, num_batches, load_time, weights=w)
            tl = timeline(s)
            busy_until, next_layer = 0.0, [0] * num_batches
            for run in tl.target_runs:
                assert run.start >= busy_until - 1e-9
                assert run.start >= layer_arrival(run.layer, load_time) - 1e-9
                assert run.layer == next_layer[run.batch]
                next_layer[run.batch] += 1
                busy_until = run.end
            assert tuple(next_layer) == s.targets
            free = 0.0
            for i, src in enumerate(s.sources):
                if src:
                    assert tl.source_start[i] >= max(free, tl.target_done[i]) - 1e-9
                    free = tl.finish[i]


def test_zigzag_beats_best_effort_on_larger_models() -> None:
    for num_layers, num_batches, load_time in ((32, 12, 6), (32, 12, 3), (80, 12, 6)):
        c = compare(num_layers, num_batches, load_time)
        assert c.zigzag.objective < c.best_effort.objective
        assert c.zigzag_timeline.makespan < c.best_effort_timeline.makespan
        assert c.zigzag_timeline.mean_latency < c.best_effort_timeline.mean_latency


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        solve(0, 3, 6)
    with pytest.raises(ValueError):
        solve(7, 3, -1)
    with pytest.raises(ValueError):
        solve(7, 3, 6, weights=[1, 1])
    with pytest.raises(ValueError):
        best_effort(7, 2, 6, weights=[1, 0])
    with pytest.raises(ValueError):
        simulate_timeline([8], 7, 6)
    assert solve(7, 0, 6).configs == ()
