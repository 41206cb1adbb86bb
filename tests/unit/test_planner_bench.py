"""`cascade bench plan` on a small grid: the JSON keeps its keys and gains the fabric's."""

from __future__ import annotations

from cascade_bench.plan_bench import run, table


def test_a_small_grid_reports_plans_and_node_events() -> None:
    doc = run(nodes=(40,), targets=(8,), strategies=("chain", "auto"), repeat=1)
    assert [(r["nodes"], r["targets"], r["strategy"]) for r in doc["cases"]] == [
        (40, 8, "chain"),
        (40, 8, "auto"),
    ]
    for case in doc["cases"]:
        for key in ("plan_ms", "topo_ms", "chosen", "predicted_s", "pipelines"):
            assert key in case
        for key in ("index_ms", "snapshot_ms", "event_ms", "event_max_ms"):
            assert case[key] >= 0
    assert "event_ms" in table(doc).splitlines()[0]
