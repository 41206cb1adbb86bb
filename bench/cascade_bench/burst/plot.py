"""The bench's PNG, drawn from its JSON document alone: one panel per mode, sharing the
time axis. Left axis: output tokens/s the clients received (1 s bins). Right axis: the
queue, requests sent and still without a first token (solid), and the workers' own
waiting plus the gateway's queue as the probe saw them (dotted). Shaded: the burst
(light gray) and the ScalePlan's transfer window (blue; for all_cached, which has no
plan, the new pods' storage load, hatched). Lines: the scale decision (red dashed) and
the first token from new capacity (green). matplotlib is imported when drawing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _span(ax: Any, window: list[float | None], end: float, **style: Any) -> None:
    lo, hi = window
    if lo is not None:
        ax.axvspan(lo, end if hi is None else hi, **style)


def _panel(
    ax: Any, name: str, d: Mapping[str, Any], burst: list[float], end: float
) -> tuple[Any, Any]:
    """Draw one mode; returns its queue axis (for shared limits) and the legend handles."""
    series = d["series"]
    t = [b["t"] for b in series]
    ax.axvspan(burst[0], burst[1], color="0.92", zorder=0)
    if d["plan_window_t"][0] is not None:
        _span(ax, d["plan_window_t"], end, color="tab:blue", alpha=0.12, label="transfer")
    else:
        _span(
            ax, d["weights_window_t"], end, fill=False, hatch="//", ec="tab:blue", lw=0,
            label="load",
        )  # fmt: skip
    ax.plot(t, [b["tokens_per_s"] for b in series], color="tab:blue", lw=1.2, label="tokens/s")
    ax.set_ylabel("tokens/s")
    q = ax.twinx()
    q.plot(t, [b["queue"] for b in series], color="tab:orange", lw=1.2, label="queue (client)")
    workers = d["workers"]
    q.plot(
        [w["t"] for w in workers],
        [w["waiting"] + (w["gateway_queued"] or 0) for w in workers],
        color="tab:orange",
        ls=":",
        lw=1,
        label="waiting (workers + gateway)",
    )
    q.set_ylabel("queued")
    if d["scaled"]:
        ax.axvline(
            d["scale_decision_t"], color="tab:red", ls="--", lw=1, zorder=3, label="scale decision"
        )
    if d["first_new_token_s"] is not None:
        ax.axvline(
            d["scale_decision_t"] + d["first_new_token_s"],
            color="tab:green",
            lw=1,
            zorder=3,
            label="first new token",
        )
    p99, att = d["ttft_p99_s"], d["slo_attainment"]
    ax.set_title(
        f"{name}: burst TTFT p99 {'-' if p99 is None else f'{p99:.1f} s'}, "
        f"SLO {'-' if att is None else f'{100 * att:.0f} %'}",
        fontsize=9,
        loc="left",
    )
    return q, [ax.get_legend_handles_labels(), q.get_legend_handles_labels()]


def plot(doc: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["modes"]
    if not rows:
        raise ValueError("no mode ran: nothing to plot")
    end = max(d["wall_s"] for d in rows.values())
    height = 2.3 * len(rows) + 1.2  # inches: the panels and 0.9 for title and legend
    fig, axes = plt.subplots(len(rows), 1, figsize=(10, height), sharex=True)
    axes = [axes] if len(rows) == 1 else list(axes)
    burst = doc["choices"]["burst_t"]
    queues: list[Any] = []
    legend: dict[str, Any] = {}
    for ax, (name, d) in zip(axes, rows.items(), strict=True):
        q, handles = _panel(ax, name, d, burst, end)
        queues.append(q)
        for hs, labels in handles:
            legend.update(zip(labels, hs, strict=True))
    for group in (axes, queues):  # one scale for every mode
        top = max(a.get_ylim()[1] for a in group)
        for a in group:
            a.set_ylim(0, top)
    fig.legend(list(legend.values()), list(legend), loc="upper center", ncol=4, fontsize=7,
               bbox_to_anchor=(0.5, 1 - 0.3 / height))  # fmt: skip
    axes[-1].set_xlabel("seconds since the load started")
    axes[-1].set_xlim(0, end)
    fig.suptitle(
        f"cascade bench burst: 1 -> {doc['choices']['scale_to']}", fontsize=10, y=1 - 0.05 / height
    )
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.65 / height))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
