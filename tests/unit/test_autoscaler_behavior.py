"""HPA v2 behavior, tick by tick, against the Kubernetes documentation's examples.

Each test drives `step` the way a controller does: one recommendation per tick, the
new size written (and `record_scale` called) whenever it differs, and asserts the exact
replica count and reason of every tick.
"""

from __future__ import annotations

from behavior_specs import behavior, percent, pods

from cascade_api.scaling import PolicyType, ScalingBehavior, SelectPolicy
from cascade_autoscaler.behavior import (
    BehaviorState,
    Outcome,
    Policy,
    Reason,
    Rules,
    effective_rules,
    record_scale,
    step,
)

R = Reason
PODS, PERCENT, MAX = PolicyType.PODS, PolicyType.PERCENT, SelectPolicy.MAX


def once(
    state: BehaviorState,
    *,
    current: int,
    recommended: int,
    now: float,
    lo: int = 1,
    hi: int = 1000,
    rules: ScalingBehavior | None = None,
) -> tuple[Outcome, BehaviorState]:
    return step(
        state,
        current=current,
        recommended=recommended,
        min_replicas=lo,
        max_replicas=hi,
        behavior=ScalingBehavior() if rules is None else rules,
        now=now,
    )


def run(
    ticks: list[tuple[float, int]],
    *,
    start: int,
    rules: ScalingBehavior,
    lo: int = 1,
    hi: int = 1000,
) -> tuple[list[tuple[int, Reason]], BehaviorState]:
    """(replicas, reason) per tick; the size is written and recorded whenever it changes."""
    state, current, seen = BehaviorState(), start, []
    for now, recommended in ticks:
        outcome, state = once(
            state, current=current, recommended=recommended, now=now, lo=lo, hi=hi, rules=rules
        )
        if outcome.replicas != current:
            state = record_scale(
                state, before=current, after=outcome.replicas, behavior=rules, now=now
            )
            current = outcome.replicas
        seen.append((outcome.replicas, outcome.reason))
    return seen, state


def every(seconds: float, recommendations: list[int]) -> list[tuple[float, int]]:
    return [(i * seconds, r) for i, r in enumerate(recommendations)]


# --- defaults -------------------------------------------------------------------------


def test_unset_rules_take_the_hpa_defaults() -> None:
    up, down = effective_rules(ScalingBehavior())
    assert up == Rules(0, MAX, (Policy(PERCENT, 100, 15), Policy(PODS, 4, 15)))
    assert down == Rules(300, MAX, (Policy(PERCENT, 100, 15),))


def test_a_set_window_with_no_policies_keeps_the_default_policies() -> None:
    up, down = effective_rules(behavior(scaleDown={"stabilizationWindowSeconds": 60}))
    assert down == Rules(60, MAX, (Policy(PERCENT, 100, 15),))
    assert up.window_s == 0


# --- scale-up rate: "100% or 4 pods per 15 s, whichever is more" ------------------------


def test_default_scale_up_doubles_or_adds_four_every_15_seconds() -> None:
    seen, _ = run(every(15, [150] * 6 + [100]), start=1, rules=ScalingBehavior(), hi=100)
    assert seen == [
        (5, R.SCALE_UP_LIMIT),  # 1 + 4 beats 1 * 2
        (10, R.SCALE_UP_LIMIT),  # 5 * 2 beats 5 + 4
        (20, R.SCALE_UP_LIMIT),
        (40, R.SCALE_UP_LIMIT),
        (80, R.SCALE_UP_LIMIT),
        (100, R.TOO_MANY_REPLICAS),  # the rate allows 160; maxReplicas is tighter
        (100, R.DESIRED_WITHIN_RANGE),
    ]


def test_scale_up_period_counts_the_changes_made_inside_it() -> None:
    seen, _ = run(every(5, [100] * 7), start=1, rules=ScalingBehavior())
    # t=0 adds 4; until that event is 15 s old the period started at 1 (limit 5).
    assert [r for r, _ in seen] == [5, 5, 5, 10, 10, 10, 20]
    assert seen[1] == (5, R.SCALE_UP_LIMIT)


