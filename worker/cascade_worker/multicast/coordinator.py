"""The common start and the end of a transfer, run by the leader (the plan's first source).

Start: every node starts its server, connects a control channel to the leader, says
`hello` (receivers ask for the manifest and preallocate their buffers from it), opens
the data connections it will need (EndpointPool.prewarm), then says `ready`. A binomial
plan starts in common: when every participant is ready, or `ready_timeout_s` has passed
(absent nodes are logged and the transfer starts without them), the leader sends
`start` on every control channel at once, since its steps give each sender's link to one
receiver at a time and a late receiver would hold its step. A chain starts with its
first ready node and each other node on its own `ready`: a hop pulls from the hop before
it whatever that one holds, so the first hop need not wait for the slowest pod of the
plan (issue 15: the first bytes within 1 s of the first target answering). Each node
takes the moment `start` arrives as its time zero: its times are its own transfer's
(what the flow model predicts for it; in a common start every node's share one origin
up to one control-message latency, tens of microseconds on a LAN), and connection
set-up is entirely before it. `start` says how long after the leader's time zero it
left (in the node's log).

End: each node reports `done` (with the blocks it is missing) when its own transfer
ends, but keeps serving, because peers downstream may still pull from it. Until then it
says `alive` every `heartbeat_s`: a node gone without closing its connection (its node
lost, its packets black-holed, TCP retrying for many minutes) is silent, and after
`silence_s` counts as finished, so the leader (which the operator's repair plan needs as
a source) is not held to the deadline. When every participant has reported (a node whose
control channel drops counts as finished), or the deadline passes, the leader sends
`shutdown` and everyone exits. The leader closes only once every `shutdown` has left
(bounded by `SHUTDOWN_FLUSH_S`): a source on a quota'd node is busy serving, its control
handlers can wait out CPU periods, and a channel closed under an unsent `shutdown` reads
to the receiver as a dead leader, which then lingers (`NodeOptions.linger_s`, 10 s)
before it reports, so it served 10 s late in a burst.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable

from cascade_worker.blocks.store import BlockStore
from cascade_worker.multicast.frames import (
    Alive,
    Done,
    FrameT,
    Hello,
    Manifest,
    Ready,
    Shutdown,
    Start,
)
from cascade_worker.transport.endpoint import Endpoint
from cascade_worker.transport.frames import FrameError

log = logging.getLogger(__name__)

SHUTDOWN_FLUSH_S = 5.0  # the longest the leader waits for its `shutdown` frames to leave


class Coordinator:
    def __init__(
        self,
        me: str,
        participants: Iterable[str],
        store: Callable[[], BlockStore],
        silence_s: float = 15.0,
    ):
        self.me = me
        self.silence_s = silence_s  # a receiving node silent this long has left
        self.members = set(participants) - {me}
        self.expected = set(self.members)  # whose reports the leader waits for
        self._store = store
        self.ready: set[str] = set()
        self.done: dict[str, Done | None] = {}  # None: the node vanished before reporting
        self.started = asyncio.Event()
        self.finished = asyncio.Event()
        self._all_ready = asyncio.Event()
        self._any_ready = asyncio.Event()
        self._all_done = asyncio.Event()
        self._ended: set[str] = set()  # conversations over (after `shutdown`, or cut short)
        self._all_ended = asyncio.Event()
        self.t0 = 0.0
        self._absent: asyncio.Task[None] | None = None  # a rolling start's ready timeout
        self._check()

    def _check(self) -> None:
        if self.ready or not self.expected:
            self._any_ready.set()
        if self.expected <= self.ready:
            self._all_ready.set()
        if self.expected <= set(self.done):
            self._all_done.set()
        if self.finished.is_set() and set(self.done) <= self._ended:
            self._all_ended.set()

    async def converse(self, ep: Endpoint[FrameT], hello: Hello) -> None:
        """One node's control conversation (a transport connection handler)."""
        node = hello.node
        if node not in self.members:
            raise FrameError(f"hello from {node!r}, which is not in the plan")
        store = self._store()
        if hello.digest is not None and hello.digest != store.manifest.digest:
            raise FrameError(
                f"{node} holds model {hello.digest}, the plan is {store.manifest.digest}"
            )
        try:
            if hello.want_manifest:
                await ep.send_frame(
                    Manifest(manifest=store.manifest, materialized=store.materialized)
                )
            frame = await ep.recv_frame()
            if not isinstance(frame, Ready):
                raise FrameError(f"expected ready from {node}, got {frame.kind!r}")
            self.ready.add(node)
            self._check()
            await self.started.wait()
            await ep.send_frame(Start(since_s=time.monotonic() - self.t0))
            frame = await self._next_report(ep, node)
            if not isinstance(frame, Done):
                raise FrameError(f"expected done from {node}, got {frame.kind!r}")
            self.done[node] = frame
            self._check()
            await self.finished.wait()
            await ep.send_frame(Shutdown())
        finally:
            if node not in self.done:
                log.warning("leader: %s left before reporting done", node)
                self.done[node] = None
            self._ended.add(node)
            self._check()

    async def _next_report(self, ep: Endpoint[FrameT], node: str) -> FrameT:
        """The node's next frame after its heartbeats. A node silent for `silence_s` is
        cut off: its endpoint aborted, the pending receive fails. (A watchdog, not a
        receive timeout: a receive cancelled by a timeout leaves ucxx holding the
        endpoint, and with it the listener's port, after the server closed.)"""
        heard = time.monotonic()

        async def watch() -> None:
            while time.monotonic() - heard <= self.silence_s:
                await asyncio.sleep(self.silence_s / 5)
            log.warning("leader: %s silent for %.0fs; counted as gone", node, self.silence_s)
            ep.abort()

        watchdog = asyncio.ensure_future(watch())
        try:
            while isinstance(frame := await ep.recv_frame(), Alive):
                heard = time.monotonic()
            return frame
        finally:
            watchdog.cancel()

    async def start_when_ready(self, timeout_s: float, rolling: bool = False) -> float:
        """Start once every participant is ready (bounded), or once the first one is when
        `rolling` (each node then starts on its `ready`); returns time zero (monotonic):
        the transfer's start, when bytes can flow."""
        if rolling:
            self._absent = asyncio.ensure_future(self._drop_absent(timeout_s))
            with contextlib.suppress(TimeoutError):  # `_drop_absent` says who is missing
                await asyncio.wait_for(self._any_ready.wait(), timeout_s)
        else:
            await self._drop_absent(timeout_s)
        self.t0 = time.monotonic()
        self.started.set()
        return self.t0

    async def _drop_absent(self, timeout_s: float) -> None:
        """Wait for every participant's `ready`; past `timeout_s` the absent ones are
        left out (the leader waits for no report of theirs)."""
        try:
            await asyncio.wait_for(self._all_ready.wait(), timeout_s)
        except TimeoutError:
            log.error("leader: starting without %s", sorted(self.expected - self.ready))
            self.expected = set(self.ready)
            self._check()

    async def finish_when_done(self, timeout_s: float) -> None:
        try:
            await asyncio.wait_for(self._all_done.wait(), timeout_s)
        except TimeoutError:
            log.error("leader: no report from %s", sorted(self.expected - set(self.done)))
        if self._absent is not None:  # a rolling start's ready timeout, still running
            self._absent.cancel()
        self.finished.set()
        self._check()
        try:
            await asyncio.wait_for(self._all_ended.wait(), SHUTDOWN_FLUSH_S)
        except TimeoutError:
            log.warning("leader: shutdown not sent to %s", sorted(set(self.done) - self._ended))
        await asyncio.sleep(0.05)  # sent is not yet received: let the frames cross
