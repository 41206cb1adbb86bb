"""HPA v2 `behavior` applied to a raw recommendation, tick by tick, as Kubernetes does it.

Users edit `spec.scaling.behavior` the way they edit an HPA's, so a window or a policy
must mean here exactly what it means to the HPA controller
(kubernetes `pkg/controller/podautoscaler/horizontal.go`): the same stabilization, the
same rate arithmetic (float64 included), the same condition reasons. Cascade's global
policy says how many instances the load asks for; this module only decides how far
towards that number the deployment may move now, and why it may not go all the way.

One tick (`step`), in the controller's order:

1. Current replicas outside the bounds win over everything: at 0 with minReplicas > 0
   autoscaling is paused (`ScalingDisabled`), as a user's `kubectl scale --replicas 0`
   pauses an HPA; above maxReplicas or below minReplicas it goes straight to the bound,
   with no window and no rate limit (and the recommendation is not recorded).
2. Stabilization: within the scale-up window the lowest recommendation, within the
   scale-down window the highest (the new one included); current replicas are brought
   into [lowest-up, highest-down]. A fresh state holds the current count as its first
   recommendation, so a controller that just started never scales down at once.
3. Rate: per policy, the replica count at the start of its period (current minus the
   changes recorded inside it, both directions) plus Pods, or times (1 + Percent/100)
   rounded up; down: minus Pods, or times (1 - Percent/100) truncated. selectPolicy Max
   takes the most permissive, Min the least, Disabled forbids the direction.
4. Bounds: the rate limit and min/max together cap the move (TooMany/TooFewReplicas when
   the bound is the tighter one).

State is plain immutable data the caller keeps between ticks, like the controller's
in-memory `recommendations` and scale events (and, like them, lost on restart). The
controller records a scale event only after it really wrote the new size; so does
`record_scale`, which the caller calls after a successful write. Both functions drop
what no window or period can count any more, judged against the behavior they are given.
Times are float seconds on the caller's clock; an entry counts in a window or period
when it is strictly younger than its length, as upstream's `After(cutoff)`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

from cascade_api.scaling import PolicyType, ScalingBehavior, ScalingRules, SelectPolicy

DEFAULT_SCALE_UP_WINDOW_S = 0
DEFAULT_SCALE_DOWN_WINDOW_S = 300


class Reason(StrEnum):
    """The HPA controller's condition reasons, verbatim: users already know them."""

    # AbleToScale: what the stabilization windows did.
    READY_FOR_NEW_SCALE = "ReadyForNewScale"
    SCALE_UP_STABILIZED = "ScaleUpStabilized"
    SCALE_DOWN_STABILIZED = "ScaleDownStabilized"
    # ScalingLimited: what the rate policies and the bounds did.
    DESIRED_WITHIN_RANGE = "DesiredWithinRange"
    SCALE_UP_LIMIT = "ScaleUpLimit"
    SCALE_DOWN_LIMIT = "ScaleDownLimit"
    TOO_MANY_REPLICAS = "TooManyReplicas"
    TOO_FEW_REPLICAS = "TooFewReplicas"
    # ScalingActive False: scaled to 0 by someone while minReplicas > 0.
    SCALING_DISABLED = "ScalingDisabled"


class Policy(NamedTuple):
    """One rate policy, defaults resolved (the API's ScalingPolicy is a mutable model)."""

    type: PolicyType
    value: int
    period_s: int


class Rules(NamedTuple):
    """One direction's rules with the HPA defaults filled in."""

    window_s: int
    select: SelectPolicy
    policies: tuple[Policy, ...]


SCALE_UP_DEFAULT_POLICIES = (Policy(PolicyType.PERCENT, 100, 15), Policy(PolicyType.PODS, 4, 15))
SCALE_DOWN_DEFAULT_POLICIES = (Policy(PolicyType.PERCENT, 100, 15),)


@dataclass(frozen=True)
class Recommendation:
    at: float  # when it was made, caller's clock (seconds)
    replicas: int  # the raw recommendation, before windows, rates and bounds


@dataclass(frozen=True)
class ScaleEvent:
    at: float  # when the new size was written
    change: int  # signed: replicas added (> 0) or removed (< 0)


@dataclass(frozen=True)
class BehaviorState:
    """What one deployment's behavior remembers between ticks; start from `BehaviorState()`."""

    recommendations: tuple[Recommendation, ...] = ()  # for the stabilization windows
    events: tuple[ScaleEvent, ...] = ()  # for the rate policies' periods


@dataclass(frozen=True)
class Outcome:
    replicas: int  # what spec.replicas should be now
    stabilized: int  # the recommendation after the windows (the raw one if not applied)
    stabilization: Reason  # AbleToScale reason: ReadyForNewScale or Scale{Up,Down}Stabilized
    limit: Reason  # ScalingLimited reason: DesiredWithinRange or what capped the move
    limited: bool  # ScalingLimited status: rates or bounds moved `replicas` off `stabilized`
    active: bool = True  # ScalingActive status: False only for ScalingDisabled

    @property
    def reason(self) -> Reason:
        """The one reason to show (status, events): the cap if one bit, else the window."""
        if self.limited or not self.active or self.stabilization is Reason.READY_FOR_NEW_SCALE:
            return self.limit
        return self.stabilization


def effective_rules(behavior: ScalingBehavior) -> tuple[Rules, Rules]:
    """(scale-up, scale-down) rules with unset windows and empty policies defaulted."""
    return (
        _resolve(behavior.scale_up, DEFAULT_SCALE_UP_WINDOW_S, SCALE_UP_DEFAULT_POLICIES),
        _resolve(behavior.scale_down, DEFAULT_SCALE_DOWN_WINDOW_S, SCALE_DOWN_DEFAULT_POLICIES),
    )


