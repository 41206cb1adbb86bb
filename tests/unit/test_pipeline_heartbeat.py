"""A stage ends the session of a head that fell silent, and only of one.

A head killed with its network (a lost node, a pod's network torn down before its
close reached the wire) leaves its stages a connection that reports no error; the
stage would stay the head's stage for good (a live scale-up's source never serving
alone again). The head sends a heartbeat each `heartbeat_s`; a stage ends a session
whose head has been silent for `head_silence_s`. Here a chain whose heartbeats keep
coming stays attached past that time, and one that stops sending them (standing for
the dead head: its connection stays open) loses the session.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from engine_harness import make_model

from cascade_dev.testing import holds_for, wait_for
from cascade_worker.blocks.store import BlockStore
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.kv_blocks import CacheConfig
from cascade_worker.engine.weights import load_stage_weights
from cascade_worker.pipeline.chain import StageChain
from cascade_worker.pipeline.frames import model_fingerprint
from cascade_worker.pipeline.loop import shared_loop
from cascade_worker.pipeline.server import StageServer

pytestmark = [pytest.mark.timeout(120), pytest.mark.ucx, pytest.mark.usefixtures("one_ucx_loop")]

SILENCE_S = 0.8


def test_a_silent_head_loses_its_stage_and_a_live_one_keeps_it(tmp_path: Path) -> None:
    store = BlockStore.from_model_dir(make_model(tmp_path / "m"), 1)
    config = ModelConfig.from_hf(store.manifest.config)
    loop = shared_loop()
    weights = load_stage_weights(store, config, 2, config.num_layers)
    server = StageServer(config, weights, head_silence_s=SILENCE_S)
    loop.run(server.start(), timeout=30)
    ended: list[float] = []
    server.on_session_end = lambda: ended.append(time.monotonic())

    def chain(heartbeat_s: float) -> StageChain:
        return StageChain(
            f"hb{heartbeat_s}",
            [server.address],
            model=model_fingerprint(config),
            cache=CacheConfig(8, 32),
            device=torch.device("cpu"),
            connect_timeout_s=5.0,
            heartbeat_s=heartbeat_s,
        )

    try:
        beating = chain(SILENCE_S / 8)
        loop.run(beating.attach(2, config.num_layers), timeout=30)
        assert server.attached
        holds_for(
            "the beating head keeps its stage",  # three silences' worth
            lambda: server.attached and ended == [] and beating.error is None,
            SILENCE_S * 3,
            every=0.05,
        )
        loop.run(beating.detach(), timeout=30)
        wait_for("the detached stage to end", lambda: not server.attached, 5, every=0.05)
        assert len(ended) == 1

        silent = chain(3600.0)  # attached, connection open, never a heartbeat
        loop.run(silent.attach(2, config.num_layers), timeout=30)
        attached_at = time.monotonic()
        assert server.attached
        wait_for("the silent head to lose it", lambda: not server.attached, SILENCE_S * 5, 0.05)
        assert len(ended) == 2 and ended[1] - attached_at >= SILENCE_S * 0.9
        # Its connection closed: the head learns it lost the stage.
        wait_for("the head to learn it", lambda: silent.error is not None, 5, every=0.05)
        assert "pipeline stage 1" in str(silent.error)
        loop.run(silent.detach(), timeout=30)
    finally:
        loop.run(server.close(), timeout=30)
