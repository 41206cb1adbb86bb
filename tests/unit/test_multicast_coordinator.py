"""The leader's end of a transfer: it closes only after every `shutdown` has left.

A source on a quota'd node is busy serving; when its loop let the control handlers run
later than the 50 ms it used to wait, the channel closed under an unsent `shutdown`, the
targets took the leader for dead and lingered 10 s before they reported (bench autoscale
run 20: pods ready 13-18 s after creation instead of 2-6 s)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any, cast

import pytest

from cascade_worker.blocks.store import BlockStore
from cascade_worker.multicast.coordinator import Coordinator
from cascade_worker.multicast.frames import Alive, Done, FrameT, Hello, Ready, Shutdown, Start
from cascade_worker.transport.endpoint import TransportError


class SlowEndpoint:
    """A control channel whose node says ready and done at once; sending takes `send_s`."""

    def __init__(self, node: str, send_s: float) -> None:
        self.inbox: list[FrameT] = [Ready(node=node), Done(node=node)]
        self.sent: list[FrameT] = []
        self.send_s = send_s

    async def send_frame(self, frame: FrameT) -> None:
        await asyncio.sleep(self.send_s)
        self.sent.append(frame)

    async def recv_frame(self, timeout: float | None = None) -> FrameT:
        return self.inbox.pop(0)


def no_store() -> BlockStore:
    """The leader's store; these nodes ask for no manifest and send no digest."""
    return cast(BlockStore, SimpleNamespace(manifest=SimpleNamespace(digest="d")))


def test_the_leader_finishes_only_after_every_shutdown_has_left() -> None:
    async def scenario() -> tuple[float, list[list[str]]]:
        coord = Coordinator("leader", ["leader", "t1", "t2"], no_store)
        eps = {n: SlowEndpoint(n, send_s=0.3) for n in ("t1", "t2")}
        talks = [
            asyncio.create_task(coord.converse(cast(Any, ep), Hello(node=n)))
            for n, ep in eps.items()
        ]
        await coord.start_when_ready(5.0)
        began = time.monotonic()
        await coord.finish_when_done(5.0)
        waited = time.monotonic() - began
        await asyncio.gather(*talks)
        return waited, [[f.kind for f in ep.sent] for ep in eps.values()]

    waited, sent = asyncio.run(scenario())
    assert sent == [[Start().kind, Shutdown().kind]] * 2
    # start (0.3 s) then shutdown (0.3 s) on each channel, concurrently: the leader
    # returned after both shutdowns left, not 50 ms after the last `done`.
    assert waited >= 0.55


def test_a_node_that_left_before_reporting_does_not_hold_the_leader() -> None:
    class Gone(SlowEndpoint):
        async def recv_frame(self, timeout: float | None = None) -> FrameT:
            frame = await super().recv_frame(timeout)
            if isinstance(frame, Done):
                raise ConnectionResetError("gone")
            return frame

    async def scenario() -> float:
        coord = Coordinator("leader", ["leader", "t1"], no_store)
        talk = asyncio.create_task(coord.converse(cast(Any, Gone("t1", 0.0)), Hello(node="t1")))
        await coord.start_when_ready(5.0)
        began = time.monotonic()
        await coord.finish_when_done(5.0)
        waited = time.monotonic() - began
        await asyncio.gather(talk, return_exceptions=True)
        assert coord.done == {"t1": None}
        return waited

    assert asyncio.run(scenario()) < 1.0


class Heartbeats(SlowEndpoint):
    """A receiving node that beats `beats` times, `every_s` apart, then reports done, or
    (`dies`) falls silent with its connection open, as a node lost without a reset."""

    def __init__(self, node: str, beats: int, every_s: float, dies: bool) -> None:
        super().__init__(node, 0.0)
        alive: list[FrameT] = [Alive(node=node)] * beats
        self.inbox = [Ready(node=node), *alive] + ([] if dies else [Done(node=node)])
        self.every_s = every_s
        self.aborted = asyncio.Event()

    def abort(self) -> None:
        self.aborted.set()

    async def recv_frame(self, timeout: float | None = None) -> FrameT:
        if self.sent:  # after `start`: one frame per beat, then silence
            delay = self.every_s if self.inbox else 3600.0
            try:
                await asyncio.wait_for(self.aborted.wait(), delay)
                raise TransportError("endpoint aborted")
            except TimeoutError:
                pass
        return self.inbox.pop(0)


