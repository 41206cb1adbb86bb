"""The replay's report: a header that says how the trace was scaled, two tables, and JSON.

The JSON document is the record of a run: the trace, every scaling choice, the SLOs, and a
summary per class (`interactive`, `batch`, `all`). The table is rendered from it alone, in
the layout of the multicast benchmark's (`cascade_bench.table.format_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cascade_bench.table import format_rows

CLASS_ROWS = ("interactive", "batch", "all")


def _num(value: float | None, fmt: str, scale: float = 1.0) -> str:
    return "-" if value is None else f"{value * scale:{fmt}}"


def _pct(part: int, whole: int) -> str:
    return "-" if not whole else f"{part / whole:.1%}"


def _limit(value: float | None, unit: str, scale: float = 1.0) -> str:
    return "any" if value is None else f"<= {value * scale:g} {unit}"


def scaling_lines(doc: Mapping[str, Any]) -> list[str]:
    """How the trace became the load: window, speed, token scaling, classes, SLOs."""
    s = doc["scaling"]
    end = s["start_s"] + s["duration_s"] if s["duration_s"] is not None else None
    window = f"trace time {s['start_s']:g}-" + (f"{end:g} s" if end is not None else "end")
    cap = f", first {s['max_requests']}" if s["max_requests"] is not None else ""
    rate = _num(s["offered_rps"], ".2f")
    lines = [
        f"replay: {doc['trace']['name']}: {s['selected_requests']} of {s['trace_requests']} "
        f"requests ({window}{cap}), speedup {s['speedup']:g}x, "
        f"{s['schedule_span_s']:.1f} s schedule, offered {rate} req/s"
    ]
    for label, column, key in (
        ("prompt", "ContextTokens", "prompt_tokens"),
        ("output", "GeneratedTokens", "output_tokens"),
    ):
        t = s[key]
        lines.append(
            f"  {label} tokens = round({column} x {t['scale']:g}) in [{t['min']}, {t['max']}]: "
            f"mean {_num(t['trace_mean'], '.1f')} -> {_num(t['sent_mean'], '.1f')}, "
            f"{t['clamped']} clamped"
        )
    counts = s["class_counts"]
    lines.append(
        f"  classes: {counts['interactive']} interactive, {counts['batch']} batch "
        f"(batch fraction {s['batch_fraction']:g}, seed {s['seed']})"
    )
    slo = doc["slo"]
    lines.append(
        "  SLO: "
        + "; ".join(
            f"{c} TTFT {_limit(slo[c]['ttft_s'], 's')}, "
            f"mean ITL {_limit(slo[c]['itl_s'], 'ms', 1e3)}"
            for c in ("interactive", "batch")
        )
    )
    return lines


def outcome_table(classes: Mapping[str, Mapping[str, Any]]) -> str:
    rows = [
        ["class", "requests", "completed", "429", "errors", "out tok/s", "req/s", "SLO met",
         "TTFT ok", "ITL ok"],
    ]  # fmt: skip
    for name in CLASS_ROWS:
        c = classes[name]
        n, slo, tp = c["requests"], c["slo"], c["throughput"]
        rows.append(
            [
                name,
                str(n),
                str(c["completed"]),
                str(c["rejected_429"]),
                str(c["errors"]),
                _num(tp["output_tokens_per_s"], ".1f"),
                _num(tp["requests_per_s"], ".2f"),
                _pct(slo["met"], n),
                _pct(slo["ttft_met"], n),
                _pct(slo["itl_met"], n),
            ]
        )
    return format_rows(rows)


def latency_table(classes: Mapping[str, Mapping[str, Any]]) -> str:
    rows = [
        ["class", "TTFT p50 s", "p90", "p99", "ITL p50 ms", "p90", "p99", "E2E p50 s", "p90",
         "p99"],
    ]  # fmt: skip
    for name in CLASS_ROWS:
        c = classes[name]
        row = [name]
        for key, fmt, scale in (
            ("ttft_s", ".3f", 1.0),
            ("itl_s", ".1f", 1e3),
            ("e2e_s", ".2f", 1.0),
        ):
            row += [_num(c[key][f"p{q}"], fmt, scale) for q in (50, 90, 99)]
        rows.append(row)
    return format_rows(rows)


def report(doc: Mapping[str, Any]) -> str:
    """The printout of a finished replay, from its JSON document."""
    t = doc["target"]
    lines = scaling_lines(doc)
    lag = doc["send_lag_s"]
    lines.append(
        f"  target {t['url']} model {t['model']}, class via {t['class_via']}; "
        f"wall {doc['wall_s']:.1f} s, {doc['sent']} sent, send lag p99 "
        f"{_num(lag['p99'], '.3f')} s max {_num(lag['max'], '.3f')} s"
        + ("; INTERRUPTED" if doc["interrupted"] else "")
    )
    classes = doc["classes"]
    lines += ["", outcome_table(classes), "", latency_table(classes)]
    kinds = classes["all"]["error_kinds"]
    if kinds:
        lines.append("\nerrors: " + ", ".join(f"{k} {v}" for k, v in kinds.items()))
    return "\n".join(lines)


def dry_run_report(doc: Mapping[str, Any]) -> str:
    """The printout of `--dry-run`: the schedule that would be sent."""
    s = doc["schedule"]
    lines = scaling_lines(doc)
    lines.append(
        f"  arrivals per replay second: mean {_num(s['arrivals_per_s']['mean'], '.2f')}, "
        f"max {s['arrivals_per_s']['max']}; prompt tokens p50/p99/max "
        f"{s['prompt_tokens']['p50']:g}/{s['prompt_tokens']['p99']:g}/{s['prompt_tokens']['max']:g}"
        f", output tokens p50/p99/max {s['output_tokens']['p50']:g}/"
        f"{s['output_tokens']['p99']:g}/{s['output_tokens']['max']:g}"
        if doc["requests"]
        else "  nothing to send: the window holds no request"
    )
    lines.append("dry run: nothing sent")
    return "\n".join(lines)
