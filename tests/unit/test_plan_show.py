"""`cascade plan show`: the pure renderer on a chain and a binomial fixture (golden
text), and the command reading a plan from a file."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cascade_cli.main import main
from cascade_cli.plan import render

NOW = datetime(2026, 11, 22, 12, 0, 10, tzinfo=UTC)


def blocks(n: int, size: int) -> list[dict[str, Any]]:
    return [
        {"index": i, "layerStart": 2 * i, "layerEnd": 2 * i + 2, "bytes": size, "checksum": "x"}
        for i in range(n)
    ]


CHAIN: dict[str, Any] = {
    "metadata": {"name": "llama-g3-5d41402a"},
    "spec": {
        "deployment": "llama",
        "modelDigest": "sha256:0123456789abcdef0123",
        "blocks": blocks(8, 64 << 20),
        "sources": [{"pod": "llama-0", "tier": "gpu"}, {"pod": "llama-5", "tier": "host"}],
        "targets": ["llama-1", "llama-2", "llama-3", "llama-4"],
        "strategy": "chain",
        "chains": [
            {
                "source": "llama-0",
                "hops": ["llama-1", "llama-2"],
                "blocks": [0, 1, 2, 3, 4, 5, 6, 7],
            },
            {
                "source": "llama-5",
                "hops": ["llama-3", "llama-4"],
                "blocks": [4, 5, 6, 7, 0, 1, 2, 3],
            },
        ],
        "predictedCompletionSeconds": 5.4,
        "predictions": [
            {"pod": "llama-1", "completeSeconds": 5.1},
            {"pod": "llama-2", "completeSeconds": 5.3},
            {"pod": "llama-3", "completeSeconds": 5.2},
            {"pod": "llama-4", "completeSeconds": 5.4},
        ],
        "executionPipelines": [
            {
                "stages": [
                    {"pod": "llama-1", "layerStart": 0, "layerEnd": 8},
                    {"pod": "llama-3", "layerStart": 8, "layerEnd": 16},
                ],
                "readySeconds": 2.7,
            }
        ],
        "reason": "auto: chain 5.4s vs binomial 6.1s predicted",
    },
    "status": {
        "phase": "Running",
        "targetCount": 4,
        "progress": "1/4",
        "bytesMoved": 1476395008,
        "startTime": "2026-11-22T12:00:04Z",
        "targets": [
            {
                "pod": "llama-1",
                "blocksReceived": 8,
                "bytesReceived": 536870912,
                "complete": True,
                "firstCompleteTime": "2026-11-22T12:00:09Z",
                "transferSeconds": 4.9,
            },
            {"pod": "llama-2", "blocksReceived": 6, "bytesReceived": 402653184},
            {"pod": "llama-3", "blocksReceived": 5, "bytesReceived": 335544320},
            {"pod": "llama-4", "blocksReceived": 3, "bytesReceived": 201326592},
        ],
        "pipelines": [
            {
                "head": "llama-1",
                "state": "Serving",
                "coveredSeconds": 2.91,
                "servingSeconds": 3.02,
                "servingDelaySeconds": 0.11,
            }
        ],
        "pipelineSummary": "1 serving",
        "conditions": [
            {
                "type": "Succeeded",
                "status": "Unknown",
                "reason": "Dispatched",
                "message": "chain from 2 source(s) to 4 target(s), 8 blocks, predicted 5.4s",
                "lastTransitionTime": "2026-11-22T12:00:04Z",
            }
        ],
    },
}
BINOMIAL: dict[str, Any] = {
    "metadata": {"name": "tiny-g1-9a0b1c2d"},
    "spec": {
        "deployment": "tiny",
        "modelDigest": "m1",
        "blocks": blocks(2, 1 << 20),
        "sources": [{"pod": "s0", "tier": "gpu"}],
        "targets": ["t1", "t2", "t3"],
        "strategy": "binomial",
        "schedule": [
            {"transfers": [{"sender": "s0", "receiver": "t1", "block": 0}]},
            {
                "transfers": [
                    {"sender": "s0", "receiver": "t2", "block": 1},
                    {"sender": "t1", "receiver": "t3", "block": 0},
                ]
            },
            {
                "transfers": [
                    {"sender": "s0", "receiver": "t1", "block": 1},
                    {"sender": "t1", "receiver": "t2", "block": 0},
                    {"sender": "t2", "receiver": "t3", "block": 1},
                ]
            },
        ],
        "blockOrders": [{"source": "s0", "order": [0, 1]}],
        "predictedCompletionSeconds": 0.31,
    },
    "status": {
        "phase": "Completed",
        "targetCount": 3,
        "progress": "3/3",
        "bytesMoved": 6291456,
        "startTime": "2026-11-22T12:00:00Z",
        "completionTime": "2026-11-22T12:00:01Z",
        "targets": [
            {
                "pod": p,
                "blocksReceived": 2,
                "bytesReceived": 2097152,
                "complete": True,
                "firstCompleteTime": "2026-11-22T12:00:01Z",
                "transferSeconds": 0.3 if p != "t3" else None,
            }
            for p in ("t1", "t2", "t3")
        ],
        "measuredCompletionSeconds": 0.33,
    },
}

CHAIN_TEXT = """\
ScalePlan llama-g3-5d41402a   deployment llama   model sha256:0123456789abcdef0
phase Running   strategy chain   targets complete 1/4   blocks 8 (512.0 MiB)   moved 1.4 GiB
elapsed 6.00s (dispatch to last write)   transfer: predicted 5.40s   measured -
sources llama-0 (gpu), llama-5 (host)
reason: auto: chain 5.4s vs binomial 6.1s predicted