def test_scale_up_select_policy_max_takes_the_larger_and_min_the_smaller_change() -> None:
    policies = [pods(4, 60), percent(50, 60)]
    most, _ = run(every(60, [100] * 3), start=10, rules=behavior(scaleUp={"policies": policies}))
    least, _ = run(
        every(60, [100] * 3),
        start=10,
        rules=behavior(scaleUp={"policies": policies, "selectPolicy": "Min"}),
    )
    assert [r for r, _ in most] == [15, 23, 35]  # +50 %, rounded up: 15, 22.5 -> 23
    assert [r for r, _ in least] == [14, 18, 22]  # +4 pods


def test_percent_uses_float64_rounded_up_like_the_controller() -> None:
    # 50 * (1 + 10/100) is 55.00000000000001 in float64: the HPA allows 56, so do we.
    seen, _ = run([(0, 100)], start=50, rules=behavior(scaleUp={"policies": [percent(10, 60)]}))
    assert seen == [(56, R.SCALE_UP_LIMIT)]


def test_a_scale_down_inside_the_period_raises_the_base_of_a_scale_up() -> None:
    rules = behavior(scaleDown={"stabilizationWindowSeconds": 0})
    seen, _ = run([(0, 6), (10, 30)], start=10, rules=rules)
    # The period started at 10 (6 now, 4 removed within it): 10 * 2 = 20, not 6 + 6.
    assert seen == [(6, R.DESIRED_WITHIN_RANGE), (20, R.SCALE_UP_LIMIT)]


# --- scale-up stabilization: 60 s ----------------------------------------------------


def test_scale_up_window_applies_the_lowest_recent_recommendation() -> None:
    rules = behavior(scaleUp={"stabilizationWindowSeconds": 60})
    seen, _ = run(every(15, [6, 6, 3, 6, 6, 6, 6]), start=2, rules=rules)
    assert seen == [
        (2, R.SCALE_UP_STABILIZED),  # the initial recommendation (2, at t=0) is in the window
        (2, R.SCALE_UP_STABILIZED),
        (2, R.SCALE_UP_STABILIZED),
        (2, R.SCALE_UP_STABILIZED),
        (3, R.SCALE_UP_STABILIZED),  # t=60: window (0, 60] holds 6, 3, 6, 6
        (3, R.SCALE_UP_STABILIZED),
        (6, R.DESIRED_WITHIN_RANGE),  # t=90: the 3 of t=30 left the window
    ]


# --- scale-down stabilization: the default 300 s -------------------------------------


def test_a_dip_inside_the_300_second_window_does_not_scale_down() -> None:
    seen, _ = run(every(60, [10, 4, 10, 5, 5, 5, 5, 5]), start=10, rules=ScalingBehavior())
    assert seen == [
        (10, R.DESIRED_WITHIN_RANGE),
        (10, R.SCALE_DOWN_STABILIZED),  # the dip to 4
        (10, R.DESIRED_WITHIN_RANGE),
        (10, R.SCALE_DOWN_STABILIZED),  # t=180..360: the 10 of t=120 is within 300 s
        (10, R.SCALE_DOWN_STABILIZED),
        (10, R.SCALE_DOWN_STABILIZED),
        (10, R.SCALE_DOWN_STABILIZED),
        (5, R.DESIRED_WITHIN_RANGE),  # t=420: window (120, 420] holds only 5s
    ]


def test_a_fresh_state_counts_the_current_size_as_its_first_recommendation() -> None:
    seen, _ = run([(0, 2), (299, 2), (300, 2)], start=10, rules=ScalingBehavior())
    assert seen == [
        (10, R.SCALE_DOWN_STABILIZED),
        (10, R.SCALE_DOWN_STABILIZED),  # the initial 10 at t=0 is 299 s old
        (2, R.DESIRED_WITHIN_RANGE),  # exactly 300 s old: out (strictly younger counts)
    ]


def test_stabilization_holds_the_current_size_between_both_windows() -> None:
    rules = behavior(scaleUp={"stabilizationWindowSeconds": 60})
    seen, _ = run([(0, 8), (30, 4), (45, 7)], start=6, rules=rules)
    # t=45: lowest in the up window 4, highest in the down window 8: 6 stays.
    assert seen == [
        (6, R.SCALE_UP_STABILIZED),
        (6, R.SCALE_DOWN_STABILIZED),
        (6, R.SCALE_UP_STABILIZED),
    ]


