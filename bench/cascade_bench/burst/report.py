"""The bench's JSON document and its table, the table drawn from the document alone.

Top-level keys: `benchmark` ("burst"), `choices` (every setting the numbers depend on:
cluster, profile, base spec and each mode's patch, SLO, N, multicast pace), `load`
(`workload.build`'s description), `modes` (per mode: `ttft_p50_s`, `ttft_p99_s`,
`first_new_token_s`, `slo_attainment`, `errors`, and the rest of `metrics.mode_doc`),
`comparison` (ratios to stop-the-world, cooperative vs all-cached and pre-scaled),
`goals` and `wall_s`. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cascade_bench.burst import bound, metrics
from cascade_bench.table import format_rows

COLUMNS = [
    "mode",
    "TTFT p50",
    "TTFT p99",
    "p99/stw",
    "first new token",
    "SLO",
    "errors",
    "burst reqs",
    "tok/s",
    "transfer",
    "pipelines",
]


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


def _x(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _window(w: list[float | None]) -> str:
    lo, hi = w
    if lo is None:
        return "-"
    return f"{lo:.1f}-{'?' if hi is None else f'{hi:.1f}'} s"


def _pipelines(plans: list[Mapping[str, Any]]) -> str:
    states = [p.get("state", "?") for plan in plans for p in plan.get("pipelines", [])]
    return "-" if not states else ",".join(states)


def load_line(load: Mapping[str, Any]) -> str:
    w, b = load["warmup"], load["burst"]
    return (
        f"load: {Path(load['trace']).name}, burst = trace [{load['burst_start_trace_s']:g} s, "
        f"+{load['burst_s']:g} s) ({load['window_rule']}) x{b['rate_scale']:.2f}: "
        f"{b['sent_requests']} requests, {b['demand']:.2f} instances of demand; warm-up "
        f"{load['warmup_s']:g} s steady: {w['sent_requests']} requests every "
        f"{w['interval_s']:.2f} s, "
        f"{w['demand']:.2f} instances (demand at batch {load['demand_batch']}, "
        f"{load['decode_tokens_per_s']:.0f} tok/s decode, "
        f"{load['prefill_tokens_per_s']:.0f} tok/s prefill)"
    )


def document(
    choices: Mapping[str, Any],
    load: Mapping[str, Any],
    raw: Mapping[str, metrics.ModeRaw],
    judge: metrics.Judge,
    per_request: bool,
    wall_s: float,
) -> dict[str, Any]:
    rows = {m: metrics.mode_doc(r, judge, per_request) for m, r in raw.items()}
    comp = metrics.comparison(rows)
    comp["fluid_bound"] = bound.from_run(
        rows,
        choices["scale_to"],
        choices["multicast"].get("blocks") or 1,
        [(t, c) for t, c in load["burst"]["arrivals"]],
    )
    return {
        "benchmark": "burst",
        "choices": dict(choices)
        | {
            "burst_t": list(judge.burst_t),
            "ttft_slo_s": judge.ttft_slo_s,
            "step_s": judge.step_s,
            "probe_period_s": judge.period_s,
        },
        "load": dict(load),
        "modes": rows,
        "comparison": comp,
        "goals": metrics.goals(rows, comp),
        "wall_s": wall_s,
    }


def header(doc: Mapping[str, Any]) -> list[str]:
    ch = doc["choices"]
    cl, mc = ch["cluster"], ch["multicast"]
    bound = ch.get("transfer_bound_s")
    return [
        load_line(doc["load"]),
        f"cluster: {cl['nodes']} nodes at {cl['node_cpu']} core, {ch['scale_to']} instances "
        f"after the decision ({cl.get('gpus_per_instance')} GPUs each); model "
        f"{ch['model_uri']} ({ch['model_bytes'] or 0:,} bytes), multicast {mc.get('strategy')} "
        f"in {mc.get('blocks')} blocks at {mc.get('rateMbit')} Mbit/s per sender "
        f"(M/R {'-' if bound is None else f'{bound:.1f} s'})",
        f"SLO: interactive TTFT {ch['ttft_slo_s']:g} s (burst requests scheduled in "
        f"[{ch['burst_t'][0]:g}, {ch['burst_t'][1]:g}) s); scale decision at the burst's start; "
        f"probe every {ch['probe_period_s']:g} s",
    ]


def table(doc: Mapping[str, Any]) -> str:
    rows = [list(COLUMNS)]
    ratios = doc["comparison"]["ttft_p99_vs_stop_the_world"]
    for name, d in doc["modes"].items():
        rows.append(
            [
                name,
                _s(d["ttft_p50_s"]),
                _s(d["ttft_p99_s"]),
                _x(ratios.get(name)),
                _s(d["first_new_token_s"]),
                _pct(d["slo_attainment"]),
                str(d["errors"]),
                str(d["requests"]),
                f"{d['burst_tokens_per_s']:.0f}",
                _window(d["plan_window_t"]),
                _pipelines(d["plans"]),
            ]
        )
    lines = [*header(doc), ""]
    if len(rows) > 1:
        lines += [format_rows(rows), ""]
    for key in ("cooperative_vs_all_cached", "cooperative_vs_prescaled"):
        c = doc["comparison"].get(key)
        if c:
            pts, ft = c["slo_points"], c["first_new_token_diff_s"]
            lines.append(
                f"{key.replace('_', ' ')}: P99 {_x(c['ttft_p99_ratio'])}, P50 "
                f"{_x(c['ttft_p50_ratio'])}, SLO {'-' if pts is None else f'{pts:+.1f} pts'}, "
                f"first new token {'-' if ft is None else f'{ft:+.1f} s'}"
            )
    for g in doc["goals"]:
        verdict = {True: "PASS", False: "FAIL", None: " -- "}[g["holds"]]
        lines.append(f"[{verdict}] {g['goal']}: {g['detail']}")
    return "\n".join(lines)
