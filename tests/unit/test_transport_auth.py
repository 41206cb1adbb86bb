"""UCX peers without the deployment's token are refused before any work (issue 13,
acceptance 1): strangers' Hello/Attach/Fetch to a multicast member are closed while the
members' transfer completes byte-identical; a head without the token cannot attach to
a stage, one with it can."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from engine_harness import make_model
from multicast_harness import FAST, run_plan
from pipeline_harness import ENGINE, reference_tokens, run_to_end

from cascade_protocol.peer_auth import MULTICAST, PIPELINE, PeerKey, new_token, prove
from cascade_worker.access import peer_key
from cascade_worker.access.refusals import REFUSED
from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.weights import load_stage_weights
from cascade_worker.multicast.frames import CODEC, Attach, Fetch, FrameT, Hello
from cascade_worker.multicast.runner import MulticastNode
from cascade_worker.pipeline.executor import PipelineError
from cascade_worker.pipeline.head import head_engine
from cascade_worker.pipeline.loop import shared_loop
from cascade_worker.pipeline.server import StageServer
from cascade_worker.transport.endpoint import TransportError
from cascade_worker.transport.frames import FrameError
from cascade_worker.transport.pool import EndpointPool

pytestmark = [pytest.mark.timeout(120), pytest.mark.ucx]

TOKEN = new_token()


def strangers() -> list[FrameT]:
    """Opening frames a non-member could send: no proof, another deployment's token, a
    proof for another purpose, and a member's token under a name outside the plan."""
    other = new_token()
    return [
        Hello(node="t0", want_manifest=True),
        Attach(node="t1", proof=prove(other, MULTICAST, "t1")),
        Attach(node="t0", proof=prove(TOKEN, PIPELINE, "t0")),
        Fetch(node="intruder", blocks=[0], proof=prove(TOKEN, MULTICAST, "intruder")),
    ]


async def knock(address: str, frame: FrameT) -> bool:
    """Open a connection with `frame`; True when nothing but a close comes back."""
    pool = EndpointPool(CODEC)
    try:
        ep = await pool.get(address, "stranger")
        await ep.send_frame(frame)
        try:
            got = await ep.recv_frame(timeout=3.0)
        except (TransportError, FrameError, TimeoutError):
            return True
        raise AssertionError(f"{frame.kind} got an answer: {got.kind}")
    finally:
        await pool.close()


def test_strangers_are_refused_and_the_members_transfer_completes() -> None:
    options = dataclasses.replace(FAST, key=PeerKey(TOKEN))
    before = REFUSED.total(MULTICAST)
    refused: list[bool] = []

    async def scenario(nodes: dict[str, MulticastNode], _: object) -> None:
        address = nodes["s0"].server.address
        refused.extend(await asyncio.gather(*(knock(address, f) for f in strangers())))

    run = run_plan("chain", 1, 2, options, scenario)
    for t in ("t0", "t1"):
        run.assert_complete(t)
    assert refused == [True] * 4
    assert REFUSED.total(MULTICAST) - before == 4


@pytest.mark.usefixtures("one_ucx_loop")
def test_a_head_without_the_token_cannot_attach_to_a_stage(tmp_path: Path) -> None:
    store = BlockStore.from_model_dir(make_model(tmp_path / "m"), 1)
    config = ModelConfig.from_hf(store.manifest.config)
    loop = shared_loop()
    key = PeerKey(TOKEN)
    weights = load_stage_weights(store, config, 2, 4)
    server = loop.run(StageServer(config, weights, key=key).start(), timeout=30)
    options = {"kv_cache_tokens": 1024, **ENGINE}
    before = REFUSED.total(PIPELINE)
    try:
        assert peer_key.current() is None
        with pytest.raises(PipelineError, match="did not attach"):
            head_engine(store, 2, [server.address], **options)  # type: ignore[arg-type]
        assert REFUSED.total(PIPELINE) - before == 1
        assert not server.attached
        peer_key.install(key)  # what a worker of the deployment holds
        engine, executor = head_engine(store, 2, [server.address], **options)  # type: ignore[arg-type]
        try:
            assert run_to_end(engine) == reference_tokens(store)
        finally:
            executor.close()
    finally:
        peer_key.install(None)
        loop.run(server.close(), timeout=30)
