"""`cascade bench scaleup`'s report: predicted vs measured from a ScalePlan body."""

from __future__ import annotations

from typing import Any

import pytest

from cascade_bench.scaleup import hop_fit, table, timings


def plan_body(measured: dict[str, float | None], predicted_total: float) -> dict[str, Any]:
    targets = list(measured)
    done = all(v is not None for v in measured.values())
    return {
        "metadata": {"name": "m-g2-0a1b2c3d"},
        "spec": {
            "deployment": "m",
            "modelDigest": "d",
            "strategy": "chain",
            "blocks": [
                {"index": i, "layerStart": i, "layerEnd": i + 1, "bytes": 1 << 20, "checksum": "x"}
                for i in range(4)
            ],
            "sources": [{"pod": "m-0", "tier": "gpu"}],
            "targets": targets,
            "chains": [{"source": "m-0", "hops": targets}],
            "predictedCompletionSeconds": predicted_total,
            "predictions": [
                {"pod": p, "completeSeconds": predicted_total * (i + 1) / len(targets)}
                for i, p in enumerate(targets)
            ],
        },
        "status": {
            "phase": "Completed" if done else "Running",
            "startTime": "2026-11-22T12:00:00Z",
            "completionTime": "2026-11-22T12:00:12Z",
            "targets": [
                {"pod": p, "complete": v is not None, "transferSeconds": v}
                for p, v in measured.items()
            ],
            "measuredCompletionSeconds": max(measured.values()) if done else None,  # type: ignore[type-var]
        },
    }


def test_timings_compare_each_target_and_the_plan() -> None:
    doc = timings(plan_body({"m-1": 5.2, "m-2": 10.9}, 10.0))
    assert [(t["pod"], t["predicted_s"], t["measured_s"]) for t in doc["per_target"]] == [
        ("m-1", 5.0, 5.2),
        ("m-2", 10.0, 10.9),
    ]
    assert doc["ratio"] == 1.09 and doc["within_tolerance"]
    assert doc["dispatch_to_completed_s"] == 12.0 and doc["model_bytes"] == 4 << 20


def test_a_slow_or_unfinished_plan_is_not_within_tolerance() -> None:
    assert not timings(plan_body({"m-1": 5.0, "m-2": 12.0}, 10.0))["within_tolerance"]
    running = timings(plan_body({"m-1": 5.0, "m-2": None}, 10.0))
    assert running["measured_s"] is None and not running["within_tolerance"]


def test_table_lists_targets_and_the_plan() -> None:
    doc = {
        "from": 1,
        "to": 3,
        "wall": {"plan_s": 1.0, "completed_s": 14.0, "ready_s": 20.0},
        "plans": [timings(plan_body({"m-1": 5.2, "m-2": 10.9}, 10.0))],
    }
    text = table(doc)
    assert "m-2" in text and "10.900" in text and "1.090" in text
    assert "within 15%: yes" in text and "scale 1 -> 3" in text


def test_the_report_fits_a_per_hop_start_cost() -> None:
    # Two hops predicted 10.0 s at h=0, measured 10.4 s: 0.2 s per hop.
    plan = timings(plan_body({"m-1": 5.2, "m-2": 10.4}, 10.0))
    assert (plan["network"]["hops"], plan["hop_latency_s"]) == (2, 0.0)
    assert "network (slowest)" in table(
        {
            "from": 1,
            "to": 3,
            "wall": {"plan_s": 1.0, "completed_s": 2.0, "ready_s": 3.0},
            "plans": [plan],
        }
    )
    assert hop_fit([plan])["chain"] == pytest.approx(0.2)
    assert hop_fit([plan])["binomial"] is None
    assert hop_fit([timings(plan_body({"m-1": 5.0, "m-2": None}, 10.0))])["chain"] is None
