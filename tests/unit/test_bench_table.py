"""The printed report: aligned rows, unfinished methods shown as '-'."""

from __future__ import annotations

from cascade_bench.results import NodeResult, summarize_methods, summarize_run
from cascade_bench.table import format_rows, method_table, report


def summaries() -> dict:  # type: ignore[type-arg]
    ok = NodeResult("r", 9.0, {0: 8.9}, (), 10)
    return summarize_methods(
        {
            "chain": [summarize_run([ok], ["r"], 1)],
            "gloo": [summarize_run([], ["r"], 1, error="rank 3 crashed")],
        },
        bound_s=8.0,
    )


def test_format_rows_aligns_columns() -> None:
    text = format_rows([["a", "1"], ["long name", "22.5"]])
    assert text.splitlines() == ["a             1", "long name  22.5"]


def test_method_table_rows() -> None:
    lines = method_table(summaries(), 8.0).splitlines()
    assert lines[0].split()[0] == "method"
    assert lines[1].startswith("Cascade chain") and "9.00" in lines[1] and "1.125" in lines[1]
    assert lines[2].startswith("torch.distributed gloo") and "rank 3 crashed" in lines[2]
    assert lines[3].startswith("lower bound M/B") and "8.00" in lines[3]


def test_report_includes_link_and_loopback() -> None:
    doc = {
        "bound_s": 8.0,
        "params": {
            "nodes": 8, "sources": 1, "model_bytes": 200e6, "blocks": 16,
            "nic_mbit": 200, "spine_mbit": 800, "repeat": 1,
        },
        "link": {
            "achieved_mbit": 191.5, "shaped_mbit": 200, "fraction": 0.9575,
            "bytes": 100e6, "method": "ucxx",
        },
        "loopback": {"bytes": 256e6, "socket_GBps": 3.5, "ucxx_GBps": 1.4},
    }  # fmt: skip
    text = report(doc, summaries())
    assert "8 nodes" in text
    assert "191.5 of 200 Mbit/s shaped (95.8%)" in text
    assert "socket 3.50, ucxx 1.40" in text
