"""Trusted weights (issue 13, acceptance 2): SHA-256 digests that receivers re-derive, and
a pinned digest (spec.model.digest) that a changed checkpoint or plan cannot pass.

- a leader whose manifest's block bytes and checksums were altered consistently (the
  digest kept, so it still names the plan's model) is refused by every receiver before a
  byte is installed; with the digest re-computed too, it no longer names the plan's model;
- a block whose xxh3 checksum was made to match but whose SHA-256 does not is not installed;
- a checkpoint with one flipped bit fails to load against the pinned digest, with the
  error naming it, and a plan for another model is refused; the operator's Degraded
  condition names the pod and the error.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import numpy as np
import pytest
from multicast_harness import FAST

from cascade_api.scaleplan import Source, SourceTier
from cascade_operator.conditions import degraded
from cascade_planner.spec import plan_spec
from cascade_protocol.control import LoadRequest, TransferRequest
from cascade_worker.blocks.manifest import ModelManifest, checksum, model_digest, strong_hash
from cascade_worker.blocks.pack import pack_model
from cascade_worker.blocks.store import BlockStore
from cascade_worker.checkpoints.checkpoint import write_checkpoint
from cascade_worker.checkpoints.spec import ModelSpec
from cascade_worker.config import WorkerConfig
from cascade_worker.control.errors import RequestError
from cascade_worker.control.jobs import Control, start_transfer
from cascade_worker.control.load import claim_load, run_load
from cascade_worker.multicast.local import plan_blocks, synthetic_model
from cascade_worker.multicast.local import run_nodes as run_all
from cascade_worker.multicast.result import NodeResult
from cascade_worker.multicast.runner import MulticastNode

TINY = ModelSpec(layers=2, hidden=32, heads=4, kv_heads=2, intermediate=64, vocab=300)


def tampered(manifest: ModelManifest, buffers: list[np.ndarray], *, redigest: bool) -> tuple[
    ModelManifest, list[np.ndarray]
]:  # fmt: skip
    """Block 1's bytes changed, its xxh3 and SHA-256 re-computed to match; the digest kept
    (it still names the original model) or re-computed (`redigest`)."""
    bad = [b.copy() for b in buffers]
    bad[1][0] ^= 0xFF
    block = manifest.blocks[1].model_copy(
        update={"checksum": checksum(bad[1]), "sha256": strong_hash(bad[1])}
    )
    blocks = [*manifest.blocks[:1], block, *manifest.blocks[2:]]
    digest = manifest.digest
    if redigest:
        digest = model_digest(manifest.arch, manifest.num_layers, manifest.config, blocks, {})
    return manifest.model_copy(update={"blocks": blocks, "digest": digest}), bad


@pytest.mark.ucx
@pytest.mark.timeout(90)
@pytest.mark.parametrize("redigest", [False, True])
def test_receivers_refuse_a_consistently_altered_manifest(redigest: bool) -> None:
    manifest, buffers = synthetic_model(4, 64 * 1024, seed=3)
    evil, evil_buffers = tampered(manifest, buffers, redigest=redigest)
    assert evil.verify_digest() is redigest  # kept digest: no longer its contents'
    spec = plan_spec(
        "chain", [Source(pod="s0", tier=SourceTier.GPU)], ["t0", "t1"],
        plan_blocks(manifest), deployment="d", model_digest=manifest.digest,
    )  # fmt: skip
    options = dataclasses.replace(FAST, ready_timeout_s=5, deadline_s=10)
    # A compromised leader serves the altered model as if it were the plan's.
    liar = spec.model_copy(update={"model_digest": evil.digest})
    source = BlockStore.from_buffers(evil, evil_buffers)

    async def go() -> dict[str, NodeResult | BaseException]:
        nodes = {"s0": MulticastNode(liar, "s0", source, options=options)}
        nodes |= {t: MulticastNode(spec, t, None, options=options) for t in ("t0", "t1")}
        peers = {pod: await node.start() for pod, node in nodes.items()}
        return await run_all(nodes, peers)

    results = asyncio.run(go())
    why = "plan wants" if redigest else "does not match its digest"
    for t in ("t0", "t1"):
        r = results[t]
        assert isinstance(r, BaseException) and why in str(r), r


def test_a_block_that_passes_xxh3_but_not_sha256_is_not_installed() -> None:
    manifest, buffers = synthetic_model(2, 4096, seed=5)
    bad = buffers[0].copy()
    bad[7] ^= 1
    # A manifest whose xxh3 was made to match the altered bytes (a forged collision)
    # but whose SHA-256 is the original's.
    forged = manifest.blocks[0].model_copy(update={"checksum": checksum(bad)})
    store = BlockStore(manifest.model_copy(update={"blocks": [forged, manifest.blocks[1]]}))
    store.buffer(0)[:] = bad
    assert not store.install(0) and not store.has(0)
    store.buffer(0)[:] = buffers[0]  # the genuine bytes fail the forged xxh3 instead
    assert not store.install(0)


def config(path: Path, pin: str) -> WorkerConfig:
    return WorkerConfig(
        host="127.0.0.1", port=0, model_uri="", deployment="d", pod_name="w-0",
        drain_seconds=0.0, model_path=str(path), blocks=2, model_digest_pin=pin,
    )  # fmt: skip


def load(ctl: Control) -> None:
    async def go() -> None:
        path, blocks = claim_load(ctl, LoadRequest())
        await run_load(ctl, path, blocks)

    asyncio.run(go())


def flip_one_bit(model: Path) -> None:
    weights = next(model.glob("*.safetensors"))
    raw = bytearray(weights.read_bytes())
    raw[-100] ^= 0x01  # inside the last tensor's data
    weights.write_bytes(bytes(raw))


def test_a_flipped_bit_fails_against_the_pinned_digest(tmp_path: Path) -> None:
    model = tmp_path / "m"
    write_checkpoint(model, TINY)
    pin = pack_model(model, 2).manifest.digest
    assert len(pin) == 64  # SHA-256
    good = Control(config(model, pin))
    load(good)
    assert good.state.error is None and good.state.store is not None
    flip_one_bit(model)
    bad = Control(config(model, pin))
    load(bad)
    assert bad.state.store is None and bad.state.phase == "failed"
    assert bad.state.error is not None and f"is not spec.model.digest {pin}" in bad.state.error
    # The operator's status names the pod and why.
    cond = degraded([], [], 1, {"w-0": bad.state.error})
    assert cond.status == "True" and cond.reason == "WorkerJobFailed"
    assert "w-0: load" in cond.message and pin in cond.message


def test_a_plan_for_another_model_is_refused_by_a_pinned_worker(tmp_path: Path) -> None:
    manifest, _ = synthetic_model(2, 1024)
    ctl = Control(config(tmp_path, "0" * 64))
    spec = plan_spec(
        "chain", [Source(pod="s0", tier=SourceTier.GPU)], ["w-0"], plan_blocks(manifest),
        deployment="d", model_digest=manifest.digest,
    )  # fmt: skip
    req = TransferRequest(plan=spec, peers={"s0": "127.0.0.1:1", "w-0": "127.0.0.1:2"})
    with pytest.raises(RequestError, match=r"is not spec\.model\.digest") as info:
        asyncio.run(start_transfer(ctl, req))
    assert info.value.status == 409 and ctl.state.phase == "idle"
