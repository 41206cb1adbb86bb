"""`cascade simulate` end to end on small files: the table, --json for one policy and for
all, the timeline, --png, the peak scaler, and errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascade_cli.main import main

MD = """\
apiVersion: cascade.dev/v1alpha1
kind: ModelDeployment
metadata: {name: sim}
spec:
  model: {uri: file:///m}
  replicas: 1
  scaling: {minReplicas: 1, maxReplicas: 4}
  slo:
    interactive: {ttftMs: 2000, itlMs: 200}
    batch: {ttftMs: 30000, itlMs: 2000}
"""
PROFILE = {
    "node_cpu": 0.5,
    "model": "tiny-llama",
    "curve": [
        {"batch": b, "tokens_per_s": t, "itl_p50_s": 0.0, "itl_p90_s": 0.0}
        for b, t in ((1, 154.0), (8, 340.0), (32, 778.0), (128, 979.0))
    ],
    "scaling": {"one": 980.0, "two": 1813.0, "ratio": 1.85},
}
KEYS = {
    "slo_attainment",
    "ttft_p99_s",
    "instance_seconds",
    "scaling_events",
    "requests",
    "rejected",
}


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for i in range(300):
        rows.append(f"2023-11-16 18:{i // 60:02d}:{i % 60:02d}.000000,{200 + i},{20 + i % 7}")
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "md.yaml").write_text(MD)
    (tmp_path / "p.json").write_text(json.dumps(PROFILE))
    return {"trace": tmp_path / "t.csv", "md": tmp_path / "md.yaml", "profile": tmp_path / "p.json"}


def args(f: dict[str, Path], *extra: str) -> list[str]:
    base = ["simulate", "--trace", str(f["trace"]), "-f", str(f["md"])]
    return [*base, "--profile", str(f["profile"]), *extra]


def test_one_policy_prints_a_table_and_writes_json(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.json"
    assert main(args(files, "--json", str(out), "--batch-share", "0.5")) == 0
    text = capsys.readouterr().out
    assert "t.csv" in text and "cascade" in text and "interactive SLO" in text
    doc = json.loads(out.read_text())
    assert set(doc) >= KEYS and "timeline" not in doc
    assert doc["requests"]["interactive"] + doc["requests"]["batch"] == 300
    assert 100 < doc["requests"]["batch"] < 200
    assert doc["workload"]["prompt_tokens"]["scale"] == 0.1  # the replay's scaling, said
    assert doc["config"]["max_replicas"] == 4


def test_all_policies_side_by_side_with_timeline_and_png(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, png = tmp_path / "all.json", tmp_path / "t.png"
    extra = ("--policy", "all", "--json", str(out), "--json-timeline", "--png", str(png))
    assert main(args(files, *extra)) == 0
    table = capsys.readouterr().out
    for name in ("cascade", "fixed_max", "fixed_min", "kpa", "fixed_local"):
        assert name in table
    doc = json.loads(out.read_text())
    assert set(doc["policies"]) == {"cascade", "fixed_max", "fixed_min", "kpa", "fixed_local"}
    for run in doc["policies"].values():
        assert set(run) >= KEYS and run["timeline"]
    assert doc["policies"]["fixed_max"]["peak_instances"] == 4
    assert png.stat().st_size > 10_000


def test_peak_instances_scales_the_rate(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "peak.json"
    assert main(args(files, "--peak-instances", "3", "--json", str(out))) == 0
    load = json.loads(out.read_text())["workload"]
    assert load["rate_scale"] > 1 and load["peak_instances_demand"] == pytest.approx(3, rel=0.15)


def test_a_bad_manifest_is_an_error_naming_the_file(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    files["md"].write_text(MD.replace("minReplicas: 1", "minReplicas: 6"))
    assert main(args(files)) == 1
    assert "md.yaml" in capsys.readouterr().err
