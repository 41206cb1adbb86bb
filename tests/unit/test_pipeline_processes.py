"""Pipelines of real processes: `python -m cascade_worker.pipeline.stage_process` per stage.

The head (this test process) runs layers [0, 1) and the engine; two stage processes run
[1, 3) and [3, 4). They generate exactly the single-process greedy tokens; a stage
process killed mid-generation fails every pending request with finish_reason "error"
and a message naming that stage, within a couple of seconds, and the pipeline stays
failed (no hang, no silent retry); the surviving stage joins a new pipeline with a
replacement for the dead one.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from engine_harness import make_model
from pipeline_harness import (
    ENGINE,
    add_requests,
    reference_tokens,
    run_to_end,
    start_stage_processes,
    stop,
)

from cascade_protocol.generate import FinishReason
from cascade_worker.blocks.store import BlockStore
from cascade_worker.pipeline.head import head_engine

pytestmark = [pytest.mark.timeout(120), pytest.mark.ucx, pytest.mark.usefixtures("one_ucx_loop")]


STAGES = [(1, 3), (3, 4)]
DETECT_S = 5.0  # bound on noticing a dead stage (measured well under 1 s here)


def test_three_stage_processes_match_one_process_and_a_killed_stage_fails_fast(
    tmp_path: Path,
) -> None:
    model_dir = make_model(tmp_path / "m")
    # Stages [1, 3), [3, 4) and a spare [3, 4) for after the kill, started together.
    procs = start_stage_processes(model_dir, [*STAGES, STAGES[1]])
    try:
        store = BlockStore.from_model_dir(model_dir, 1)
        expected = reference_tokens(store)
        addresses = [procs[0][1], procs[1][1]]
        engine, executor = head_engine(
            store, 1, addresses, kv_cache_tokens=1024, min_micro_batch_tokens=1, **ENGINE
        )  # type: ignore[arg-type]
        try:
            assert run_to_end(engine) == expected
            assert executor.steps_run < executor.micro_batches_run and executor.error is None

            # The same stages serve the next run too; kill the last stage midway.
            ids = add_requests(engine, max_tokens=90)
            for _ in range(4):
                assert all(c.finish_reason is None for c in engine.step())
            os.kill(procs[1][0].pid, signal.SIGKILL)
            killed = time.monotonic()
            finished = {}
            while engine.has_work():
                assert time.monotonic() - killed < DETECT_S, "a dead stage went unnoticed"
                for chunk in engine.step():
                    if chunk.finish_reason is not None:
                        finished[chunk.request_id] = chunk
            assert sorted(finished) == sorted(ids)
            for chunk in finished.values():
                assert chunk.finish_reason is FinishReason.ERROR
                assert chunk.error is not None
                assert f"pipeline stage 2 (layers 3:4 at {addresses[1]})" in chunk.error
            assert executor.error is not None
        finally:
            executor.close()
        # A replacement for the dead stage and the surviving one form a new pipeline.
        addresses = [procs[0][1], procs[2][1]]
        engine, executor = head_engine(store, 1, addresses, kv_cache_tokens=1024, **ENGINE)  # type: ignore[arg-type]
        try:
            assert run_to_end(engine) == expected
        finally:
            executor.close()
    finally:
        codes = [stop(proc) for proc, _ in procs]
    assert codes[0] == codes[2] == 0  # SIGTERM: a clean exit
