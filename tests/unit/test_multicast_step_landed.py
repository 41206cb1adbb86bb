"""A binomial step holds its sender's step slot until the receiver says `landed`.

Eager sends complete when their bytes are in the sender's socket, so without the
receiver's word the next step's send would start while the last one is still on the
wire and the two would share the NIC the schedule gives to one (frames.Landed).
Fake endpoints stand in for UCX: they record what was sent and hand out frames.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from cascade_worker.blocks.store import BlockStore
from cascade_worker.checkpoints.checkpoint import write_checkpoint
from cascade_worker.checkpoints.spec import ModelSpec
from cascade_worker.multicast.frames import Fetch, FrameT, Landed
from cascade_worker.multicast.order import StepOrder
from cascade_worker.multicast.progress import BlockProgress, Pacer
from cascade_worker.multicast.serve import BlockServer
from cascade_worker.transport.endpoint import TransportError

TINY = ModelSpec(layers=4, hidden=32, heads=4, kv_heads=2, intermediate=64, vocab=300)


class FakeEndpoint:
    """One receiver's data connection as the sender sees it."""

    def __init__(self, peer: str, log: list[str]) -> None:
        self.peer = peer
        self.log = log
        self.frames: asyncio.Queue[FrameT] = asyncio.Queue()
        self.aborted = False

    async def send_frame(self, frame: FrameT) -> None:
        self.log.append(f"{frame.kind} -> {self.peer}")

    async def send_buffer(self, data: Any, **_: Any) -> int:
        self.log.append(f"bytes -> {self.peer}")
        return len(data)

    async def recv_frame(self, timeout: float | None = None) -> FrameT:
        got = asyncio.ensure_future(self.frames.get())
        while not got.done():
            if self.aborted:
                got.cancel()
                raise TransportError(f"endpoint to {self.peer} aborted")
            await asyncio.sleep(0.005)
        return got.result()

    def abort(self) -> None:
        self.aborted = True


def both_steps(
    server: BlockServer, log: list[str]
) -> tuple[FakeEndpoint, FakeEndpoint, asyncio.Future[None], asyncio.Future[None]]:
    """Receiver a asks for step 0 (block 0) and b for step 1 (block 1), at once."""
    a, b = FakeEndpoint("a", log), FakeEndpoint("b", log)
    first = asyncio.ensure_future(server._serve(a, Fetch(node="a", blocks=[0], step=0)))  # type: ignore[arg-type]
    second = asyncio.ensure_future(server._serve(b, Fetch(node="b", blocks=[1], step=1)))  # type: ignore[arg-type]
    return a, b, first, second


@pytest.fixture
def server(tmp_path: Path) -> BlockServer:
    write_checkpoint(tmp_path / "m", TINY)
    store = BlockStore.from_model_dir(tmp_path / "m", 2)
    plan = [(0, "a", 0), (1, "b", 1)]  # (step, receiver, block)
    srv = BlockServer("src", chunk_bytes=1 << 20, depth=4, pacer=Pacer(None),
                      order=StepOrder(plan, skip_after_s=0.3))  # fmt: skip
    srv.attach(BlockProgress(store))
    return srv


def test_the_next_step_waits_for_the_last_one_to_land(server: BlockServer) -> None:
    async def scenario() -> list[str]:
        log: list[str] = []
        a, b, first, second = both_steps(server, log)
        await asyncio.sleep(0.05)
        log.append("a lands")
        await a.frames.put(Landed(index=0))
        await first
        await asyncio.sleep(0.05)
        await b.frames.put(Landed(index=1))
        await second
        return log

    log = asyncio.run(scenario())
    assert log == ["block -> a", "bytes -> a", "a lands", "block -> b", "bytes -> b"]


def test_a_silent_receiver_is_cut_off_and_frees_the_slot(server: BlockServer) -> None:
    async def scenario() -> tuple[list[str], bool]:
        log: list[str] = []
        a, b, first, second = both_steps(server, log)
        with pytest.raises(TransportError):
            await first  # no `landed` within the stall timeout (0.3 s)
        await asyncio.sleep(0.02)
        await b.frames.put(Landed(index=1))
        await second
        return log, a.aborted

    log, aborted = asyncio.run(scenario())
    assert aborted and log == ["block -> a", "bytes -> a", "block -> b", "bytes -> b"]
