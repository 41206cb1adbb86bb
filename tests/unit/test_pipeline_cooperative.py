"""Cooperative execution over UCX loopback: a loading head and its source, one process.

The head starts holding layer 0 only, its source stage runs layers 1..L (it holds them
all). As layers "land", the head grows; new prefills then run more layers at the head
(the split policy's choice, bounded by what is held), running requests keep the split
their prefill got. Every request generates exactly the greedy tokens of one process.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_harness import PROMPTS, greedy, make_model, request, token_ids
from pipeline_harness import ENGINE, LAYERS, PROMPT_IDS, reference_tokens, stage_servers

from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.weights import load_stage_weights
from cascade_worker.pipeline.cooperative import CooperativeExecutor
from cascade_worker.pipeline.head import head_engine
from cascade_worker.pipeline.splits import SplitPolicy

pytestmark = [pytest.mark.timeout(120), pytest.mark.ucx, pytest.mark.usefixtures("one_ucx_loop")]


@pytest.mark.parametrize("policy", ["zigzag", "best_effort"])
def test_a_growing_head_and_its_source_keep_greedy_tokens(tmp_path: Path, policy: str) -> None:
    store = BlockStore.from_model_dir(make_model(tmp_path / "m"), 1)
    config = ModelConfig.from_hf(store.manifest.config)
    expected = reference_tokens(store)
    splits = SplitPolicy(LAYERS, 1, policy, load_time=1.0)  # type: ignore[arg-type]
    with stage_servers(store, [(1, LAYERS)]) as (source,):
        engine, executor = head_engine(
            store,
            1,
            [source.address],
            kv_cache_tokens=1024,
            splits=splits,
            **ENGINE,  # type: ignore[arg-type]
        )
        assert isinstance(executor, CooperativeExecutor)
        try:
            got = run_growing(engine, executor, store, config)
        finally:
            executor.close()
    assert got == expected
    # The head ran more layers as they landed (the policy decides how many).
    assert splits.chosen[0] == 1 and max(splits.chosen) > 1, splits.chosen


def run_growing(
    engine: LLMEngine, executor: CooperativeExecutor, store: BlockStore, config: ModelConfig
) -> dict[str, list[int]]:
    """The harness's requests, added in two waves while the head grows a layer a time."""
    prompts: list[str | list[int]] = [*PROMPTS, *PROMPT_IDS]
    got: dict[str, list[int]] = {}
    for i, prompt in enumerate(prompts):
        if i == 2:  # the second wave prefills after the head grew
            for _ in range(3):
                step(engine, got)
            for layer in range(executor.head.end, LAYERS):
                executor.grow(load_stage_weights(store, config, layer, layer + 1))
                step(engine, got)
        engine.add_request(request(f"q{i}", prompt, greedy(20)))
        got[f"q{i}"] = []
    while engine.has_work():
        step(engine, got)
    return got


def step(engine: LLMEngine, got: dict[str, list[int]]) -> None:
    for chunk in engine.step():
        assert not chunk.error, chunk.error
        got[chunk.request_id] += token_ids([chunk])
