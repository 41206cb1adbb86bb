"""The bench's JSON document, from the raw runs, the load and the simulator's runs.

Top-level keys: `benchmark`, `choices` (every setting the numbers depend on: cluster,
profile, manifest, load, SLOs, KPA), `runs` (one row per cluster run: see
`compare.run_row`, plus `timeline`, `ttft_bins`, `time_to_ready_s`, `host_busy_cores`,
`kpa_decisions`, the replay's per-class summaries), `simulate` (the simulator's rows,
its config, and predicted-minus-measured per run), `goals`, `wall_s`. Pure: the runs
arrive as plain values; the table and the PNG are drawn from this document alone.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from cascade_bench.autoscale import compare
from cascade_protocol.stats import percentile

BIN_S = 30.0  # TTFT and attainment bins for the plot


def ttft_bins(
    records: Sequence[Mapping[str, Any]], ttft_slo: Mapping[str, float | None], bin_s: float = BIN_S
) -> list[dict[str, Any]]:
    """Per `bin_s` of arrival time and class: requests, TTFT p99 of the completed ones,
    and the share that completed within the TTFT SLO."""
    groups: dict[tuple[int, str], list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(math.floor(r["scheduled_s"] / bin_s), r["class"])].append(r)
    out = []
    for (k, cls), rs in sorted(groups.items()):
        ttfts = [r["ttft_s"] for r in rs if r["error"] is None and r["ttft_s"] is not None]
        bound = ttft_slo.get(cls)
        met = sum(1 for t in ttfts if bound is None or t <= bound)
        out.append(
            {
                "t": k * bin_s,
                "class": cls,
                "requests": len(rs),
                "ttft_p99_s": percentile(ttfts, 99),
                "ttft_met": met / len(rs),
            }
        )
    return out


def run_doc(raw: Mapping[str, Any], per_request: bool) -> dict[str, Any]:
    replay = raw["replay"]
    row = compare.run_row(replay, raw["samples"])
    slo = {c: replay["slo"][c]["ttft_s"] for c in compare.CLASSES}
    row.update(
        timeline=[s.to_json() for s in raw["samples"]],
        ttft_bins=ttft_bins(replay.get("records") or [], slo),
        time_to_ready_s=raw["time_to_ready_s"],
        nodes_used=raw["nodes_used"],
        pods_seen=raw["pods_seen"],
        host_busy_cores=raw["host_busy_cores"],
        kpa_decisions=raw["kpa_decisions"],
        loop_errors=raw["loop_errors"],
        replicas_at_start=raw["spec"]["replicas"],
        classes={c: replay["classes"][c] for c in (*compare.CLASSES, "all")},
    )
    if per_request:
        row["records"] = replay.get("records")
    return row


def build(
    cfg: Any,
    raw: Mapping[str, Mapping[str, Any]],
    load: Any,
    profile: Any,
    sims: Mapping[str, Mapping[str, Any]],
    sim_config: Mapping[str, Any],
    cluster: Mapping[str, Any],
    wall_s: float,
) -> dict[str, Any]:
    runs = {name: run_doc(r, cfg.per_request) for name, r in raw.items()}
    spec = next(iter(raw.values()))["spec"] if raw else dict(cfg.base_spec)
    errors = {
        name: compare.prediction_error(runs[name], sims[name]) for name in runs if name in sims
    }
    target = cfg.kpa_target or 0.7 * int(cfg.base_spec.get("engine", {}).get("maxBatchSize", 64))
    return {
        "benchmark": "autoscale",
        "choices": {
            "cluster": dict(cluster),
            "profile": {
                "path": str(cfg.profile),
                "model": profile.model,
                "node_cpu": profile.node_cpu,
                "curve": [[p.batch, p.tokens_per_s] for p in profile.points],
            },
            "manifest": dict(cfg.base_spec),
            "slo": _slo(cfg.base_spec),
            "load": load.doc,
            "peak_utilization": cfg.peak_utilization,
            "scaling": asdict(cfg.scaling),
            "kpa": {
                "target": target,
                "window_s": cfg.kpa_window_s,
                "rule": "ceil((in_flight + queued) / target), max over the window, "
                "clamped to [minReplicas, maxReplicas], every 2 s",
            },
            "client_timeout_s": cfg.timeout_s,
            "first_run_spec": spec,
        },
        "runs": runs,
        "simulate": {"config": dict(sim_config), "runs": dict(sims), "error": errors},
        "goals": compare.goals(runs, sims),
        "wall_s": wall_s,
    }


def _slo(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Per class {ttft_s, itl_s}, as the runs judge them (the replay's Slo)."""
    from cascade_bench.autoscale.manifest import deployment, run_spec

    slos = deployment(run_spec(spec, "cascade")).slos
    return {c: {"ttft_s": s.ttft_s, "itl_s": s.itl_s} for c, s in slos.items()}
