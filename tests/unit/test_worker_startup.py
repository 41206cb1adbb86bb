"""The start-up timeline: when the process began, each stage once, where weights came from."""

from __future__ import annotations

import os
import time

from prometheus_client import CollectorRegistry

from cascade_api.scaleplan import Source, SourceTier
from cascade_protocol.status import StartupStage, WeightsFrom
from cascade_worker.control.jobs import weights_from
from cascade_worker.timeline import Startup, process_started_at


def test_the_process_began_before_now_and_after_boot() -> None:
    began = process_started_at(os.getpid())
    assert began is not None and began <= time.time()
    assert time.time() - began < 24 * 3600  # a test process is not a day old


def test_each_stage_counts_once_and_lands_in_the_histogram() -> None:
    registry = CollectorRegistry()
    s = Startup(registry)
    s.record(StartupStage.IMPORTS, 1.5)
    s.record(StartupStage.IMPORTS, 9.0)  # a later one is not start-up
    s.weights(WeightsFrom.HOST, 1000, 2.0)
    s.weights(WeightsFrom.STORAGE, 5000, 7.0)
    s.ready()
    first = s.info.ready_at
    s.ready()
    info = s.info
    assert info.stages[StartupStage.IMPORTS] == 1.5
    assert (info.weights_from, info.weights_bytes, info.stages[StartupStage.WEIGHTS]) == (
        WeightsFrom.HOST,
        1000,
        2.0,
    )
    assert info.ready_at == first and first is not None
    count = registry.get_sample_value(
        "cascade_worker_startup_stage_seconds_count", {"stage": "imports"}
    )
    assert count == 1


def test_weights_come_from_host_only_when_every_source_is_a_host_copy() -> None:
    class Req:
        def __init__(self, *tiers: SourceTier) -> None:
            self.plan = type(
                "P", (), {"sources": [Source(pod=f"s{i}", tier=t) for i, t in enumerate(tiers)]}
            )

    assert weights_from(Req(SourceTier.HOST, SourceTier.HOST)) == WeightsFrom.HOST  # type: ignore[arg-type]
    assert weights_from(Req(SourceTier.HOST, SourceTier.GPU)) == WeightsFrom.PEER  # type: ignore[arg-type]
    assert weights_from(Req()) == WeightsFrom.PEER  # type: ignore[arg-type]


def test_the_engine_build_splits_as_the_engine_reports_it() -> None:
    class Report:
        kv_s, compile_s = 0.4, 2.0

    class Core:
        startup = Report()

    s = Startup(CollectorRegistry())
    s.engine(Core(), 3.0)
    stages = s.info.stages
    assert stages[StartupStage.KV_SIZING] == 0.4 and stages[StartupStage.WARMUP] == 2.0
    assert stages[StartupStage.ENGINE_INIT] == 0.6
    restored = Startup(CollectorRegistry())
    restored.engine(Core(), 3.0, read_s=0.05)  # reading the artifact came before the build
    assert restored.info.stages[StartupStage.KV_SIZING] == 0.45
    assert restored.info.stages[StartupStage.ENGINE_INIT] == 0.6
    fine = Startup(CollectorRegistry())
    fine.record(StartupStage.KV_SIZING, 0.000012)  # a tiny model's restore is not 0
    assert fine.info.stages[StartupStage.KV_SIZING] > 0
    plain = Startup(CollectorRegistry())
    plain.engine(object(), 1.5)  # an engine that reports nothing: all of it is engine_init
    assert plain.info.stages[StartupStage.ENGINE_INIT] == 1.5
    assert StartupStage.KV_SIZING not in plain.info.stages


def test_listening_is_stamped_once_after_the_process_began() -> None:
    s = Startup(CollectorRegistry())
    assert s.info.listening_at is None
    s.listening()
    first = s.info.listening_at
    s.listening()
    assert first is not None and s.info.listening_at == first
    assert s.info.process_started_at <= first <= time.time()
