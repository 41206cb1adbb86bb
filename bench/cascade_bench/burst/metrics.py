"""Per mode, the burst's numbers from its records and probe rounds; across modes, the
ratios to stop-the-world, cooperative's distance to all-cached and pre-scaled, and the
issue's goals. Pure.

Burst requests are those *scheduled* in [burst start, burst end): TTFT percentiles over
the completed ones, SLO attainment (TTFT <= the interactive TTFT SLO) over all of them,
failures (errors and 429s) counted as misses and in `errors`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cascade_bench.burst import timeline as tl
from cascade_bench.replay.record import RequestRecord
from cascade_protocol.stats import percentile

STW = "stop_the_world"
LIVE = ("pipelines", "cooperative")
P99_GOAL = 0.5  # (b) and (c) P99 TTFT <= 0.5 x (a)


@dataclass
class ModeRaw:
    """What one mode's run produced, before any metric."""

    spec: dict[str, Any]
    records: list[RequestRecord]  # the replay's, one per request
    wall_s: float  # the replay's start to its last request's end
    rounds: list[tl.Round]
    originals: list[str]  # worker pods before the burst
    decision_t: float  # the scale decision (the nominal burst start for `prescaled`)
    scaled: bool  # /scale was written
    scale_ack_t: float | None  # when the /scale write returned
    wall0: float  # wall-clock time of t = 0
    probe_errors: list[str]


@dataclass(frozen=True)
class Judge:
    burst_t: tuple[float, float]  # [start, end) in send time
    ttft_slo_s: float
    step_s: float  # one decode step at the demand batch (the profile)
    period_s: float  # the probe's


def _dist(values: Sequence[float]) -> dict[str, float | None]:
    return {f"p{q}": percentile(values, q) for q in (50, 90, 99)} | {
        "mean": sum(values) / len(values) if values else None,
        "max": max(values, default=None),
    }


def final_plans(rounds: Sequence[tl.Round], since: float) -> list[Mapping[str, Any]]:
    """Each plan of the scale-up as last seen (one deleted later still counts): those
    started from `since` on (less a second: startTime is in whole seconds) or not yet;
    `prescaled`'s plan, made while it deployed, is not one."""
    last: dict[str, Mapping[str, Any]] = {p["name"]: p for r in rounds for p in r.plans}
    kept = [p for p in last.values() if p.get("start_t") is None or p["start_t"] >= since - 1.0]
    return sorted(kept, key=lambda p: (p.get("start_t") is None, p.get("start_t") or 0))


def share_check(
    first: Mapping[str, Any] | None, plans: Sequence[Mapping[str, Any]], j: Judge
) -> dict[str, Any] | None:
    """The issue's bound: first new token <= the first pipeline's share received + one
    step. Both sides from the plan's startTime (whole seconds, the same truncation on
    both); the share is the status's coveredSeconds (else the plan's predicted
    readySeconds); the probe's period is allowed on top."""
    if first is None or not plans or plans[0].get("start_t") is None:
        return None
    plan = plans[0]
    covered = [p.get("coveredSeconds") for p in plan.get("pipelines", [])]
    known = [c for c in covered if c is not None]
    source = "covered"
    if not known:
        known = [p["ready_s"] for p in plan.get("planned_pipelines", []) if p.get("ready_s")]
        source = "predicted ready"
    if not known:
        return None
    measured = first["t"] - plan["start_t"]
    bound = min(known) + j.step_s
    return {
        "from_plan_start_s": measured,
        "share_s": min(known),
        "share_source": source,
        "bound_s": bound,
        "holds": measured <= bound + j.period_s,
    }


def _tokens_per_s(records: Sequence[RequestRecord], lo: float, hi: float) -> float:
    n = 0.0
    for r in records:
        if r.token_times:
            per = r.output_tokens / len(r.token_times)
            n += per * sum(1 for t in r.token_times if lo <= t < hi)
    return n / (hi - lo) if hi > lo else 0.0