chains
  llama-0 ─▶ llama-1 ─▶ llama-2   blocks 0-7
  llama-5 ─▶ llama-3 ─▶ llama-4   blocks 4-7,0-3

targets
  target   received                 blocks       predicted  measured
  llama-1  [████████████████████]      8/8    ✓      5.10s  4.90s
  llama-2  [███████████████░░░░░]      6/8  75%      5.30s  -
  llama-3  [████████████░░░░░░░░]      5/8  62%      5.20s  -
  llama-4  [████████░░░░░░░░░░░░]      3/8  37%      5.40s  -

execution pipelines (serve while loading)
  [llama-1 L0-7 | llama-3 L8-15]   predicted ready at 2.70s
    Serving: covered at 2.91s, serving at 3.02s (delay 0.11s)

conditions
  Succeeded=Unknown Dispatched: chain from 2 source(s) to 4 target(s), 8 blocks, predicted 5.4s
"""

BINOMIAL_TEXT = """\
ScalePlan tiny-g1-9a0b1c2d   deployment tiny   model m1
phase Completed   strategy binomial   targets complete 3/3   blocks 2 (2.0 MiB)   moved 6.0 MiB
elapsed 1.00s (dispatch to last write)   transfer: predicted 0.31s   measured 0.33s (1.06x)
sources s0 (gpu)

tree (who first sends to whom)
  s0
  ├─▶ t1
  │   └─▶ t3
  └─▶ t2
block orders
  s0: 0 1
steps (3, at most 3 transfers each)
    1  s0 ─▶ t1 #0
    2  s0 ─▶ t2 #1   t1 ─▶ t3 #0
    3  s0 ─▶ t1 #1   t1 ─▶ t2 #0   t2 ─▶ t3 #1

targets
  target  received                 blocks       predicted  measured
  t1      [████████████████████]      2/2    ✓          -  0.30s
  t2      [████████████████████]      2/2    ✓          -  0.30s
  t3      [████████████████████]      2/2    ✓          -  seen at 1.00s
"""


def test_chain_plan_golden() -> None:
    assert render(CHAIN, NOW) + "\n" == CHAIN_TEXT


def test_binomial_plan_golden() -> None:
    assert render(BINOMIAL, NOW) + "\n" == BINOMIAL_TEXT


def test_a_fresh_plan_renders_without_status() -> None:
    body = {"metadata": {"name": "x"}, "spec": {"deployment": "d", "modelDigest": "m",
            "strategy": "chain", "targets": ["a"]}}  # fmt: skip
    text = render(body, NOW)
    assert "phase Pending" in text and "elapsed not started" in text and "(none)" in text


def test_pipeline_states_without_times() -> None:
    """A plan not started shows no state; a pipeline never seen serving says so; a delay
    without a start time stands alone."""
    fresh = {**CHAIN, "status": {}}
    assert render(fresh, NOW).endswith("predicted ready at 2.70s")
    for seen, line in [
        ({"state": "Planned"}, "Planned"),
        ({"state": "Dissolved"}, "Dissolved (never seen serving)"),
        ({"state": "Serving", "servingDelaySeconds": 0.2}, "Serving (delay 0.20s)"),
    ]:
        status = {**CHAIN["status"], "pipelines": [{"head": "llama-1", **seen}]}
        assert f"2.70s\n    {line}\n" in render({**CHAIN, "status": status}, NOW)


def test_long_schedules_are_cut() -> None:
    steps = [{"transfers": [{"sender": "s0", "receiver": "t1", "block": 0}]}] * 30
    body = {**BINOMIAL, "spec": {**BINOMIAL["spec"], "schedule": steps}}
    assert "... 18 more steps" in render(body, NOW)


def test_show_reads_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(BINOMIAL))
    assert main(["plan", "show", "-f", str(path)]) == 0
    assert capsys.readouterr().out == BINOMIAL_TEXT


def test_show_needs_a_name_or_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "show"]) == 1
    assert "NAME or -f FILE" in capsys.readouterr().err