def _resolve(rules: ScalingRules, window_s: int, defaults: tuple[Policy, ...]) -> Rules:
    policies = tuple(Policy(PolicyType(p.type), p.value, p.period_seconds) for p in rules.policies)
    window = rules.stabilization_window_seconds
    return Rules(
        window_s if window is None else window,
        SelectPolicy(rules.select_policy),
        policies or defaults,
    )


def step(
    state: BehaviorState,
    *,
    current: int,
    recommended: int,
    min_replicas: int,
    max_replicas: int,
    behavior: ScalingBehavior,
    now: float,
) -> tuple[Outcome, BehaviorState]:
    """One controller tick: the replicas to write now, why, and the state for the next tick.

    Call `record_scale` once the new size is written (only if it differs from `current`).
    """
    up, down = effective_rules(behavior)
    recommendations = state.recommendations or (Recommendation(now, current),)
    kept = _pruned(BehaviorState(recommendations, state.events), up, down, now)
    if current == 0 and min_replicas != 0:
        paused = Outcome(
            0, recommended, Reason.READY_FOR_NEW_SCALE, Reason.SCALING_DISABLED, False, False
        )
        return paused, kept
    if current > max_replicas or current < min_replicas:
        bound, why = (
            (max_replicas, Reason.TOO_MANY_REPLICAS)
            if current > max_replicas
            else (min_replicas, Reason.TOO_FEW_REPLICAS)
        )
        return Outcome(bound, recommended, Reason.READY_FOR_NEW_SCALE, why, True), kept

    stabilized = _stabilize(recommendations, current, recommended, up, down, now)
    if stabilized == recommended:
        stabilization = Reason.READY_FOR_NEW_SCALE
    elif recommended >= current:
        stabilization = Reason.SCALE_UP_STABILIZED
    else:
        stabilization = Reason.SCALE_DOWN_STABILIZED
    replicas, limit = _rate_and_bounds(
        state.events, current, stabilized, min_replicas, max_replicas, up, down, now
    )
    outcome = Outcome(replicas, stabilized, stabilization, limit, replicas != stabilized)
    recorded = (*kept.recommendations, Recommendation(now, recommended))
    return outcome, BehaviorState(recorded, kept.events)


def record_scale(
    state: BehaviorState, *, before: int, after: int, behavior: ScalingBehavior, now: float
) -> BehaviorState:
    """The state once `before` -> `after` was written at `now` (upstream's storeScaleEvent)."""
    up, down = effective_rules(behavior)
    kept = _pruned(state, up, down, now)
    if after == before:
        return kept
    return BehaviorState(kept.recommendations, (*kept.events, ScaleEvent(now, after - before)))


def _stabilize(
    recommendations: tuple[Recommendation, ...],
    current: int,
    recommended: int,
    up: Rules,
    down: Rules,
    now: float,
) -> int:
    lowest = min([recommended, *(r.replicas for r in recommendations if r.at > now - up.window_s)])
    highest = max(
        [recommended, *(r.replicas for r in recommendations if r.at > now - down.window_s)]
    )
    return min(max(current, lowest), highest)


def _rate_and_bounds(
    events: tuple[ScaleEvent, ...],
    current: int,
    desired: int,
    min_replicas: int,
    max_replicas: int,
    up: Rules,
    down: Rules,
    now: float,
) -> tuple[int, Reason]:
    if desired > current:
        rate = max(_limit(events, current, up, now, up=True), current)
        ceiling, why = (
            (rate, Reason.SCALE_UP_LIMIT)
            if max_replicas > rate
            else (max_replicas, Reason.TOO_MANY_REPLICAS)
        )
        if desired > ceiling:
            return ceiling, why
    elif desired < current:
        rate = min(_limit(events, current, down, now, up=False), current)
        floor, why = (
            (rate, Reason.SCALE_DOWN_LIMIT)
            if min_replicas < rate
            else (min_replicas, Reason.TOO_FEW_REPLICAS)
        )
        if desired < floor:
            return floor, why
    return desired, Reason.DESIRED_WITHIN_RANGE


def _period_start(events: tuple[ScaleEvent, ...], current: int, period_s: int, now: float) -> int:
    """Replicas at the start of the period: current minus every change made inside it."""
    return current - sum(e.change for e in events if e.at > now - period_s)


def _limit(events: tuple[ScaleEvent, ...], current: int, rules: Rules, now: float, up: bool) -> int:
    """The furthest `rules` let replicas go from `current`, up or down: each policy
    proposes from where its period started; Min picks the least move, Max the most."""
    if rules.select == SelectPolicy.DISABLED:
        return current
    proposals = []
    for policy in rules.policies:
        start = _period_start(events, current, policy.period_s, now)
        if policy.type == PolicyType.PODS:
            proposals.append(start + policy.value if up else start - policy.value)
        elif up:  # float64 as upstream, rounded up so that a small Percent still moves
            proposals.append(math.ceil(start * (1 + policy.value / 100)))
        else:  # truncated toward zero like Go's int32()
            proposals.append(int(start * (1 - policy.value / 100)))
    least = rules.select == SelectPolicy.MIN
    return min(proposals) if least == up else max(proposals)


def _pruned(state: BehaviorState, up: Rules, down: Rules, now: float) -> BehaviorState:
    """Drop what no window or period counts any more (events serve both directions)."""
    window = max(up.window_s, down.window_s)
    period = max(p.period_s for p in (*up.policies, *down.policies))
    return BehaviorState(
        tuple(r for r in state.recommendations if r.at > now - window),
        tuple(e for e in state.events if e.at > now - period),
    )
