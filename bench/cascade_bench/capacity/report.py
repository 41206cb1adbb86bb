"""The capacity profile as a document, a table and a picture.

The JSON document is what the simulator reads later (issue 10 §6), so its keys are a
contract: `node_cpu`, `model`, `curve` (`batch`, `tokens_per_s`, `itl_p50_s`,
`itl_p90_s`, plus informative extras), `prefill` (`tokens_per_s`, `prompt_tokens`,
`ttft_p50_s`: one instance's prefill speed), `scaling` (`one`, `two`, `ratio`, plus how it was
measured). Measured with `params.instances` n > 1 instances busy at once, `curve` and
`prefill` are one instance's share then, and `one_instance` holds the same two measured
on one instance alone. `table` prints from that document alone; `plot` draws it with matplotlib's
Agg backend (imported inside: only the bench extra installs matplotlib).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cascade_bench.capacity.stats import SUPERLINEAR, CurvePoint, superlinear
from cascade_bench.table import format_rows

ACCEPT_RATIO = 1.8  # issue 10, acceptance 1: two instances serve >= 1.8x one


def document(
    *,
    node_cpu: float | None,
    model: str,
    params: dict[str, Any],
    curve: Sequence[CurvePoint],
    prefill: dict[str, Any],
    one: CurvePoint,
    two: CurvePoint,
    scaling_ratio: float | None,
    one_instance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    doc = {
        "node_cpu": node_cpu,
        "model": model,
        "params": params,
        "curve": [asdict(p) for p in curve],
        "prefill": prefill,
        "scaling": {
            "one": one.tokens_per_s,
            "two": two.tokens_per_s,
            "ratio": scaling_ratio,
            "concurrency": one.batch,
            "via": "direct",  # split evenly over the workers' /v1/generate, no gateway
            "one_point": asdict(one),
            "two_point": asdict(two),
            "accept_ratio": ACCEPT_RATIO,
            # The ratio is of decode speeds, as the curve is (one.raw_tokens_per_s and
            # two.raw_tokens_per_s keep the window's figures); above 2x it is a defect.
            "basis": "decode" if one.raw_tokens_per_s is not None else "raw",
            "superlinear": superlinear(scaling_ratio),
            "passed": (
                scaling_ratio is not None
                and scaling_ratio >= ACCEPT_RATIO
                and not superlinear(scaling_ratio)
            ),
        },
    }
    if one_instance is not None:  # `curve` and `prefill` were measured with n busy
        doc["one_instance"] = one_instance
    return doc


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{1e3 * value:.1f}"


def _prefill_line(prefill: dict[str, Any] | None) -> str:
    if not prefill:
        return "prefill: not measured"
    return (
        f"prefill: {prefill['tokens_per_s']:.0f} tok/s ({prefill['prompt_tokens']}-token prompts, "
        f"time to first token p50 {_ms(prefill['ttft_p50_s'])} ms over {prefill['samples']})"
    )


def _curve_title(instances: int) -> str:
    if instances > 1:
        return f"per instance, {instances} instances with b requests in flight each:"
    return "one instance, b requests in flight:"


def table(doc: dict[str, Any]) -> str:
    p = doc["params"]
    cpu = "unlimited" if doc["node_cpu"] is None else f"{doc['node_cpu']:g} core"
    head = (
        f"capacity: {doc['model']}, node CPU {cpu}, max_tokens {p['max_tokens']}, prompt "
        f"{p['prompt_tokens']} tokens, {p['duration_s']:g} s windows after "
        f"{p['warmup_s']:g} s warm-up"
    )
    rows = [["batch", "tokens/s", "ITL p50 ms", "ITL p90 ms", "ITL mean ms", "tokens", "done"]]
    for c in doc["curve"]:
        rows.append(
            [
                str(c["batch"]),
                f"{c['tokens_per_s']:.1f}",
                _ms(c["itl_p50_s"]),
                _ms(c["itl_p90_s"]),
                _ms(c["itl_mean_s"]),
                str(c["tokens"]),
                str(c["requests_done"]),
            ]
        )
    s = doc["scaling"]
    srows = [["instances", "in flight", "tokens/s", "ITL p50 ms", "ITL p90 ms"]]
    for n, key in ((1, "one_point"), (2, "two_point")):
        pt = s[key]
        srows.append(
            [
                str(n),
                str(pt["batch"]),
                f"{pt['tokens_per_s']:.1f}",
                _ms(pt["itl_p50_s"]),
                _ms(pt["itl_p90_s"]),
            ]
        )
    r = s["ratio"]
    if r is None:
        verdict = "ratio: - (one instance produced nothing)"
    elif s.get("superlinear"):
        verdict = (
            f"ratio two/one = {r:.3f} (> {SUPERLINEAR:g}: DEFECT, two instances cannot "
            "be more than two of one; find why before reporting)"
        )
    else:
        verdict = (
            f"ratio two/one = {r:.3f} "
            f"({'>=' if s['passed'] else '<'} {s['accept_ratio']:g}: "
            f"{'pass' if s['passed'] else 'FAIL'})"
        )
    return "\n".join(
        [
            head,
            "",
            _curve_title(p.get("instances", 1)),
            format_rows(rows),
            _prefill_line(doc.get("prefill")),
            "",
            f"scaling at {s['concurrency']} in flight ({s['via']}: split evenly over the workers):",
            format_rows(srows),
            verdict,
        ]
    )


def plot(doc: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = doc["curve"]
    batches = [c["batch"] for c in curve]
    fig, (ax, bars) = plt.subplots(1, 2, figsize=(11, 4.2), width_ratios=(2, 1))
    ax.plot(batches, [c["tokens_per_s"] for c in curve], "o-", color="tab:blue")
    ax.set_xscale("log", base=2)
    ax.set_xticks(batches, [str(b) for b in batches])
    ax.set_xlabel("batch size (requests in flight)")
    ax.set_ylabel("tokens/s", color="tab:blue")
    ax.set_ylim(bottom=0)
    itl = ax.twinx()
    for key, style, label in (("itl_p50_s", "s--", "ITL p50"), ("itl_p90_s", "^:", "ITL p90")):
        ys = [1e3 * c[key] if c[key] is not None else float("nan") for c in curve]
        itl.plot(batches, ys, style, color="tab:red", label=label)
    itl.set_ylim(bottom=0)
    itl.set_ylabel("inter-token latency, ms", color="tab:red")
    itl.legend(loc="upper left")
    cpu = "unlimited" if doc["node_cpu"] is None else f"{doc['node_cpu']:g} core"
    alone = doc.get("one_instance")
    if alone:
        ax.plot(
            [c["batch"] for c in alone["curve"]],
            [c["tokens_per_s"] for c in alone["curve"]],
            "o:", color="tab:gray", label="one instance alone",
        )  # fmt: skip
        ax.legend(loc="lower right")
    n = doc["params"].get("instances", 1)
    who = f"per instance, {n} busy" if n > 1 else "one instance"
    ax.set_title(f"{who}, node CPU {cpu}")
    s = doc["scaling"]
    vals = [s["one"], s["two"]]
    bars.bar(["1 instance", "2 instances"], vals, color=["tab:gray", "tab:green"])
    for i, v in enumerate(vals):
        bars.text(i, v, f"{v:.0f}", ha="center", va="bottom")
    ratio = "-" if s["ratio"] is None else f"{s['ratio']:.2f}x"
    bars.set_title(f"{s['concurrency']} in flight: {ratio}")
    bars.set_ylabel("tokens/s")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