def test_a_heartbeating_node_is_waited_for_and_a_silent_one_is_given_up() -> None:
    async def scenario() -> tuple[float, dict[str, Done | None]]:
        coord = Coordinator("leader", ["leader", "slow", "lost"], no_store, silence_s=0.5)
        eps = {
            # Reports after 1.2 s, longer than the silence bound, beating meanwhile.
            "slow": Heartbeats("slow", beats=5, every_s=0.2, dies=False),
            "lost": Heartbeats("lost", beats=1, every_s=0.2, dies=True),
        }
        talks = [
            asyncio.create_task(coord.converse(cast(Any, ep), Hello(node=n)))
            for n, ep in eps.items()
        ]
        began = await coord.start_when_ready(5.0)
        await coord.finish_when_done(60.0)
        waited = time.monotonic() - began
        await asyncio.gather(*talks, return_exceptions=True)
        return waited, coord.done

    waited, done = asyncio.run(scenario())
    assert done["lost"] is None
    assert isinstance(done["slow"], Done)
    assert 1.1 < waited < 5.0  # the slow node was waited for; the lost one did not hold


class LateEndpoint:
    """A node that says ready after `ready_s` and done at once."""

    def __init__(self, node: str, ready_s: float) -> None:
        self.node, self.ready_s = node, ready_s
        self.sent: list[tuple[float, FrameT]] = []
        self.frames = 0

    async def send_frame(self, frame: FrameT) -> None:
        self.sent.append((time.monotonic(), frame))

    async def recv_frame(self, timeout: float | None = None) -> FrameT:
        self.frames += 1
        if self.frames == 1:
            await asyncio.sleep(self.ready_s)
            return Ready(node=self.node)
        return Done(node=self.node)


def run_start(rolling: bool) -> tuple[float, dict[str, tuple[float, Start]]]:
    """Two nodes ready 0.05 s and 0.4 s in: when the leader started (after its call)
    and each node's `start` (when it left, the frame)."""

    async def scenario() -> tuple[float, dict[str, tuple[float, Start]]]:
        coord = Coordinator("leader", ["leader", "t1", "t2"], no_store)
        eps = {"t1": LateEndpoint("t1", 0.05), "t2": LateEndpoint("t2", 0.4)}
        began = time.monotonic()
        talks = [
            asyncio.create_task(coord.converse(cast(Any, ep), Hello(node=n)))
            for n, ep in eps.items()
        ]
        t0 = await coord.start_when_ready(5.0, rolling)
        await coord.finish_when_done(5.0)
        await asyncio.gather(*talks)
        starts = {}
        for n, ep in eps.items():
            at, frame = next((at, f) for at, f in ep.sent if isinstance(f, Start))
            assert isinstance(frame, Start)
            starts[n] = (at - began, frame)
        return t0 - began, starts

    return asyncio.run(scenario())


def test_a_chain_starts_with_its_first_ready_node_and_the_late_one_joins() -> None:
    t0, starts = run_start(rolling=True)
    assert 0.04 <= t0 < 0.2  # the first ready node's moment, not the slowest's
    assert starts["t1"][0] < 0.2 and starts["t2"][0] >= 0.39
    # The late node's `start` says how long after the leader's time zero it came.
    assert starts["t2"][1].since_s == pytest.approx(starts["t2"][0] - t0, abs=0.05)
    assert starts["t1"][1].since_s < 0.05


def test_a_binomial_plan_starts_in_common_once_every_node_is_ready() -> None:
    t0, starts = run_start(rolling=False)
    assert t0 >= 0.39 and all(at >= 0.39 for at, _ in starts.values())
    assert all(frame.since_s < 0.05 for _, frame in starts.values())


def test_a_chain_node_never_ready_is_left_out_after_the_ready_timeout() -> None:
    """The leader of a rolling start calls finish_when_done at once; the node that never
    says ready must still be dropped at `ready_timeout_s`, not awaited to the deadline."""

    async def scenario() -> float:
        coord = Coordinator("leader", ["leader", "t1", "gone"], no_store)
        talk = asyncio.create_task(
            coord.converse(cast(Any, LateEndpoint("t1", 0.01)), Hello(node="t1"))
        )
        began = time.monotonic()
        await coord.start_when_ready(0.3, rolling=True)
        await coord.finish_when_done(10.0)
        await talk
        return time.monotonic() - began

    assert asyncio.run(scenario()) < 2.0
