"""Pipelines over UCX loopback, stages in this process: the tokens of one process.

Every stage server runs on one loop thread, the head's executor on another; the engine
runs here. Pipelines of 1, 2, 3 and 4 stages generate exactly the greedy tokens of the
single-process engine for concurrent prompts of different lengths (prefills chunked
and mixed with decodes); a head switching to local execution mid-generation continues
them unchanged; a stage that does not fit the chain is refused, and one whose forward
fails fails its requests, each with the stage's name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_harness import drain, make_model, token_ids
from pipeline_harness import (
    ENGINE,
    add_requests,
    pipeline,
    reference_tokens,
    run_to_end,
    stage_servers,
)

from cascade_protocol.generate import FinishReason
from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.stage import StageModel
from cascade_worker.pipeline.executor import PipelineError
from cascade_worker.pipeline.head import head_engine

pytestmark = [pytest.mark.timeout(120), pytest.mark.ucx, pytest.mark.usefixtures("one_ucx_loop")]


def test_pipelines_of_one_to_four_stages_match_one_process(tmp_path: Path) -> None:
    store = BlockStore.from_model_dir(make_model(tmp_path / "m"), 1)
    expected = reference_tokens(store)
    assert len(expected) == 5 and all(len(t) == 20 for t in expected.values())
    for cuts in [(), (2,), (1, 3), (1, 2, 3)]:
        with pipeline(store, cuts) as (engine, executor):
            assert run_to_end(engine) == expected, f"cuts {cuts}"
            assert executor.error is None
            if cuts:  # steps were cut into micro-batches, up to one per stage
                assert executor.steps_run < executor.micro_batches_run


def test_switch_to_local_mid_generation_keeps_greedy_tokens(tmp_path: Path) -> None:
    store = BlockStore.from_model_dir(make_model(tmp_path / "m"), 1)
    expected = reference_tokens(store)
    config = ModelConfig.from_hf(store.manifest.config)
    with pipeline(store, (1, 3)) as (engine, executor):
        ids = add_requests(engine)
        got: dict[str, list[int]] = {rid: [] for rid in ids}
        for _ in range(8):  # prefills done, some tokens generated
            for chunk in engine.step():
                got[chunk.request_id] += chunk.token_ids
        assert all(0 < len(t) < 20 for t in got.values())
        full = StageModel.load(store, config, 0, config.num_layers, CacheConfig(8, 100))
        local = executor.switch_to_local(engine, full)
        assert engine.executor is local and executor.error is not None  # detached
        for rid, chunks in drain(engine).items():
            got[rid] += token_ids(chunks)
    assert got == expected


def test_stages_that_do_not_fit_are_refused_by_name(tmp_path: Path) -> None:
    store = BlockStore.from_model_dir(make_model(tmp_path / "m"), 1)
    other = BlockStore.from_model_dir(make_model(tmp_path / "o", layers=6), 1)
    options = {"kv_cache_tokens": 1024, **ENGINE}
    with (
        stage_servers(store, [(2, 4), (1, 3)]) as (s24, s13),
        stage_servers(other, [(2, 6)]) as (o26,),
    ):
        cases = [
            ([s13.address, s24.address], 2, "does not continue at layer 2"),  # overlap
            ([s24.address], 1, "does not continue at layer 1"),  # gap
            ([s13.address], 1, "told to be the last stage"),  # ends early
            ([o26.address], 2, "model mismatch"),
            (["127.0.0.1:9"], 2, "unreachable"),
        ]
        for stages, end, why in cases:
            with pytest.raises(PipelineError, match=why) as info:
                head_engine(store, end, stages, **options)  # type: ignore[arg-type]
            assert "pipeline stage" in str(info.value)
        # Refusing left the servers serving.
        engine, executor = head_engine(store, 2, [s24.address], **options)  # type: ignore[arg-type]
        try:
            assert run_to_end(engine) == reference_tokens(store)
            # A forward that raises in a stage fails the step's requests, by name.
            s24._session.model.forward = boom  # type: ignore[union-attr]
            ids = add_requests(engine)
            finished = drain(engine)
            assert sorted(finished) == sorted(ids)
            for (chunk,) in finished.values():
                assert chunk.finish_reason is FinishReason.ERROR and chunk.error is not None
                assert f"pipeline stage 1 (layers 2:4 at {s24.address}) failed" in chunk.error
                assert "RuntimeError('boom')" in chunk.error
        finally:
            executor.close()


def boom(batch: object, layers: object = None) -> None:
    raise RuntimeError("boom")
