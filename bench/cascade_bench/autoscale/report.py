"""The bench's table and picture, drawn from its JSON document alone.

`table`: a header with every choice the numbers depend on, one row per cluster run,
the simulator's rows under them, and each goal with PASS / FAIL. `plot`: the load
(requests per 30 s by class), instances over time per run (the simulated Cascade run
dashed), interactive TTFT p99 per 30 s against the SLO, and bars of interactive SLO
attainment and instance-seconds, measured beside simulated. matplotlib (the bench
extra) is imported when drawing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cascade_bench.table import format_rows

COLUMNS = [
    "run",
    "interactive SLO",
    "batch SLO",
    "TTFT p99 int",
    "TTFT p99 batch",
    "instance-s",
    "mean inst",
    "peak",
    "scalings",
    "429",
    "errors",
]
COLORS = {
    "cascade": "tab:blue",
    "fixed_max": "tab:gray",
    "kpa": "tab:orange",
    "fixed_min": "tab:red",
    "fixed_local": "tab:green",
}


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f} s"


def _row(name: str, d: Mapping[str, Any], errors: str) -> list[str]:
    mean = d.get("mean_instances")
    return [
        name,
        _pct(d["slo_attainment"].get("interactive")),
        _pct(d["slo_attainment"].get("batch")),
        _s(d["ttft_p99_s"].get("interactive")),
        _s(d["ttft_p99_s"].get("batch")),
        f"{d['instance_seconds']:.0f}",
        "-" if mean is None else f"{mean:.2f}",
        str(d["peak_instances"]),
        str(len(d["scaling_events"])),
        str(d["rejected"]),
        errors,
    ]


def header(doc: Mapping[str, Any]) -> list[str]:
    ch = doc["choices"]
    ld, cl, pr = ch["load"], ch["cluster"], ch["profile"]
    spec = ch["first_run_spec"]
    sc, slo = spec["scaling"], ch["slo"] or {}
    ibp = sc.get("interactiveBackpressure", {}).get("target")
    down = sc.get("behavior", {}).get("scaleDown", {}).get("stabilizationWindowSeconds")
    peak = max(p[1] for p in pr["curve"])
    n, cls = ld["sent_requests"], ld["sent_classes"]
    sim = doc["simulate"]["config"]
    end = "end" if ld["duration_s"] is None else f"+{ld['duration_s']:g} s"

    def slo_text(c: str) -> str:
        s = slo.get(c, {})
        itl = "-" if s.get("itl_s") is None else f"{1e3 * s['itl_s']:g} ms"
        return f"TTFT {s.get('ttft_s', 0):g} s, ITL {itl}"

    return [
        f"autoscale: {Path(ld['trace']).name} [{ld['start_s']:g} s, {end}], "
        f"rate x{ld['rate_scale']:.3f} ({ld['rate_rule']}): {n} requests "
        f"({cls['interactive']} interactive, {cls['batch']} batch); busiest minute needs "
        f"{ld['peak_instances_demand']:.2f} instances at full speed "
        f"(maxReplicas x {ch['peak_utilization']:g})",
        f"cluster: {cl['nodes']} nodes at {cl['node_cpu']} core, one instance per node; "
        f"profile {pr['model']} at {pr['node_cpu']} core, peak {peak:.0f} tok/s, demand at "
        f"batch {ld['demand_batch']}",
        f"manifest: replicas {spec['replicas']} in [{sc.get('minReplicas', 1)}, "
        f"{sc['maxReplicas']}], max batch {spec.get('engine', {}).get('maxBatchSize', 64)}, "
        f"Θ {'auto' if ibp is None else ibp}, scale-down window {down} s; SLO interactive "
        f"{slo_text('interactive')}; batch {slo_text('batch')}",
        f"KPA: target {ch['kpa']['target']:g} in flight per instance, {ch['kpa']['window_s']:g} s "
        f"window; simulate: time to ready {sim['time_to_ready_s']:.1f} s "
        f"({sim['time_to_ready_source']}){_measured_ready(sim)}",
    ]


def table(doc: Mapping[str, Any]) -> str:
    rows = [list(COLUMNS)]
    for name, d in doc["runs"].items():
        rows.append(_row(name, d, str(d["errors"])))
    for name, d in doc["simulate"]["runs"].items():
        rows.append(_row(f"sim {name}", d, "-"))
    lines = [*header(doc), "", format_rows(rows), "", bins_table(doc), ""]
    for name, err in doc["simulate"]["error"].items():
        pts, rel = err["attainment_points"], err["instance_seconds_rel"]
        att = pts.get("interactive")
        lines.append(
            f"simulate vs {name}: interactive attainment "
            f"{'-' if att is None else f'{100 * att:+.1f} pts'}, instance-s "
            f"{'-' if rel is None else f'{rel:+.1%}'}"
        )
    lines.append("")
    for g in doc["goals"]:
        verdict = {True: "PASS", False: "FAIL", None: " -- "}[g["holds"]]
        lines.append(f"[{verdict}] {g['goal']}: {g['detail']}")
    return "\n".join(lines)


def bins_table(doc: Mapping[str, Any], cls: str = "interactive") -> str:
    """Per 30 s of arrivals: the share of requests within the TTFT SLO, each run beside
    the simulator's (where a run's misses are, and where the model disagrees)."""

    def met(d: Mapping[str, Any]) -> dict[float, float]:
        return {b["t"]: b["ttft_met"] for b in d.get("ttft_bins") or () if b["class"] == cls}

    sims = doc["simulate"]["runs"]
    cols = [(n, met(d)) for n, d in doc["runs"].items()]
    cols += [(f"sim {n}", met(d)) for n, d in sims.items() if n in doc["runs"]]
    starts = sorted({t for _, m in cols for t in m})
    rows = [[f"{cls} TTFT met, from"] + [n for n, _ in cols]]
    for t in starts:
        rows.append([f"{t:g} s"] + [_pct(m.get(t)) for _, m in cols])
    return format_rows(rows)


def plot(doc: Mapping[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs, sims = doc["runs"], doc["simulate"]["runs"]
    fig = plt.figure(figsize=(13, 9))
    grid = fig.add_gridspec(3, 3)
    load_ax = fig.add_subplot(grid[0, :2])
    inst_ax = fig.add_subplot(grid[1, :2], sharex=load_ax)
    ttft_ax = fig.add_subplot(grid[2, :2], sharex=load_ax)
    att_ax, cost_ax = fig.add_subplot(grid[0:2, 2]), fig.add_subplot(grid[2, 2])
    # A dry run has simulated runs only: their arrivals, instances and bars stand alone.
    first = next(iter(runs.values()), None) or next(iter(sims.values()), None)
    if first is not None:
        below: dict[float, int] = {}
        for cls, color in (("interactive", "tab:green"), ("batch", "tab:purple")):
            bins = {b["t"]: b["requests"] for b in first["ttft_bins"] if b["class"] == cls}
            ts = sorted(bins)
            load_ax.bar(
                [t / 60 for t in ts],
                [bins[t] for t in ts],
                bottom=[below.get(t, 0) for t in ts],
                width=0.45,
                align="edge",
                color=color,
                alpha=0.7,
                label=cls,
            )
            for t in ts:
                below[t] = below.get(t, 0) + bins[t]
    load_ax.set_ylabel("requests / 30 s")
    load_ax.legend(loc="upper right", fontsize=8)
    load_ax.set_title("load (arrivals by class)")
    for name, d in runs.items():
        tl = d["timeline"]
        inst_ax.step(
            [s["t"] / 60 for s in tl],
            [s["pods"] for s in tl],
            where="post",
            color=COLORS.get(name),
            label=f"{name} pods",
        )
        _tail(ttft_ax, d, name, ".-", name)
    for name, sim in sims.items():
        pts = sim.get("instances") or ()
        inst_ax.step(
            [p[0] / 60 for p in pts],
            [p[1] for p in pts],
            where="post",
            color=COLORS.get(name),
            ls="--",
            lw=0.9,
            label=f"{name} simulated",
        )
        if not runs:  # a dry run: the simulated tail is all there is to show
            _tail(ttft_ax, sim, name, ".--", f"{name} simulated")
    inst_ax.set_ylabel("instances (incl. starting)")
    inst_ax.legend(loc="upper right", fontsize=7, ncol=2)
    slo = (doc["choices"]["slo"] or {}).get("interactive", {}).get("ttft_s")
    if slo:
        ttft_ax.axhline(slo, color="k", ls=":", lw=0.8, label="SLO")
    ttft_ax.set_yscale("log")
    ttft_ax.set_ylabel("interactive TTFT p99 / 30 s (s)")
    ttft_ax.set_xlabel("minutes since the replay started")
    ttft_ax.legend(loc="upper right", fontsize=7, ncol=3)
    names = list(runs) or list(sims)
    xs = range(len(names))
    for ax, key, label in (
        (att_ax, "att", "interactive SLO attainment"),
        (cost_ax, "cost", "instance-seconds"),
    ):
        measured = [_value(runs[n], key) if n in runs else 0.0 for n in names]
        simulated = [_value(sims[n], key) if n in sims else 0.0 for n in names]
        ax.bar(
            [x - 0.2 for x in xs],
            measured,
            0.4,
            label="cluster",
            color=[COLORS.get(n, "tab:blue") for n in names],
        )
        ax.bar(
            [x + 0.2 for x in xs],
            simulated,
            0.4,
            label="simulated",
            color="none",
            edgecolor="k",
            hatch="//",
        )
        ax.set_xticks(list(xs), names, fontsize=8)
        ax.set_title(label, fontsize=10)
        ax.legend(fontsize=7)
    att_ax.set_ylim(0, 1.05)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _tail(ax: Any, run: Mapping[str, Any], name: str, fmt: str, label: str) -> None:
    """A run's interactive TTFT p99 per 30 s bin, at the bins' middles."""
    bins = [b for b in run["ttft_bins"] if b["class"] == "interactive" and b["ttft_p99_s"]]
    xs, ys = [(b["t"] + 15) / 60 for b in bins], [b["ttft_p99_s"] for b in bins]
    ax.plot(xs, ys, fmt, color=COLORS.get(name), lw=0.9, label=label)


def _value(d: Mapping[str, Any], key: str) -> float:
    if key == "att":
        return float(d["slo_attainment"].get("interactive") or 0.0)
    return float(d["instance_seconds"])


def _measured_ready(sim: dict[str, Any]) -> str:
    """The scale-ups' measured time to ready beside the one the simulator was given."""
    measured = sim.get("time_to_ready_measured_s")
    return "" if measured is None else f"; the runs' scale-ups measured {measured:.1f} s"
