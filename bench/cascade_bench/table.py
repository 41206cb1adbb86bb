"""The human-readable report: one row per method, then the link and loopback checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cascade_bench.results import MethodSummary

LABELS = {
    "chain": "Cascade chain",
    "binomial": "Cascade binomial",
    "unicast": "parallel unicast",
    "gloo": "torch.distributed gloo",
    "bound": "lower bound M/B",
}


def _num(value: float | None, fmt: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{fmt}}{suffix}"


def format_rows(rows: Sequence[Sequence[str]]) -> str:
    """Left-align the first column, right-align the rest."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def method_table(results: Mapping[str, MethodSummary], bound_s: float) -> str:
    rows: list[list[str]] = [
        [
            "method",
            "completion s",
            "first model s",
            "x M/B",
            "vs unicast",
            "CPU busy",
            "cpu s",
            "note",
        ]
    ]
    for name, m in results.items():
        errors = sorted({r.error for r in m.runs if r.error})
        lingered = max((len(r.lingering) for r in m.runs), default=0)
        if lingered:
            errors.append(f"{lingered} did not exit after reporting (killed)")
        rows.append(
            [
                LABELS.get(name, name),
                _num(m.completion_s, ".2f"),
                _num(m.first_model_s, ".2f"),
                _num(m.ratio, ".3f"),
                _num(m.speedup_vs_unicast, ".2f", "x"),
                _num(None if m.host_busy is None else 100 * m.host_busy, ".0f", "%"),
                _num(m.cpu_s, ".1f"),
                "; ".join(errors)[:60],
            ]
        )
    rows.append([LABELS["bound"], f"{bound_s:.2f}", f"{bound_s:.2f}", "1.000", "", "", "", ""])
    return format_rows(rows)


def report(doc: Mapping[str, Any], results: Mapping[str, MethodSummary]) -> str:
    """The whole printout from the JSON document (params, link, loopback) and summaries."""
    p = doc["params"]
    head = (
        f"multicast: {p['nodes']} nodes ({p['sources']} source(s)), model "
        f"{p['model_bytes'] / 1e6:.1f} MB in {p['blocks']} blocks, NIC {p['nic_mbit']} Mbit/s, "
        f"spine {p.get('spine_mbit')} Mbit/s, repeat {p['repeat']}"
    )
    lines = [head, "", method_table(results, doc["bound_s"])]
    link = doc.get("link") or {}
    if link.get("achieved_mbit") is not None:
        lines.append(
            f"\nlink 1->1: {link['achieved_mbit']:.1f} of {link['shaped_mbit']} Mbit/s shaped "
            f"({link['fraction']:.1%}) over {link['bytes'] / 1e6:.0f} MB ({link['method']})"
        )
        for kind in ("socket", "ucxx", "cascade"):
            e = link.get(kind) or {}
            if "achieved_mbit" in e:
                cost = f", {e['cpu_s_per_GB']:.1f} CPU-s/GB" if "cpu_s_per_GB" in e else ""
                rate = f"{e['achieved_mbit']:.1f} Mbit/s ({e['fraction']:.1%})"
                lines.append(f"  {kind:8} {rate} over {e['bytes'] / 1e6:.0f} MB{cost}")
    elif link.get("error"):
        lines.append(f"\nlink 1->1: failed: {link['error']}")
    loop = doc.get("loopback") or {}
    rates = {k[: -len("_GBps")]: v for k, v in loop.items() if k.endswith("_GBps") and v}
    if rates:
        shown = ", ".join(f"{k} {v:.2f}" for k, v in rates.items())
        lines.append(f"loopback GB/s ({loop.get('bytes', 0) / 1e6:.0f} MB): {shown}")
    if loop.get("error"):
        lines.append(f"loopback: {loop['error']}")
    return "\n".join(lines)