def mode_doc(raw: ModeRaw, j: Judge, per_request: bool = False) -> dict[str, Any]:
    records = raw.records
    lo, hi = j.burst_t
    burst = [r for r in records if lo <= r.scheduled_s < hi]
    warm = [r for r in records if r.scheduled_s < lo]
    ttfts = [t for r in burst if r.ok and (t := r.ttft_s) is not None]
    warm_ttfts = [t for r in warm if r.ok and (t := r.ttft_s) is not None]
    met = sum(1 for r in burst if r.ok and r.ttft_s is not None and r.ttft_s <= j.ttft_slo_s)
    originals = set(raw.originals)
    first = tl.first_new_token(raw.rounds, originals, raw.decision_t)
    serving = tl.first_new_serving(raw.rounds, originals, raw.decision_t)
    plans = final_plans(raw.rounds, raw.decision_t)
    d = raw.decision_t
    kinds = Counter(r.error_kind for r in burst if not r.ok)
    dist = _dist(ttfts)
    doc: dict[str, Any] = {
        "ttft_p50_s": dist["p50"],
        "ttft_p99_s": dist["p99"],
        "first_new_token_s": None if first is None else first["t"] - d,
        "slo_attainment": met / len(burst) if burst else None,
        "errors": sum(kinds.values()),
        "error_kinds": {str(k): v for k, v in kinds.most_common()},
        "requests": len(burst),
        "completed": sum(1 for r in burst if r.ok),
        "ttft_s": dist,
        "warmup_ttft_s": _dist(warm_ttfts),
        "burst_tokens_per_s": _tokens_per_s(records, lo, hi),
        "first_new_token": None if first is None else {**first, "decision_t": d},
        "first_new_serving_s": None if serving is None else serving[0] - d,
        "scale_decision_t": d,
        "scaled": raw.scaled,
        "scale_write_s": None if raw.scale_ack_t is None else raw.scale_ack_t - d,
        "plan_window_t": list(tl.plan_window(plans)),
        "weights_window_t": list(tl.weights_window(raw.rounds, originals, d)),
        "plans": plans,
        "first_token_vs_share": share_check(first, plans, j),
        "originals": raw.originals,
        "pods_seen": sorted({w.pod for r in raw.rounds for w in r.workers}),
        "send_lag_p99_s": percentile(
            [r.sent_s - r.scheduled_s for r in records if r.sent_s is not None], 99
        ),
        "wall_s": raw.wall_s,
        "spec": raw.spec,
        "series": tl.client_series(records, raw.wall_s),
        "workers": tl.worker_series(raw.rounds),
        "probe_errors": raw.probe_errors,
    }
    if per_request:
        doc["records"] = [r.to_json() for r in records]
        doc["samples"] = [w.to_json() for r in raw.rounds for w in r.workers]
    return doc


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _diff(a: float | None, b: float | None, unit: float = 1.0) -> float | None:
    return None if a is None or b is None else unit * (a - b)


def comparison(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """P50/P99 TTFT of every mode over stop-the-world's; cooperative's distance to
    all-cached and pre-scaled (ratios, attainment points, first-token seconds)."""
    base = rows.get(STW, {})
    out: dict[str, Any] = {
        "ttft_p99_vs_stop_the_world": {
            m: _ratio(r["ttft_p99_s"], base.get("ttft_p99_s")) for m, r in rows.items()
        },
        "ttft_p50_vs_stop_the_world": {
            m: _ratio(r["ttft_p50_s"], base.get("ttft_p50_s")) for m, r in rows.items()
        },
    }
    coop = rows.get("cooperative")
    for other in ("all_cached", "prescaled"):
        ref = rows.get(other)
        if coop is None or ref is None:
            continue
        out[f"cooperative_vs_{other}"] = {
            "ttft_p99_ratio": _ratio(coop["ttft_p99_s"], ref["ttft_p99_s"]),
            "ttft_p50_ratio": _ratio(coop["ttft_p50_s"], ref["ttft_p50_s"]),
            "slo_points": _diff(coop["slo_attainment"], ref["slo_attainment"], 100.0),
            "first_new_token_diff_s": _diff(coop["first_new_token_s"], ref["first_new_token_s"]),
        }
    return out


def goals(rows: Mapping[str, Mapping[str, Any]], comp: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    ratios = comp["ttft_p99_vs_stop_the_world"]
    for m in LIVE:
        if m not in rows or STW not in rows:
            continue
        r = ratios.get(m)
        fluid = comp.get("fluid_bound", {}).get(m)
        best = (
            ""
            if fluid is None
            else (
                f" (fluid bound {fluid['ttft_p99_ratio']:.2f} x, every node from coverage "
                f"{fluid['ceiling_ttft_p99_ratio']:.2f} x)"
            )
        )
        out.append(
            {
                "goal": f"{m}: burst P99 TTFT <= {P99_GOAL:g} x stop_the_world",
                "holds": None if r is None else r <= P99_GOAL,
                "detail": "-" if r is None else f"{r:.2f} x{best}",
            }
        )
    for m in LIVE:
        check = rows.get(m, {}).get("first_token_vs_share")
        if m not in rows:
            continue
        detail = (
            "no plan or no first token from new capacity"
            if check is None
            else f"{check['from_plan_start_s']:.1f} s after the plan's start vs first share "
            f"{check['share_s']:.1f} s ({check['share_source']}) + one step = "
            f"{check['bound_s']:.1f} s"
        )
        out.append(
            {
                "goal": f"{m}: first new token <= first pipeline's share + one step",
                "holds": None if check is None else check["holds"],
                "detail": detail,
            }
        )
    return out
