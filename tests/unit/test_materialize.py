"""Materialized start-up state: keys, artifacts beside the weights, the choice a start
makes (restore only its own key, refuse others with a reason), the artifact riding the
multicast's manifest frame, and a real restore on a tiny model (no profile, same cache,
same tokens)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from engine_harness import drain, greedy, make_model, request, token_ids

from cascade_api.scaleplan import Source, SourceTier
from cascade_planner.spec import plan_spec
from cascade_protocol.materialize import MaterializationKey, MaterializationState, MaterializedState
from cascade_worker.blocks.store import BlockStore
from cascade_worker.control.artifacts import (
    choose,
    offer_stored,
    read_artifacts,
    saved,
    write_artifact,
)
from cascade_worker.engine.engine import LLMEngine
from cascade_worker.engine.materialize import capture, start_key
from cascade_worker.engine.options import EngineOptions
from cascade_worker.multicast import NodeOptions
from cascade_worker.multicast.local import (
    plan_blocks,
    run_nodes,
    source_store,
    start_nodes,
    synthetic_model,
)
from cascade_worker.serving.factory import default_engine_factory
from cascade_worker.serving.restore import restoring


def key(**kw: Any) -> MaterializationKey:
    fields: dict[str, Any] = {
        "model_digest": "d1",
        "accelerator": "cpu",
        "dtype": "float32",
        "max_batch": 8,
        "max_model_len": 128,
        "prefill_budget": 512,
        "block_size": 16,
        "gpu_memory_utilization": 0.9,
        "compile": False,
        "runtime": "torch x; artifacts 1",
    }
    return MaterializationKey(**(fields | kw))


def artifact(k: MaterializationKey, **kw: Any) -> MaterializedState:
    doc: dict[str, Any] = {
        "id": k.id,
        "key": k,
        "kv_sizing": {"kv_cache_tokens": 512},
        "profile_s": 0.8,
        "created_at": 1.0,
    }
    return MaterializedState(**(doc | kw))


def test_the_key_id_is_stable_and_changes_with_every_field() -> None:
    assert key().id == key().id and len(key().id) == 32
    changes: list[dict[str, Any]] = [
        {"model_digest": "d2"}, {"max_batch": 16}, {"dtype": "bfloat16"},
        {"accelerator": "NVIDIA H100"}, {"compile": True}, {"runtime": "torch y"},
    ]  # fmt: skip
    variants = [key(**change) for change in changes]
    assert len({v.id for v in variants} | {key().id}) == len(variants) + 1


def test_a_start_restores_only_its_own_key() -> None:
    mine, other = key(), key(max_batch=16)
    state, info = choose([artifact(other), artifact(mine)], mine)
    assert state is not None and state.key == mine
    assert info.state == MaterializationState.RESTORED and info.artifact == mine.id


def test_nothing_offered_profiles() -> None:
    state, info = choose([], key())
    assert state is None and info.state == MaterializationState.PROFILED and info.reason is None


def test_another_models_or_settings_artifact_is_refused_naming_the_difference() -> None:
    mine = key()
    for other, field in (
        (key(model_digest="d2"), "model_digest"),
        (key(max_batch=16), "max_batch"),
    ):
        state, info = choose([artifact(other)], mine)
        assert state is None and info.state == MaterializationState.REFUSED
        assert info.reason is not None and field in info.reason and info.artifact == other.id


def test_an_artifact_filed_under_my_id_with_another_key_is_refused() -> None:
    """A stale or altered file: named for this start's key, recorded for another."""
    mine = key()
    forged = artifact(key(model_digest="d2")).model_copy(update={"id": mine.id})
    state, info = choose([forged], mine)
    assert state is None and info.state == MaterializationState.REFUSED
    assert info.reason is not None and "stale or altered" in info.reason


def test_a_compile_cache_that_does_not_match_its_checksum_is_refused() -> None:
    mine = key(compile=True)
    bad = artifact(mine, compile_cache="QUJD", compile_cache_sha256="0" * 64)
    state, info = choose([bad], mine)
    assert state is None and info.reason is not None and "checksum" in info.reason


def test_artifacts_are_written_beside_the_weights_and_read_back(tmp_path: Path) -> None:
    a, b = artifact(key()), artifact(key(max_batch=4))
    path = write_artifact(tmp_path, a)
    write_artifact(tmp_path, b)
    assert path == tmp_path / ".materialized" / f"{a.id}.json"
    (tmp_path / ".materialized" / "torn.json").write_text('{"id": "x", "key": ')
    (tmp_path / ".materialized" / "foreign.json").write_text(json.dumps({"hello": 1}))
    found = read_artifacts(tmp_path)
    assert sorted(s.id for s in found) == sorted([a.id, b.id])
    assert not list((tmp_path / ".materialized").glob(".tmp-*"))
    assert read_artifacts(tmp_path / "nothing-here") == []


