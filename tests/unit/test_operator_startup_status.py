"""status.instances[].startup: the worker's stages plus the scheduling wait."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from operator_fixtures import NOW, pod

from cascade_operator.status import startup_of
from cascade_protocol.status import StartupInfo, StartupStage, WeightsFrom


def test_startup_adds_the_scheduling_wait_and_seconds_to_ready() -> None:
    p = replace(pod(1), created=NOW, scheduled_at=NOW + timedelta(seconds=0.5))
    info = StartupInfo(
        process_started_at=NOW.timestamp() + 1.0,
        stages={StartupStage.PROCESS: 0.3, StartupStage.WEIGHTS: 2.0},
        weights_from=WeightsFrom.HOST,
        weights_bytes=1234,
        ready_at=NOW.timestamp() + 4.25,
    )
    got = startup_of(p, info)
    assert got.stages == {"scheduled": 0.5, "process": 0.3, "weights": 2.0}
    assert (got.weights_from, got.weights_bytes, got.ready_seconds) == ("host", 1234, 4.25)
    # Not yet placed or not yet ready: no scheduling wait, no ready seconds.
    bare = startup_of(replace(p, scheduled_at=None), info.model_copy(update={"ready_at": None}))
    assert "scheduled" not in bare.stages and bare.ready_seconds is None