# --- scale-down rate: "4 pods or 10 % per minute" ----------------------------------------

DOWN_POLICIES = [pods(4, 60), percent(10, 60)]


def test_scale_down_select_policy_max_takes_the_bigger_cut() -> None:
    rules = behavior(scaleDown={"stabilizationWindowSeconds": 0, "policies": DOWN_POLICIES})
    seen, _ = run(every(60, [1] * 11), start=80, rules=rules)
    # Above 40 replicas 10 % removes more than 4 pods, below 40 the 4 pods do.
    assert [r for r, _ in seen] == [72, 64, 57, 51, 45, 40, 36, 32, 28, 24, 20]
    assert {why for _, why in seen} == {R.SCALE_DOWN_LIMIT}


def test_scale_down_select_policy_min_takes_the_smaller_cut() -> None:
    rules = behavior(
        scaleDown={
            "stabilizationWindowSeconds": 0,
            "policies": DOWN_POLICIES,
            "selectPolicy": "Min",
        }
    )
    seen, _ = run(every(60, [1] * 14), start=50, rules=rules)
    # At most 4 pods per minute above 40, at most 10 % (truncated) below.
    assert [r for r, _ in seen] == [46, 42, 38, 34, 30, 27, 24, 21, 18, 16, 14, 12, 10, 9]


def test_scale_down_period_counts_removals_made_inside_it() -> None:
    rules = behavior(scaleDown={"stabilizationWindowSeconds": 0, "policies": [pods(4, 60)]})
    seen, _ = run(every(15, [1] * 6), start=80, rules=rules)
    assert [r for r, _ in seen] == [76, 76, 76, 76, 72, 72]
    assert seen[1] == (76, R.SCALE_DOWN_LIMIT)


def test_percent_100_scale_down_may_go_straight_to_the_recommendation() -> None:
    rules = behavior(scaleDown={"stabilizationWindowSeconds": 0})
    seen, _ = run([(0, 1)], start=40, rules=rules)
    assert seen == [(1, R.DESIRED_WITHIN_RANGE)]


# --- selectPolicy: Disabled --------------------------------------------------------------


def test_disabled_scale_down_never_removes_and_still_scales_up() -> None:
    rules = behavior(scaleDown={"selectPolicy": "Disabled", "stabilizationWindowSeconds": 0})
    seen, _ = run([(0, 1), (600, 1), (1200, 12), (1800, 3)], start=10, rules=rules)
    assert seen == [
        (10, R.SCALE_DOWN_LIMIT),
        (10, R.SCALE_DOWN_LIMIT),
        (12, R.DESIRED_WITHIN_RANGE),
        (12, R.SCALE_DOWN_LIMIT),
    ]


def test_disabled_scale_up_never_adds() -> None:
    rules = behavior(scaleUp={"selectPolicy": "Disabled"})
    seen, _ = run([(0, 9), (60, 9)], start=3, rules=rules, hi=20)
    assert seen == [(3, R.SCALE_UP_LIMIT), (3, R.SCALE_UP_LIMIT)]


# --- bounds ------------------------------------------------------------------------------


def test_recommendations_past_the_bounds_are_clamped() -> None:
    up, _ = run([(0, 20)], start=4, rules=ScalingBehavior(), hi=6)
    down, _ = run(
        [(0, 0)], start=4, rules=behavior(scaleDown={"stabilizationWindowSeconds": 0}), lo=2
    )
    assert up == [(6, R.TOO_MANY_REPLICAS)]
    assert down == [(2, R.TOO_FEW_REPLICAS)]


def test_a_rate_limit_equal_to_max_reports_max() -> None:
    seen, _ = run([(0, 30)], start=5, rules=ScalingBehavior(), hi=10)
    assert seen == [(10, R.TOO_MANY_REPLICAS)]  # the rate allows 10 too; max is named


def test_current_above_max_goes_to_max_at_once_past_window_and_rate() -> None:
    rules = behavior(scaleDown={"policies": [pods(1, 600)]})  # window 300, 1 pod per 10 min
    outcome, state = once(BehaviorState(), current=10, recommended=10, hi=6, rules=rules, now=0)
    assert outcome == Outcome(6, 10, R.READY_FOR_NEW_SCALE, R.TOO_MANY_REPLICAS, True)
    assert [r.replicas for r in state.recommendations] == [10]  # only the initial one


