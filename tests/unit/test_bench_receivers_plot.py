"""The receivers sweep's points: one per method per run, receivers = nodes - sources."""

from __future__ import annotations

from pathlib import Path

from cascade_bench.receivers_plot import Point, main, points


def doc(nodes: int, chain: float, binomial: float | None) -> dict[str, object]:
    return {
        "params": {"nodes": nodes, "k": 1, "model_bytes": 1e8, "blocks": 16, "nic_mbit": 100},
        "results": {
            "chain": {"ratio": chain, "host_busy": 0.5},
            "binomial": {"ratio": binomial, "host_busy": None},
        },
    }


def test_points_by_method_then_receivers_skipping_failed_runs() -> None:
    got = points([doc(16, 1.14, 1.4), doc(3, 1.02, None)])
    assert got == [
        Point("binomial", 15, 1.4, None),
        Point("chain", 2, 1.02, 0.5),
        Point("chain", 15, 1.14, 0.5),
    ]


def test_main_writes_a_png(tmp_path: Path) -> None:
    import json

    runs = []
    for n in (3, 5):
        f = tmp_path / f"{n}.json"
        f.write_text(json.dumps(doc(n, 1.0 + n / 100, 1.2)))
        runs.append(str(f))
    out = tmp_path / "r.png"
    assert main([str(out), *runs]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert main([]) == 2