def test_the_artifact_travels_with_the_manifest_to_a_receiver_without_a_store() -> None:
    manifest, buffers = synthetic_model(4, 64 * 1024, 0)
    spec = plan_spec(
        "chain", [Source(pod="s0", tier=SourceTier.HOST)], ["t0", "t1"], plan_blocks(manifest),
        deployment="local", model_digest=manifest.digest,
    )  # fmt: skip
    source = source_store(manifest, buffers)
    source.materialized = [artifact(key(model_digest=manifest.digest))]
    opts = NodeOptions(chunk_bytes=32 * 1024, stall_timeout_s=5, deadline_s=20, linger_s=0.2)

    async def go() -> dict[str, BlockStore | None]:
        nodes, peers = await start_nodes(spec, {"s0": source, "t0": None, "t1": None}, opts)
        await run_nodes(nodes, peers)
        return {pod: node.store for pod, node in nodes.items()}

    stores = asyncio.run(go())
    for pod in ("t0", "t1"):
        got = stores[pod]
        assert got is not None and got.complete()
        assert got.materialized == source.materialized


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path: Path = make_model(tmp_path_factory.mktemp("llama"))
    return path


def test_a_recorded_start_restores_without_profiling_and_serves_the_same(model: Path) -> None:
    torch.manual_seed(0)
    store = BlockStore.from_model_dir(model, 2)
    options = EngineOptions(max_batch=4, max_model_len=128)
    k = start_key(store, **options.engine_kwargs())
    assert k.model_digest == store.manifest.digest and k.max_model_len == 128
    assert k == start_key(store, max_batch=4, max_model_len=128, device="cpu")
    cold = LLMEngine.from_store(store, **options.engine_kwargs())
    assert cold.startup is not None
    recorded = capture(k, cold.startup, by="job-pod")
    assert recorded.id == k.id and recorded.profile_s > 0 and recorded.compile_cache is None
    assert recorded.problem(k) is None

    store.materialized = [recorded]
    restore, build = restoring(default_engine_factory, store, options, enabled=True)
    assert restore is not None and restore.state == recorded
    warm, _ = build()
    assert isinstance(warm, LLMEngine) and warm.startup is not None
    assert warm.startup.kv_sizing == cold.startup.kv_sizing
    assert warm.executor.cache == cold.executor.cache
    # the restore is timed, not set: reading the artifact, checking and applying it
    assert 0 < warm.startup.kv_s < cold.startup.kv_s
    assert restore.read_s > 0
    info = restore.info
    assert info.state == MaterializationState.RESTORED
    assert info.profile_s == recorded.profile_s
    assert info.restore_s is not None and info.restore_s > 0
    assert info.restore_s == pytest.approx(restore.read_s + warm.startup.restorable_s, abs=1e-6)
    assert info.saved_s == saved(recorded, info.restore_s)
    assert info.saved_s == pytest.approx(recorded.profile_s - info.restore_s, abs=1e-4)
    assert info.saved_s < recorded.profile_s

    params = greedy(8)
    outs = []
    for engine in (cold, warm):
        engine.add_request(request("a", "Hello there", params))
        (chunks,) = drain(engine).values()
        outs.append(token_ids(chunks))
    assert outs[0] == outs[1] and len(outs[0]) == 8


def test_a_start_with_other_settings_refuses_the_recording_and_profiles(model: Path) -> None:
    store = BlockStore.from_model_dir(model, 2)
    recorded_key = start_key(store, max_batch=4, max_model_len=128)
    store.materialized = [artifact(recorded_key, kv_sizing=restore_options_doc())]
    options = EngineOptions(max_batch=2, max_model_len=128)
    restore, build = restoring(default_engine_factory, store, options, enabled=True)
    assert restore is not None and restore.state is None
    assert restore.info.state == MaterializationState.REFUSED
    assert restore.info.reason is not None and "max_batch: 4 != 2" in restore.info.reason
    engine, _ = build()
    assert isinstance(engine, LLMEngine) and engine.startup is not None
    assert engine.startup.kv_s > 0  # profiled: the cold path


def test_materialization_off_offers_nothing(model: Path) -> None:
    store = BlockStore.from_model_dir(model, 1)
    restore, _ = restoring(default_engine_factory, store, EngineOptions(), enabled=False)
    assert restore is None


def restore_options_doc() -> dict[str, Any]:
    """A KV sizing document that must never be used (the test fails if restored)."""
    doc = {"budget_bytes": 1, "weight_bytes": 1, "activation_peak_bytes": 0, "other_bytes": 0,
           "kv_bytes_per_token": 1, "kv_cache_tokens": 16, "block_size": 16,
           "profiled_s": 0.0, "method": "never"}  # fmt: skip
    return doc


def test_a_source_offers_what_storage_recorded_after_it_was_filled(tmp_path: Path) -> None:
    manifest, buffers = synthetic_model(2, 1024, 0)
    store = source_store(manifest, buffers)
    early = artifact(key(model_digest=manifest.digest))
    store.materialized = [early]
    late = artifact(key(model_digest=manifest.digest, max_batch=4))
    write_artifact(tmp_path, early)
    write_artifact(tmp_path, late)
    offer_stored(store, tmp_path)
    assert [s.id for s in store.materialized] == [early.id, late.id]
    offer_stored(store, tmp_path)  # nothing new: nothing added twice
    assert len(store.materialized) == 2