def test_current_below_min_goes_to_min_even_with_scale_up_disabled() -> None:
    rules = behavior(scaleUp={"selectPolicy": "Disabled"})
    seen, _ = run([(0, 1), (15, 1)], start=1, rules=rules, lo=3)
    # The first tick jumps to min; on the second, inside the bounds, min holds the 1 back.
    assert seen == [(3, R.TOO_FEW_REPLICAS), (3, R.TOO_FEW_REPLICAS)]


def test_scaled_to_zero_with_min_above_zero_pauses_autoscaling() -> None:
    seen, _ = run([(0, 5), (60, 5)], start=0, rules=ScalingBehavior(), lo=1)
    assert seen == [(0, R.SCALING_DISABLED), (0, R.SCALING_DISABLED)]
    outcome, _ = once(BehaviorState(), current=0, recommended=5, now=0)
    assert not outcome.active and not outcome.limited


def test_scale_from_zero_needs_a_pods_policy() -> None:
    default, _ = run([(0, 3)], start=0, rules=ScalingBehavior(), lo=0)
    only_percent = behavior(scaleUp={"policies": [percent(100, 15)]})
    stuck, _ = run([(0, 3), (60, 3)], start=0, rules=only_percent, lo=0)
    assert default == [(3, R.DESIRED_WITHIN_RANGE)]  # 0 + 4 pods
    assert stuck == [(0, R.SCALE_UP_LIMIT), (0, R.SCALE_UP_LIMIT)]  # 0 * 2 = 0, as upstream


# --- state -------------------------------------------------------------------------------


def test_state_keeps_only_what_a_window_or_period_can_still_count() -> None:
    seen, state = run(every(60, [10, 10, 5, 5, 5, 5, 5]), start=10, rules=ScalingBehavior())
    assert [r for r, _ in seen] == [10, 10, 10, 10, 10, 10, 5]
    # t=360: the recommendations younger than 300 s; the scale-down just written.
    assert [r.at for r in state.recommendations] == [120, 180, 240, 300, 360]
    assert [(e.at, e.change) for e in state.events] == [(360, -5)]
    _, soon = once(state, current=5, recommended=5, now=374)
    _, later = once(state, current=5, recommended=5, now=375)
    assert soon.events == state.events  # 14 s old: a 15 s period still counts it
    assert later.events == ()  # 15 s old: no period counts it any more
    assert [r.at for r in later.recommendations] == [120, 180, 240, 300, 360, 375]


def test_a_scale_up_window_longer_than_the_scale_down_one_keeps_its_recommendations() -> None:
    rules = behavior(
        scaleUp={"stabilizationWindowSeconds": 600}, scaleDown={"stabilizationWindowSeconds": 0}
    )
    seen, state = run([(0, 4), (100, 8), (200, 8), (601, 8)], start=4, rules=rules)
    assert [r for r, _ in seen] == [4, 4, 4, 8]  # the 4 of t=0 counts until t=600
    assert [r.at for r in state.recommendations] == [100, 200, 601]


def test_a_scale_down_event_lives_as_long_as_a_scale_up_period_can_count_it() -> None:
    rules = behavior(
        scaleUp={"policies": [percent(100, 600)]}, scaleDown={"stabilizationWindowSeconds": 0}
    )
    seen, state = run([(0, 4), (300, 30)], start=10, rules=rules)
    # The removal of 6 at t=0 still counts at t=300: the period started at 10, so 20.
    assert seen == [(4, R.DESIRED_WITHIN_RANGE), (20, R.SCALE_UP_LIMIT)]
    assert [(e.at, e.change) for e in state.events] == [(0, -6), (300, 16)]


def test_step_leaves_the_given_state_unchanged_and_is_repeatable() -> None:
    _, state = run(every(60, [10, 4]), start=10, rules=ScalingBehavior())
    first = once(state, current=10, recommended=3, now=120)
    assert once(state, current=10, recommended=3, now=120) == first
    assert len(state.recommendations) == 3  # initial + t=0 + t=60


def test_record_scale_without_a_change_records_nothing() -> None:
    state = record_scale(BehaviorState(), before=3, after=3, behavior=ScalingBehavior(), now=0.0)
    assert state == BehaviorState()
