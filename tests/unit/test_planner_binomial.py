"""Binomial pipeline: step counts, one-send-one-receive per step, holders only, k-way orders."""

from __future__ import annotations

import math

import pytest

from cascade_api.scaleplan import Step, Transfer
from cascade_planner import (
    ScheduleViolation,
    binomial_schedule,
    circular_shift_orders,
    simulate,
    step_bound,
)
from cascade_planner.hypercube import index_schedule


def names(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("b", [1, 2, 3, 7, 8, 16])
def test_powers_of_two_take_b_plus_log_n_minus_one_steps(d: int, b: int) -> None:
    targets = names("t", (1 << d) - 1)
    plan = binomial_schedule(["s"], targets, b, k=1)
    assert len(plan.steps) == b + d - 1 == plan.bound
    replay = simulate(plan.steps, {"s": range(b)})  # raises on any broken rule
    assert replay.complete(targets, b)


def test_every_node_sends_and_receives_at_most_once_per_step() -> None:
    plan = binomial_schedule(["s"], names("t", 15), 12)
    for step in plan.steps:
        senders = [t.sender for t in step.transfers]
        receivers = [t.receiver for t in step.transfers]
        assert len(senders) == len(set(senders))
        assert len(receivers) == len(set(receivers))
    # Steady state: after the ramp every target receives in every step.
    middle = plan.steps[4:12]
    assert all(len(step.transfers) == 15 for step in middle)


def test_other_sizes_stay_within_the_documented_bound() -> None:
    worst = 0
    for n in range(2, 25):
        for b in range(1, 17):
            targets = names("t", n - 1)
            plan = binomial_schedule(["s"], targets, b)
            assert len(plan.steps) <= step_bound(n, b) == plan.bound, (n, b)
            assert simulate(plan.steps, {"s": range(b)}).complete(targets, b), (n, b)
            worst = max(worst, len(plan.steps) - (b + math.ceil(math.log2(n)) - 1))
    assert worst <= 1


@pytest.mark.parametrize(("k", "targets"), [(1, 7), (2, 6), (4, 4), (2, 7), (4, 12)])
def test_k_sources_split_targets_and_shift_orders(k: int, targets: int) -> None:
    b = 8
    sources = names("s", k)
    tgts = names("t", targets)
    plan = binomial_schedule(sources, tgts, b, k)
    replay = simulate(plan.steps, {s: range(b) for s in sources})
    assert replay.complete(tgts, b)
    assert [g.source for g in plan.groups] == sources
    assert sorted(t for g in plan.groups for t in g.targets) == sorted(tgts)
    sizes = [len(g.targets) for g in plan.groups]
    assert max(sizes) - min(sizes) <= 1
    # Source i starts at block i*ceil(b/k); each order is a permutation of all blocks.
    for i, order in enumerate(o.order for o in plan.block_orders):
        assert order[0] == i * math.ceil(b / k) and sorted(order) == list(range(b))
    # A sub-group only ever talks to itself.
    group_of = {p: g.source for g in plan.groups for p in [g.source, *g.targets]}
    for step in plan.steps:
        assert all(group_of[t.sender] == group_of[t.receiver] for t in step.transfers)
    assert len(plan.steps) <= plan.bound
    # The first step of every sub-group carries its own first block.
    firsts = {t.sender: t.block for t in plan.steps[0].transfers if t.sender in sources}
    assert firsts == {o.source: o.order[0] for o in plan.block_orders}


def test_two_way_shift_covers_the_model_across_subgroups_before_any_target_completes() -> None:
    b = 8
    plan = binomial_schedule(["s0", "s1"], names("t", 6), b, 2)
    replay = simulate(plan.steps, {"s0": range(b), "s1": range(b)})
    g0, g1 = plan.groups

    def held(t: str, step: int) -> set[int]:
        return {blk for blk, s in replay.arrivals[t].items() if s <= step}

    first_pair = min(
        s
        for s in range(len(plan.steps))
        if any(held(x, s) | held(y, s) == set(range(b)) for x in g0.targets for y in g1.targets)
    )
    first_single = min(max(replay.arrivals[t].values()) for t in g0.targets + g1.targets)
    assert first_pair < first_single


def test_circular_shift_orders_match_lambda_scale_algorithm_1() -> None:
    assert circular_shift_orders(4, 2) == [[0, 1, 2, 3], [2, 3, 0, 1]]
    assert circular_shift_orders(5, 2) == [[0, 1, 2, 3, 4], [3, 4, 0, 1, 2]]
    assert circular_shift_orders(8, 4)[3] == [6, 7, 0, 1, 2, 3, 4, 5]
    assert circular_shift_orders(2, 4) == [[0, 1], [1, 0], [0, 1], [0, 1]]  # k > b
    assert circular_shift_orders(0, 3) == [[], [], []]
    with pytest.raises(ValueError):
        circular_shift_orders(4, 0)


def test_simulate_rejects_broken_schedules() -> None:
    def step(*ts: tuple[str, str, int]) -> Step:
        return Step(transfers=[Transfer(sender=s, receiver=r, block=b) for s, r, b in ts])

    init = {"s": {0, 1}}
    with pytest.raises(ScheduleViolation, match="does not hold"):
        simulate([step(("a", "b", 0))], init)
    with pytest.raises(ScheduleViolation, match="sends twice"):
        simulate([step(("s", "a", 0), ("s", "b", 1))], init)
    with pytest.raises(ScheduleViolation, match="receives twice"):
        simulate([step(("s", "a", 0), ("c", "a", 1))], {"s": {0}, "c": {1}})
    # A block received in a step is forwarded only from the next step on.
    with pytest.raises(ScheduleViolation, match="does not hold"):
        simulate([step(("s", "a", 0), ("a", "b", 0))], init)
    with pytest.raises(ScheduleViolation, match="already holds"):
        simulate([step(("s", "a", 0)), step(("s", "a", 0))], init)


def test_edge_cases() -> None:
    assert index_schedule(1, 5) == [] and index_schedule(4, 0) == []
    assert binomial_schedule(["s"], [], 4).steps == []
    with pytest.raises(ValueError):
        binomial_schedule(["s"], ["s"], 4)
    with pytest.raises(ValueError):
        binomial_schedule(["s"], ["t"], 4, k=2)
