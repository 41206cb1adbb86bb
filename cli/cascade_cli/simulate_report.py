"""`cascade simulate`'s table and timeline plot, from the run documents and results.

The table has one row per policy (so `--policy all` compares them side by side) under a
header that says what was simulated: the trace window and its scaling, the profile, the
deployment's bounds and SLOs, the model's knobs. The plot has one column per policy:
instances by role (stacked; starting ones dashed), queue depths, and per-minute P99
TTFT per class against its SLO. matplotlib (the bench extra) is imported when drawing.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cascade_bench.table import format_rows
from cascade_protocol.stats import percentile
from cascade_sim.config import BATCH, INTERACTIVE, Deployment, SimConfig, Slo
from cascade_sim.metrics import completed
from cascade_sim.profile import CapacityProfile
from cascade_sim.sim import Result


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


def _slo(s: Slo) -> str:
    itl = "-" if s.itl_s is None else f"{1e3 * s.itl_s:g} ms"
    return f"TTFT {s.ttft_s:g} s, ITL {itl}"


def header(
    load: Mapping[str, Any], dep: Deployment, profile: CapacityProfile, cfg: SimConfig
) -> str:
    spec = dep.spec
    end = "end" if load["duration_s"] is None else f"+{load['duration_s']:g} s"
    theta = "auto" if spec.theta == "auto" else f"{spec.theta:g}"
    cpu = "" if profile.node_cpu is None else f" at {profile.node_cpu:g} core"
    top = "-" if dep.max_replicas is None else str(dep.max_replicas)
    n, b = load["simulated_requests"], load["simulated_batch"]
    return "\n".join(
        [
            f"simulate: {Path(load['trace']).name} [{load['start_s']:g} s, {end}], speedup "
            f"{load['speedup']:g}, rate x{load['rate_scale']:.3g}: {n} requests ({n - b} "
            f"interactive, {b} batch); busiest minute needs "
            f"{load['peak_instances_demand']:.1f} instances at batch {load['demand_batch']}",
            f"profile {profile.model or '?'}{cpu} (peak {profile.peak_tokens_per_s:.0f} tok/s); "
            f"replicas {dep.replicas} in [{spec.min_replicas}, {top}], owner {spec.owner}, "
            f"Θ {theta} ± {spec.delta:g}, max batch {dep.engine_max_batch}",
            f"SLO interactive {_slo(dep.slos[INTERACTIVE])}; batch {_slo(dep.slos[BATCH])}",
            f"time to ready {cfg.time_to_ready_s:g} s, tick {cfg.tick_s:g} s, routing "
            f"{cfg.routing}, slack {cfg.slack}, local autoscaler {cfg.local}",
        ]
    )


def table(
    docs: Mapping[str, Mapping[str, Any]],
    load: Mapping[str, Any],
    dep: Deployment,
    profile: CapacityProfile,
    cfg: SimConfig,
) -> str:
    rows = [
        [
            "policy",
            "interactive SLO",
            "batch SLO",
            "TTFT p99 int",
            "TTFT p99 batch",
            "instance-s",
            "mean inst",
            "peak",
            "scalings",
            "rejected",
            "wall s",
        ]
    ]
    for name, d in docs.items():
        mean = d["mean_instances"]
        rows.append(
            [
                name,
                _pct(d["slo_attainment"][INTERACTIVE]),
                _pct(d["slo_attainment"][BATCH]),
                _s(d["ttft_p99_s"][INTERACTIVE]),
                _s(d["ttft_p99_s"][BATCH]),
                f"{d['instance_seconds']:.0f}",
                "-" if mean is None else f"{mean:.1f}",
                str(d["peak_instances"]),
                str(len(d["scaling_events"])),
                str(d["rejected"]),
                f"{d['wall_s']:.2f}",
            ]
        )
    return header(load, dep, profile, cfg) + "\n\n" + format_rows(rows)


def ttft_per_minute(result: Result, batch: bool) -> tuple[list[float], list[float]]:
    """(minute, P99 TTFT) over completed requests by arrival minute."""
    by_minute: dict[int, list[float]] = defaultdict(list)
    for r in result.requests:
        if r.batch == batch and completed(r):
            by_minute[math.floor(r.arrival / 60)].append(r.ttft_s)
    minutes = sorted(by_minute)
    return [m + 0.5 for m in minutes], [percentile(by_minute[m], 99) or 0.0 for m in minutes]


def plot(results: Mapping[str, Result], slos: Mapping[str, Slo], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = len(results)
    fig, axes = plt.subplots(3, cols, figsize=(5.5 * cols, 9), sharex="col", squeeze=False)
    for c, (name, res) in enumerate(results.items()):
        tl = res.timeline
        t = [row["t"] / 60 for row in tl]
        ax = axes[0][c]
        roles = ("interactive", "mixed", "batch")
        ax.stackplot(t, *[[row[r] for row in tl] for r in roles], labels=roles, step="post")
        ax.plot(t, [row["starting"] for row in tl], "k--", lw=0.8, label="starting")
        ax.set_title(name)
        ax.set_ylabel("instances")
        ax.legend(loc="upper left", fontsize=7)
        ax = axes[1][c]
        ax.plot(t, [row["queued_interactive"] for row in tl], label="queued interactive")
        ax.plot(t, [row["queued_batch"] for row in tl], label="queued batch")
        ax.plot(t, [row["in_flight"] for row in tl], lw=0.6, label="in flight")
        ax.set_ylabel("requests")
        ax.legend(loc="upper left", fontsize=7)
        ax = axes[2][c]
        for batch, cls in ((False, INTERACTIVE), (True, BATCH)):
            xs, ys = ttft_per_minute(res, batch)
            line = ax.plot(xs, ys, marker=".", lw=0.8, label=f"{cls} TTFT p99")[0]
            ax.axhline(slos[cls].ttft_s, color=line.get_color(), ls=":", lw=0.8)
        ax.set_yscale("log")
        ax.set_ylabel("TTFT p99 per minute (s)")
        ax.set_xlabel("minutes")
        ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
