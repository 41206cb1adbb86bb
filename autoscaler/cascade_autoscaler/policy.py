"""The global autoscaling policy: Chiron's instance control under HPA behavior, composed.

`decide(ctx, state)` is one tick, a chain of small pure steps (Ray Serve's
autoscaling_policy style), each testable alone and each leaving a phrase for the reason:

1. `theta_for`: Θ as configured, or auto Θ (burstiness and time-to-ready), which moves only
   by `THETA_STEP` or more so estimation noise does not relabel pods every tick.
2. `interactive_desired`: interactive + mixed instances from the IBP band.
3. `batch_desired`: batch instances from batch backpressure (Algorithm 2).
4. total = (2) + (3); `keep_alive` (minReplicas 0 only): a queued or running request
   means at least 1 at once (no keep-alive wait for scale-up); 0 once none was queued,
   running or seen arriving for keep-alive seconds; in between 1 stays warm; idle at 0
   stays at 0.
5. `bounded`: behavior.step (stabilization, rate policies, min/max), then `from_zero`.
6. `split`: final count into roles; batch gets its need, the rest splits by Θ; when
   behavior or maxReplicas leave less than both needs, interactive + mixed come first
   (interactive SLOs are seconds, batch deadlines minutes; mixed instances also serve batch).
7. owner: `external` only turns `write` off and says so; everything else is computed
   the same, so status shows what Cascade would do.

**Scale from zero.** behavior.step with current 0 and minReplicas 0 scales up like any
other size: the default Pods policy (4 per 15 s) allows 0 → n. Percent policies cannot
grow 0 (0 times anything is 0), selectPolicy Disabled forbids it, and a scale-up window that
still holds a recommendation of 0 stabilizes at 0. A held request must not wait for any
of these, so `from_zero` makes 1 the floor whenever a request waits at 0, as the HPA
enforces minReplicas: past windows and rates (reason `ScaleFromZero`). Reaching 0 is a
scale-down like any other: the scale-down window applies after the keep-alive ends.
"""

from __future__ import annotations

from dataclasses import replace

from cascade_api.scaling import ScalingBehavior
from cascade_autoscaler import behavior as hpa
from cascade_autoscaler.batch_queue import BatchRecommendation
from cascade_autoscaler.batch_queue import decide as decide_batch
from cascade_autoscaler.behavior import BehaviorState, Outcome, Reason
from cascade_autoscaler.cause import Moves, cause_of
from cascade_autoscaler.interactive import (
    InteractiveBand,
    InteractiveDecision,
    InteractiveObservation,
    auto_theta,
    decide_interactive,
    split_roles,
)
from cascade_autoscaler.policy_types import (
    Arrivals,
    AutoscaleContext,
    AutoscaleSpec,
    AutoscaleState,
    Condition,
    Fleet,
    Load,
    Owner,
    Recommendation,
    Roles,
)

__all__ = [
    "Arrivals",
    "AutoscaleContext",
    "AutoscaleSpec",
    "AutoscaleState",
    "Condition",
    "Fleet",
    "Load",
    "Owner",
    "Recommendation",
    "Roles",
    "applied",
    "decide",
]

THETA_STEP = 0.05  # auto Θ changes smaller than this keep the Θ in use
SCALE_FROM_ZERO = "ScaleFromZero"  # ScalingLimited reason: 1 forced past behavior at 0
VALID_METRIC = "ValidMetricFound"  # ScalingActive True, as the HPA says it


