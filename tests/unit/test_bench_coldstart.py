"""The cold-start bench's pure half: each mode's deployment, the goals, the table."""

from __future__ import annotations

from typing import Any

import pytest

from cascade_bench.coldstart import modes, report

BASE = modes.BASE_SPEC | {"model": {"uri": "file:///m", "servedName": "cold"}}


def test_each_mode_starts_where_it_says() -> None:
    spec = {m: modes.mode_spec(BASE, m, "zero_to_one") for m in modes.MODES}
    assert [spec[m]["replicas"] for m in modes.MODES] == [0, 0, 0, 1]
    assert [spec[m]["hostCopies"] for m in modes.MODES] == [0, 0, 1, 0]
    assert [spec[m]["materialization"]["enabled"] for m in modes.MODES] == [False, True, True, True]
    two = modes.mode_spec(BASE, "storage", "one_to_two")
    assert two["replicas"] == 1 and two["multicast"]["fromPeers"] is False
    with pytest.raises(ValueError, match="unknown mode"):
        modes.mode_spec(BASE, "cache", "zero_to_one")


def row(ttft: float, **stages: float) -> dict[str, Any]:
    return {"to_first_token_s": ttft, "stages": stages, "weights_from": "storage"}


def test_goals_read_the_rows() -> None:
    rows = {
        "zero_to_one": {
            "storage": row(20.0, engine_init=2.0, weights=12.0),
            "storage_materialized": {"skipped": "a-run: not seen in 300 s"},
            "pool": row(6.0, weights=1.5, engine_init=2.0),
        }
    }
    held = {"replicas_1": 1000, "replicas_6": 1010, "replicas_0": 1000}
    doc = report.document({"model_bytes": 1000}, rows, held, 1.0)
    g = {x["goal"].split(" ")[0]: x for x in doc["goals"]}
    assert g["pool"]["holds"] and g["pool"]["detail"] == "0.30 x"
    assert g["materialization"]["holds"] is None  # not measured: neither pass nor fail
    assert g["host"]["holds"]
    off = report.document({"model_bytes": 1000}, rows, held | {"replicas_6": 6000}, 1.0)
    assert off["goals"][2]["holds"] is False
    text = report.table(doc)
    assert "storage_materialized: skipped: a-run: not seen in 300 s" in text
    assert "goal PASS" in text
    assert report.stage_names(doc) == ["weights", "engine_init"]  # start-up order


def test_the_materialization_goal_compares_the_engine_stages() -> None:
    cold = row(12.0, weights=9.0, engine_init=0.12, kv_sizing=0.8, warmup=0.0)
    for warm_kv, holds in ((0.0, True), (0.3, False)):
        warm = row(11.0, weights=9.0, engine_init=0.12, kv_sizing=warm_kv, warmup=0.0)
        rows = {"zero_to_one": {"storage": cold, "storage_materialized": warm}}
        doc = report.document({"model_bytes": 1000}, rows, {}, 1.0)
        goal = next(g for g in doc["goals"] if g["goal"].startswith("materialization"))
        assert goal["holds"] is holds, goal
