"""The cold-start PNG: one stacked bar per mode and case, a segment per start-up stage."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cascade_bench.coldstart.modes import CASES, MODES
from cascade_bench.coldstart.report import stage_names


def plot(doc: Mapping[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = stage_names(doc)
    fig, axes = plt.subplots(1, len(CASES), figsize=(13.5, 4.5), sharey=True)
    colors = plt.get_cmap("tab10")
    for ax, case in zip(axes, CASES, strict=True):
        rows = doc["modes"] if case == "zero_to_one" else doc["one_to_two"]
        shown = [m for m in MODES if m in rows and not rows[m].get("skipped")]
        for x, mode in enumerate(shown):
            row, bottom = rows[mode], 0.0
            stages = row.get("stages") or {}
            for i, stage in enumerate(names):
                h = float(stages.get(stage, 0.0))
                ax.bar(x, h, bottom=bottom, color=colors(i % 10), label=stage if x == 0 else None)
                bottom += h
            ax.plot([x - 0.4, x + 0.4], [row["to_first_token_s"]] * 2, color="black", lw=1.5)
        ax.set_xticks(range(len(shown)), shown)
        ax.set_title(f"{case.replace('_', ' ')} (line: decision -> first token)")
        ax.set_ylabel("seconds")
    # Beside the plots, not over the first bar (the tallest, storage, stands there).
    axes[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(f"cascade bench coldstart: {doc.get('model_bytes') or 0:,} B model")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