def decide(ctx: AutoscaleContext, state: AutoscaleState) -> tuple[Recommendation, AutoscaleState]:
    """One tick: the replicas and roles wanted now, whether to write them, and why."""
    spec, fleet = ctx.spec, ctx.fleet
    theta, kept_theta, theta_why = theta_for(ctx, state)
    band = InteractiveBand(theta, spec.delta)
    inter = interactive_desired(ctx, band)
    batch = batch_desired(ctx)
    last = last_request(ctx, state)
    raw, zero_why = keep_alive(ctx, inter.desired + batch.desired_instances, last)
    outcome, behavior_state = bounded(ctx, state.behavior, raw)
    replicas, able, limited = from_zero(ctx, outcome, raw)
    roles = split(replicas, inter.desired, batch.desired_instances, theta)
    write = spec.owner == "cascade" and replicas != fleet.replicas

    moved = (
        f"{fleet.replicas} → {replicas}" if replicas != fleet.replicas else f"{replicas} unchanged"
    )
    starting = f" ({fleet.starting} starting)" if fleet.starting else ""
    parts = (
        _interactive_note(ctx, inter, band, auto=spec.theta == "auto"),
        _batch_note(fleet.batch, batch),
        zero_why,
        _behavior_note(ctx, outcome, replicas, limited),
        f"replicas {moved}{starting}",
        "" if spec.owner == "cascade" else "owner External: not written",
    )
    active = Condition(outcome.active, VALID_METRIC if outcome.active else outcome.limit)
    moves = Moves(
        current=fleet.replicas,
        replicas=replicas,
        interactive=inter.desired - fleet.interactive - fleet.mixed,
        batch=batch.desired_instances - fleet.batch,
        to_zero=raw == 0 and bool(zero_why),
        from_zero=limited.reason == SCALE_FROM_ZERO,
    )
    rec = Recommendation(
        replicas=replicas,
        roles=roles,
        write=write,
        reason="; ".join(p for p in parts if p),
        able_to_scale=able,
        scaling_active=active,
        scaling_limited=limited,
        theta=theta,
        details=tuple(d for d in (theta_why, inter.reason, batch.reason, zero_why) if d),
        cause=cause_of(moves, outcome),
        ibp=inter.ibp,
        bbp=batch.bbp_before,
    )
    return rec, AutoscaleState(behavior_state, last, kept_theta)


def applied(
    state: AutoscaleState, *, before: int, after: int, behavior: ScalingBehavior, now: float
) -> AutoscaleState:
    """The state once `before` → `after` was written (the rate policies count it).

    `behavior` is the deployment's, as given to `decide`: pruning keeps what its longest
    period still counts.
    """
    recorded = hpa.record_scale(
        state.behavior, before=before, after=after, behavior=behavior, now=now
    )
    return replace(state, behavior=recorded)


# Steps, in decide's order.


def theta_for(ctx: AutoscaleContext, state: AutoscaleState) -> tuple[float, float | None, str]:
    """(Θ to use, Θ to keep in state, why); a configured Θ is used as is."""
    if ctx.spec.theta != "auto":
        return ctx.spec.theta, None, ""
    a = ctx.arrivals
    est = auto_theta(a.counts, a.interval_s, a.time_to_ready_s)
    kept = state.theta
    if kept is None or abs(est.theta - kept) >= THETA_STEP:
        return est.theta, est.theta, f"auto {est.reason}"
    return kept, kept, f"auto {est.reason}; keeping Θ {kept:.2f} (moved < {THETA_STEP})"


def interactive_desired(ctx: AutoscaleContext, band: InteractiveBand) -> InteractiveDecision:
    """Interactive + mixed instances that hold IBP in the band."""
    f, load = ctx.fleet, ctx.load
    return decide_interactive(
        InteractiveObservation(f.interactive, f.mixed, load.busy, load.queued, f.starting), band
    )


def batch_desired(ctx: AutoscaleContext) -> BatchRecommendation:
    """Batch instances with batch backpressure 0 (Algorithm 2)."""
    return decide_batch(ctx.batch, ctx.spec.batch_config)


def has_requests(ctx: AutoscaleContext) -> bool:
    """Any request queued or running, of either class."""
    load, batch = ctx.load, ctx.batch
    return bool(load.busy or load.queued or load.in_flight or batch.queue or batch.batch_running)


def last_request(ctx: AutoscaleContext, state: AutoscaleState) -> float:
    """When a request was last seen; a fresh state (operator restart) starts the clock now."""
    if has_requests(ctx):
        return ctx.now
    seen = [t for t in (state.last_request_s, ctx.load.last_arrival_s) if t is not None]
    return max(seen) if seen else ctx.now


