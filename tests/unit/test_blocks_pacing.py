"""Storage emulation: the pacer's arithmetic (a fake clock, no sleeping), and a load of a
tiny checkpoint at a limited rate that takes as long as storage would and says so."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np
import pytest

from cascade_protocol.control import LoadRequest
from cascade_protocol.status import LoadReport, WorkerStatus
from cascade_worker.blocks.pacing import CHUNK_BYTES, Pacer, bytes_per_second
from cascade_worker.blocks.pack import pack_model
from cascade_worker.blocks.safetensors_io import open_model
from cascade_worker.checkpoints.checkpoint import write_checkpoint
from cascade_worker.checkpoints.spec import ModelSpec
from cascade_worker.config import WorkerConfig
from cascade_worker.control.jobs import Control
from cascade_worker.control.load import claim_load, run_load

TINY = ModelSpec(layers=2, hidden=32, heads=4, kv_heads=2, intermediate=64, vocab=300)
MBIT = 1_000_000 / 8  # bytes per second in 1 Mbit/s


class FakeTime:
    """A clock that only moves when the pacer sleeps (or the test says so)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def pacer(rate_mbit: float | None, t: FakeTime) -> Pacer:
    return Pacer(rate_mbit, clock=t.clock, sleep=t.sleep)


def test_mbit_is_a_million_bits() -> None:
    assert bytes_per_second(8) == 1_000_000


def test_reads_never_run_ahead_of_rate_times_elapsed() -> None:
    t = FakeTime()
    p = pacer(8, t)  # 1 MB/s
    assert p.wait_for(500_000) == pytest.approx(0.5)  # even the first read waits
    p.take(500_000)
    assert t.sleeps == [pytest.approx(0.5)] and p.bytes_read == 500_000
    t.now += 2.0  # the reader was busy elsewhere (hashing): what it could have read...
    p.take(1_000_000)
    p.take(1_000_000)
    assert len(t.sleeps) == 1  # ...it may read now without waiting...
    # ...but never beyond rate x elapsed: 2.5 MB were due by 2.5 s, the next MB at 3.5 s.
    assert p.wait_for(1_000_000) == pytest.approx(1.0)
    p.take(1_000_000)
    assert p.elapsed() == pytest.approx(3.5)
    assert p.bytes_read <= 1_000_000 * p.elapsed() + 1e-6


def test_unlimited_counts_without_waiting() -> None:
    t = FakeTime()
    p = pacer(None, t)
    p.take(10**12)
    assert p.wait_for(10**12) == 0.0 and t.sleeps == [] and p.bytes_read == 10**12
    report = p.report()
    assert (report.bytes_read, report.seconds, report.rate_mbit) == (10**12, 0.0, None)


@pytest.mark.parametrize("rate", [0, -5])
def test_a_rate_must_be_positive(rate: float) -> None:
    with pytest.raises(ValueError, match="more than 0"):
        Pacer(rate)


def test_copy_is_paced_chunk_by_chunk() -> None:
    t = FakeTime()
    p = pacer(8 * 4, t)  # 4 MB/s
    src = np.arange(2 * CHUNK_BYTES + 10, dtype=np.int64).astype(np.uint8)
    dst = np.zeros_like(src)
    p.copy(dst, src)
    assert np.array_equal(dst, src) and p.bytes_read == src.nbytes
    assert len(t.sleeps) == 3  # two whole chunks and the tail, each when due
    assert t.now - 100.0 == pytest.approx(src.nbytes / 4_000_000)
    with pytest.raises(ValueError, match="copy of"):
        p.copy(dst[:5], src)


def tensor_bytes(model_dir: Path) -> int:
    return sum(t.nbytes for t in open_model(model_dir).values())


def test_pack_reports_the_read_unlimited(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, TINY)
    read = pack_model(tmp_path, 2).read
    assert read is not None and read.rate_mbit is None
    assert read.bytes_read == tensor_bytes(tmp_path) and read.seconds >= 0


def test_a_load_at_a_limited_rate_takes_as_long_as_storage_would(tmp_path: Path) -> None:
    write_checkpoint(tmp_path, TINY)
    nbytes = tensor_bytes(tmp_path)
    rate = nbytes / MBIT / 0.6  # the whole checkpoint in 0.6 s
    config = WorkerConfig(
        host="127.0.0.1",
        port=0,
        model_uri="",
        deployment="tiny",
        pod_name="w-0",
        drain_seconds=0.0,
        model_path=str(tmp_path),
        storage_mbit=rate,
    )
    ctl = Control(config)

    async def load() -> None:
        path, blocks = claim_load(ctl, LoadRequest())
        await run_load(ctl, path, blocks)

    start = time.monotonic()
    asyncio.run(load())
    took = time.monotonic() - start
    assert ctl.state.error is None and ctl.state.store is not None
    assert took >= nbytes / (rate * MBIT) - 0.01  # 0.6 s, not page-cache speed
    report = ctl.state.last_load
    assert report is not None
    assert report.bytes_read == nbytes and report.rate_mbit == rate
    assert nbytes / (rate * MBIT) - 0.01 <= report.seconds <= took
    doc = ctl.state.status(WorkerStatus(pod="w-0")).model_dump(mode="json", by_alias=True)
    assert doc["lastLoad"] == {"bytesRead": nbytes, "seconds": report.seconds, "rateMbit": rate}
    assert WorkerStatus.model_validate(doc).last_load == report


def test_status_without_last_load_still_reads() -> None:
    old = WorkerStatus.model_validate({"pod": "w-0", "phase": "ready"})  # an older worker
    assert old.last_load is None
    report = LoadReport.model_validate({"bytesRead": 5, "seconds": 1.5})
    assert report.rate_mbit is None
