"""Live scale-ups on a worker: serve while the weights arrive (λScale §4.2-4.4).

Coordination lives in the workers, following the plan. The operator hands every
participant the whole ScalePlan in its transfer order, `executionPipelines` included,
so before the first block lands each target knows the pipeline it belongs to, its place
in it and its layers (`seat_for`). From then on it acts on its own block arrivals with
no round trip through the operator: the operator polls workers about once a second and
the API server adds its own latency, while a pipeline must serve within 0.5 s of its
covering blocks landing. So:

- a stage listens as soon as it holds its layers' blocks;
- the head, from the start of the transfer, asks its stages (GET /v1/status, every
  POLL_S) until each listens, and then prepares everything but its weights: its KV
  cache, and the stages attached (each sizes its own cache then). When its own blocks
  land it only maps them and starts its engine; it takes requests, and the gateway
  routes to it like to any instance. A stage that already serves alone (without a
  stage role) means no pipeline, and the head serves alone once complete;
- once a target holds every block it serves alone (no serve order needed): a stage
  starts its own engine beside its stage server and ends the stage when its head leaves;
  the head switches to local execution (running requests recompute their KV cache),
  waits (bounded) for the other members to serve, then hands back (MIGRATE) all but its
  share of the requests in flight; the gateway resumes those, prompt plus generated
  tokens, on the least loaded instances: the members that just started. None restarts
  from scratch and none is lost.

A head whose pipeline breaks (a stage died) hands its requests in flight back for the
gateway to resume elsewhere and takes no more; it serves alone once its own blocks are
complete (the switch to local execution heals it).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cascade_protocol.control import TransferRequest
from cascade_worker.control.errors import RequestError
from cascade_worker.control.jobs import NodeHooks
from cascade_worker.multicast.result import NodeResult
from cascade_worker.serving.cooperate import grow_head, redirect_queued
from cascade_worker.serving.live_plan import Seat, covers, seat_for
from cascade_worker.serving.peers import DISSOLVE_WAIT_S, Peers
from cascade_worker.serving.pipeline import StageRole, prepare_head
from cascade_worker.serving.service import Serving

if TYPE_CHECKING:
    from cascade_worker.pipeline.head import PreparedHead

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """A head ready to start the moment its own blocks land."""

    addresses: list[str]  # its stages', in layer order
    stages_covered: float  # wall time the last stage held its layers
    head: PreparedHead


class LiveScaleUp:
    """One transfer's live scaling on this worker; see the module docstring."""

    def __init__(
        self, serving: Serving, req: TransferRequest, spawn: Callable[[Any], None]
    ) -> None:
        self.serving = serving
        self.spawn = spawn
        self.me = serving.config.pod_name
        self.peers = Peers(dict(req.peers), serving.config.port)
        self.seat = seat_for(req.plan, self.me)
        self.cooperative = req.cooperative  # a source-target pair cooperates (cooperate.py)
        self.growing = False
        self.target = self.me in req.plan.targets
        self.joined = False
        self.stage: StageRole | None = None  # the stage this scale-up made this worker
        # A head's preparation (KV cache, stages attached), started with the transfer.
        self.preparing: asyncio.Task[Prepared | None] | None = None
        # The head's start and the switch to serving alone take turns: blocks that
        # complete while the head starts must not detach the stages it is adopting.
        self.turn = asyncio.Lock()

    def hooks(self) -> NodeHooks:
        """The node's hooks; a source's seat (a last stage) is taken at once, and a
        head starts preparing (everything but its weights) at once."""
        seat = self.seat
        if seat is not None and not self.target:
            self.joined = True
            self.spawn(self._join(seat, time.time()))
        elif seat is not None and seat.is_head:
            self.preparing = asyncio.ensure_future(self._prepare(seat))
        return NodeHooks(self._on_layers, self._on_result, self._on_transfer_end)

    # -- forming --------------------------------------------------------------------------

    def _on_layers(self, start: int, end: int) -> None:
        seat, store = self.seat, self.serving.state.current_store()
        if seat is not None and self.joined and self.cooperative and not self.growing:
            self.growing = True
            self.spawn(self._grow())
        if seat is None or self.joined or store is None:
            return
        if store.complete() or not covers(store.ready_layers(), seat.layers):
            return
        self.joined = True
        self.spawn(self._join(seat, time.time()))

    async def _join(self, seat: Seat, covered_at: float) -> None:
        try:
            if seat.is_head:
                await self._head(seat, covered_at)
            else:
                await self._stage(seat, covered_at)
        except RequestError as exc:
            log.warning("live scale-up: not joining pipeline %s: %s", seat.members, exc)

    async def _stage(self, seat: Seat, covered_at: float) -> None:
        serving = self.serving
        store = serving.claim_stage(seat.layers)
        role = self.stage = serving.stage
        assert role is not None
        role.covered_at = covered_at
        if await serving.start_stage(store, serving.options()) and role.server is not None:
            role.server.on_session_end = self._end_stage
            if self.cooperative:
                role.server.on_work = lambda: redirect_queued(serving)
            log.info("live scale-up: stage %s of %s listens", list(seat.layers), seat.members)

    async def _prepare(self, seat: Seat) -> Prepared | None:
        """Once the stages listen: the head's KV cache and its stages attached (on a
        thread), while its own blocks still arrive; None if no pipeline will form."""
        found = await self.peers.stages_listening(seat.members[1:], self._own_complete)
        store = self.serving.state.current_store()
        if found is None or store is None:  # the store exists once the stages listen
            return None
        addresses, stages_covered = found
        serving = self.serving
        loop = asyncio.get_running_loop()
        config, end = store.manifest.config, seat.layers[1]
        try:
            prepared = await asyncio.to_thread(
                prepare_head, config, serving.options(), end, addresses, loop, self.cooperative
            )
        except Exception:
            log.exception("live scale-up: preparing the head of %s failed", seat.members)
            return None
        return Prepared(addresses, max(stages_covered, default=0.0), prepared)

    async def _head(self, seat: Seat, covered_at: float) -> None:
        async with self.turn:
            await self._start_head(seat, covered_at)

    async def _start_head(self, seat: Seat, covered_at: float) -> None:
        serving, preparing = self.serving, self.preparing
        ready = await preparing if preparing is not None else None
        if ready is None or self._own_complete():
            # Complete before it could head (a fast transfer): `_alone` detaches the
            # prepared stages and serves alone; a head started now would find them gone.
            return
        store = serving.claim(seat.layers)
        started = time.time()
        splits = None
        if self.cooperative:  # imported here: the planner's zigzag brings networkx
            from cascade_worker.pipeline.splits import SplitPolicy

            splits = SplitPolicy(store.manifest.num_layers, seat.layers[1])
        ok = await serving.start_head(
            store, serving.options(), seat.layers[1], ready.addresses, ready.head, splits
        )
        head = serving.head
        if not ok or head is None:
            return
        head.covered_at = max(covered_at, ready.stages_covered)
        head.serving_at = time.time()
        log.info(
            "live scale-up: pipeline %s serves, %.3f s after its blocks covered the model "
            "(prepared in %.3f s before; started in %.3f s)", seat.members,
            head.serving_at - head.covered_at, ready.head.seconds, head.serving_at - started,
        )  # fmt: skip

    async def _grow(self) -> None:
        try:
            while await grow_head(self.serving):
                pass  # layers that landed while it grew: grow again
        finally:
            self.growing = False

    def _own_complete(self) -> bool | None:
        """Whether this worker holds every block (None: no store yet)."""
        store = self.serving.state.current_store()
        return None if store is None else store.complete()

    # -- dissolving -----------------------------------------------------------------------

    def _end_stage(self) -> None:
        """Its head left: the stage has done its part."""
        if self.stage is not None and self.serving.stage is self.stage:
            self.stage = None
            self.spawn(self.serving.end_stage())

    def _on_transfer_end(self) -> None:
        """Every target completed or failed: a stage no head uses has no more part (one
        that a head still uses ends when that head leaves, on its own completion)."""
        server = self.stage.server if self.stage is not None else None
        if server is None or not server.attached:
            self._end_stage()

    def _on_result(self, result: NodeResult) -> None:
        if self.target and not result.missing:
            self.spawn(self._alone())

    async def _alone(self) -> None:
        """Serve alone now that every block is here (see the module docstring); after a
        head start under way, so that it switches the started head to local execution."""
        async with self.turn:
            await self._serve_alone()

    async def _serve_alone(self) -> None:
        serving = self.serving
        store = serving.state.current_store()
        assert store is not None
        await self._unprepare()
        if serving.head is not None:
            if await serving.switch_to_local(store):
                await self._hand_back()
            return
        if serving.starting or (serving.engine is not None and not serving.engine.stopped):
            return
        try:
            store = serving.claim()
        except RequestError as exc:
            log.warning("live scale-up: cannot serve alone: %s", exc)
            return
        await serving.start(store, serving.options())

    async def _unprepare(self) -> None:
        """Wait out a head's preparation (it ends soon once the store is complete) and
        detach the stages no engine took."""
        preparing, self.preparing = self.preparing, None
        ready = await preparing if preparing is not None else None
        if ready is not None and self.serving.head is None:
            await asyncio.to_thread(ready.head.close)

    async def _hand_back(self) -> None:
        """Keep this head's share of the requests in flight; the others go back to the
        gateway once the other members serve (bounded by DISSOLVE_WAIT_S)."""
        seat = self.seat
        assert seat is not None
        others = [p for p in seat.members if p != self.me]
        ready = await self.peers.all_serving(others, DISSOLVE_WAIT_S)
        engine = self.serving.engine
        if engine is None or not ready:
            log.info("live scale-up: pipeline dissolved; the others do not serve: keeping all")
            return
        keep = math.ceil(engine.in_flight / len(seat.members))
        moved = engine.hand_back(keep, "migrate: execution pipeline dissolved")
        log.info(
            "live scale-up: pipeline dissolved; %d request(s) handed back, %d kept", moved, keep
        )


def live_hooks(
    serving: Serving, spawn: Callable[[Any], None]
) -> Callable[[TransferRequest], NodeHooks]:
    """The Control's transfer hook: live scaling for the transfers that ask for it."""

    def hooks(req: TransferRequest) -> NodeHooks:
        return LiveScaleUp(serving, req, spawn).hooks() if req.live else NodeHooks()

    return hooks
