"""How a multicast's completion grows with its receivers: one point per method per
`cascade bench multicast --json` document (one run each at 1 -> 2, 4, 8, 15), the y axis
completion / (M/B), so a flat line is BlitzScale's claim. CPU busy is written beside
each point: a figure above ~60 % measures the two dev-host cores, not the fabric.

    python -m cascade_bench.receivers_plot OUT.png RUN.json [RUN.json ...]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Point:
    method: str
    receivers: int
    ratio: float  # completion / (M/B)
    busy: float | None  # host CPU busy during the transfer, 0..1


def points(docs: Iterable[Mapping[str, Any]]) -> list[Point]:
    """Every method's point in every document, sorted by method then receivers."""
    out = []
    for doc in docs:
        params = doc["params"]
        receivers = int(params["nodes"]) - int(params.get("k", 1))
        for method, row in doc["results"].items():
            if row.get("ratio") is not None:
                out.append(Point(method, receivers, float(row["ratio"]), row.get("host_busy")))
    return sorted(out, key=lambda p: (p.method, p.receivers))


def plot(found: list[Point], title: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for method in sorted({p.method for p in found}):
        mine = [p for p in found if p.method == method]
        ax.plot([p.receivers for p in mine], [p.ratio for p in mine], marker="o", label=method)
        for p in mine:
            if p.busy is not None:
                ax.annotate(f"{p.busy:.0%}", (p.receivers, p.ratio), fontsize=7,
                            textcoords="offset points", xytext=(4, 4))  # fmt: skip
    ax.axhline(1.0, color="black", lw=1, label="M/B (physical bound)")
    ax.axhline(1.10, color="grey", lw=1, ls="--", label="goal 1.10x")
    ax.set_xlabel("receivers (one source)")
    ax.set_ylabel("completion / (M/B)")
    ax.set_xticks(sorted({p.receivers for p in found}))
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, files = Path(argv[0]), [Path(a) for a in argv[1:]]
    docs = [json.loads(f.read_text()) for f in files]
    p = docs[0]["params"]
    title = (
        f"cascade bench multicast: {p['model_bytes'] / 1e6:.0f} MB in {p['blocks']} blocks, "
        f"{p['nic_mbit']} Mbit/s NICs, MTU {p.get('mtu', 1500)}\n(labels: host CPU busy)"
    )
    plot(points(docs), title, out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