def keep_alive(ctx: AutoscaleContext, total: int, last: float) -> tuple[int, str]:
    """Scale to zero after keep-alive idle seconds; at least 1 otherwise (minReplicas 0)."""
    spec, current = ctx.spec, ctx.fleet.replicas
    if spec.min_replicas > 0:
        return total, ""
    if has_requests(ctx):
        return max(total, 1), "request at zero: at least 1 now" if current == 0 else ""
    if current == 0:  # idle at zero stays there: keep-alive never starts an instance
        return 0, ""
    idle = ctx.now - last
    if idle >= spec.keep_alive_s:
        return 0, f"idle {idle:.0f}s ≥ keep-alive {spec.keep_alive_s:g}s: to zero"
    return max(total, 1), f"keep-alive: idle {idle:.0f}s of {spec.keep_alive_s:g}s, keep ≥ 1"


def bounded(ctx: AutoscaleContext, state: BehaviorState, raw: int) -> tuple[Outcome, BehaviorState]:
    """HPA behavior and min/max on the raw count."""
    spec = ctx.spec
    return hpa.step(
        state,
        current=ctx.fleet.replicas,
        recommended=raw,
        min_replicas=spec.min_replicas,
        max_replicas=spec.max_replicas,
        behavior=spec.behavior,
        now=ctx.now,
    )


def from_zero(
    ctx: AutoscaleContext, outcome: Outcome, raw: int
) -> tuple[int, Condition, Condition]:
    """(replicas, AbleToScale, ScalingLimited): 1 past behavior when a request waits at 0."""
    able = Condition(True, outcome.stabilization)
    if ctx.fleet.replicas == 0 and ctx.spec.min_replicas == 0 and raw > 0 and not outcome.replicas:
        return 1, Condition(True, Reason.READY_FOR_NEW_SCALE), Condition(True, SCALE_FROM_ZERO)
    limit = outcome.limit if outcome.active else Reason.DESIRED_WITHIN_RANGE
    return outcome.replicas, able, Condition(outcome.limited, limit)


def split(replicas: int, interactive: int, batch: int, theta: float) -> Roles:
    """Batch gets its need unless that leaves interactive + mixed short; the rest by Θ."""
    batch_roles = min(batch, max(0, replicas - interactive))
    rest = split_roles(replicas - batch_roles, theta)
    return Roles(rest.interactive, rest.mixed, batch_roles)


# Reason phrases.


def _interactive_note(
    ctx: AutoscaleContext, d: InteractiveDecision, band: InteractiveBand, *, auto: bool
) -> str:
    n = ctx.fleet.interactive + ctx.fleet.mixed
    lo, hi = band.theta - band.delta, band.theta + band.delta
    theta = f" (auto Θ {band.theta:.2f})" if auto else ""
    waiting = f", {ctx.load.queued} waiting" if ctx.load.queued else ""
    if d.ibp is None:
        if not d.desired:
            return f"no interactive demand{theta}"
        return f"{ctx.load.queued} interactive waiting at 0 → {d.desired} interactive+mixed{theta}"
    if d.action == "scale_up":
        return (
            f"IBP {d.ibp:.2f}{waiting} > Θ+δ {hi:.2f}: {n} → {d.desired} interactive+mixed{theta}"
        )
    if d.action == "scale_down":
        return f"IBP {d.ibp:.2f} < Θ-δ {lo:.2f}: {n} → {d.desired} interactive+mixed{theta}"
    return f"IBP {d.ibp:.2f} in [{lo:.2f}, {hi:.2f}]: {n} interactive+mixed{theta}"


def _batch_note(current: int, b: BatchRecommendation) -> str:
    bbp = f" (BBP {b.bbp_before})" if b.bbp_before else ""
    if b.desired_instances == current:
        return f"batch {current}{bbp}"
    return f"batch {current} → {b.desired_instances}{bbp}"


def _behavior_note(
    ctx: AutoscaleContext, outcome: Outcome, replicas: int, limited: Condition
) -> str:
    if not outcome.active:
        return f"ScalingDisabled: at 0 with minReplicas {ctx.spec.min_replicas}, paused"
    if limited.reason == SCALE_FROM_ZERO:
        return f"ScaleFromZero: 0 → 1 though behavior said {outcome.reason} at 0"
    if limited.status:
        return f"{limited.reason} caps at {replicas}"
    if outcome.stabilization is not Reason.READY_FOR_NEW_SCALE:
        return f"{outcome.stabilization} at {outcome.stabilized}"
    return ""
