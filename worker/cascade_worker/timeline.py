"""The worker's start-up timeline: each stage once, from process creation to ready.

Why: weights are half of a cold start (issue 12; ModelExpress: 48x faster weights, 8 ->
7 min to ready, until compile caches moved too). To know what to move or materialize,
each instance reports how long each stage took and where its weights came from, to its
status (the operator copies it into status.instances[]) and to a histogram per stage.
Only the first occurrence of a stage counts: a later reload or transfer is not start-up.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, Histogram

from cascade_protocol.status import StartupInfo, StartupStage, WeightsFrom

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320)


def process_started_at(pid: int | None = None) -> float | None:
    """Wall-clock creation time of a process (Linux /proc; None elsewhere)."""
    try:
        stat = Path(f"/proc/{pid or os.getpid()}/stat").read_text()
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, StopIteration, ValueError):
        return None
    ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22: starttime, after comm
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def rss_bytes() -> int:
    """This process's resident memory (Linux /proc; 0 elsewhere): what a worker costs
    its node beyond the model it holds."""
    try:
        resident = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return resident * os.sysconf("SC_PAGE_SIZE")


class Startup:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        """Made when the worker's control is (its main runs): the process stage ends now.
        Without `registry` the histogram is registered later (`histogram`)."""
        self.histogram = Histogram(
            "cascade_worker_startup_stage_seconds",
            "Seconds each start-up stage of this worker took (each stage once).",
            ["stage"],
            buckets=BUCKETS,
            registry=registry,
        )
        now = time.time()
        created = process_started_at()
        self.created = created if created is not None and created <= now else now
        self.info = StartupInfo(process_started_at=self.created)
        self.record(StartupStage.PROCESS, now - self.created)

    def record(self, stage: StartupStage, seconds: float) -> None:
        """Keep `stage`'s first duration; later ones are not start-up."""
        if stage in self.info.stages:
            return
        self.info.stages[stage] = round(max(seconds, 0.0), 6)  # a tiny restore is µs
        self.histogram.labels(stage=stage).observe(max(seconds, 0.0))

    def weights(self, source: WeightsFrom, nbytes: int, seconds: float) -> None:
        if StartupStage.WEIGHTS in self.info.stages:
            return
        self.info.weights_from, self.info.weights_bytes = source, nbytes
        self.record(StartupStage.WEIGHTS, seconds)

    def engine(self, core: object, seconds: float, read_s: float = 0.0) -> None:
        """The engine's build (`seconds`), split as the engine reports it (engine/
        engine/startup.py's StartupReport, when it has one): KV sizing, compile warm-up, the
        rest. `read_s`: choosing and reading a materialized artifact before the build
        (serving/restore.py), counted in KV sizing: a restore's stage is all it did."""
        report = getattr(core, "startup", None)
        kv_s = float(getattr(report, "kv_s", 0.0) or 0.0)
        warm_s = float(getattr(report, "compile_s", 0.0) or 0.0)
        if report is not None:
            self.record(StartupStage.KV_SIZING, read_s + kv_s)
            self.record(StartupStage.WARMUP, warm_s)
        self.record(StartupStage.ENGINE_INIT, seconds - kv_s - warm_s)

    def listening(self) -> None:
        """The control API accepts connections: the operator may plan for this worker."""
        if self.info.listening_at is None:
            self.info.listening_at = time.time()

    def ready(self) -> None:
        if self.info.ready_at is None:
            self.info.ready_at = time.time()
