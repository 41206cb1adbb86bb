"""One node of a multicast transfer: server, control handshake, receive, report.

    node = MulticastNode(spec, "pod-a", store)      # store=None: get the manifest
                                                     # listener=: a port the process keeps
    address = await node.start()                     # listen (port 0 = any free port)
    result = await node.run(peers)                   # {pod: "host:port"} for every pod

`run` covers the node's whole life (coordinator.py describes the start and the end):
the leader waits for everyone, starts, and shuts everyone down once all reported;
the others say hello/ready, wait for `start`, receive their part (receive.py), report
`done`, then keep serving until `shutdown` (or, if the leader is gone, for `linger_s`).
`on_result` fires as soon as the node's own transfer ends, before the serving tail, so a
process can write its report without waiting for the slowest peer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cascade_api.scaleplan import PlanStrategy, ScalePlanSpec
from cascade_protocol.peer_auth import PeerKey
from cascade_worker.blocks.store import BlockStore
from cascade_worker.multicast.coordinator import Coordinator
from cascade_worker.multicast.fetch import Fetcher
from cascade_worker.multicast.follower import LeaderLink, prewarm
from cascade_worker.multicast.frames import CODEC, FrameT
from cascade_worker.multicast.order import StepOrder
from cascade_worker.multicast.progress import BlockProgress, Pacer
from cascade_worker.multicast.receive import Receiver
from cascade_worker.multicast.result import NodeResult, arrivals, completion
from cascade_worker.multicast.roles import Role, role_for
from cascade_worker.multicast.serve import BlockServer
from cascade_worker.transport.env import EAGER_MAX_BYTES
from cascade_worker.transport.pool import EndpointPool
from cascade_worker.transport.shared import SharedServer, own_or_lent

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeOptions:
    # Relay granularity of chains: a 7-hop chain at 200 Mbit/s fills in 7 x 0.5 MiB / 25 MB/s
    # = 0.15 s; smaller chunks cost more per-message overhead on 2 cores. At most the
    # transport's eager size over TCP (transport/env.py), or block boundaries idle again.
    chunk_bytes: int = EAGER_MAX_BYTES
    depth: int = 4  # chunk messages in flight per transfer
    stall_timeout_s: float = 30.0  # no progress from a peer for this long = peer is gone
    heartbeat_s: float = 3.0  # a receiver's `alive` to the leader until it reports done
    silence_s: float = 15.0  # the leader counts a receiver silent this long as gone
    ready_timeout_s: float = 60.0  # how long the leader waits for everyone to be ready
    deadline_s: float = 600.0  # a receiver stops and reports missing blocks after this
    linger_s: float = 10.0  # keep serving this long after finishing if the leader is gone
    max_attempts: int = 3  # checksum failures per (block, sender) before trying elsewhere
    rate_bytes_per_s: float | None = None  # cap on this node's sending rate
    corrupt_blocks: tuple[int, ...] = ()  # fault injection: send these once with a bad bit
    # Start a chain in common too (coordinator.py): `cascade bench multicast` measures
    # the transfer from one origin, every node's set-up before it, as gloo's rendezvous.
    common_start: bool = False
    # The deployment's peer token (cascade_protocol.peer_auth): proves this node to its
    # peers and refuses connections without it or from outside the plan. None: open.
    key: PeerKey | None = None


class MulticastNode:
    def __init__(
        self,
        spec: ScalePlanSpec,
        me: str,
        store: BlockStore | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        options: NodeOptions | None = None,
        on_result: Callable[[NodeResult], None] | None = None,
        on_layers_ready: Callable[[int, int], None] | None = None,
        listener: SharedServer[FrameT] | None = None,
    ) -> None:
        self.spec = spec
        self.role: Role = role_for(spec, me)
        self.me = me
        self.store = store
        self.options = options or NodeOptions()
        self.on_result = on_result
        self.on_layers_ready = on_layers_ready
        opts = self.options
        self.blocks = BlockServer(
            me,
            chunk_bytes=opts.chunk_bytes,
            depth=opts.depth,
            pacer=Pacer(opts.rate_bytes_per_s),
            corrupt={b: 1 for b in opts.corrupt_blocks},
            order=StepOrder(self.role.outgoing, opts.stall_timeout_s),
            key=opts.key,
            members=self.role.participants,
        )
        self.server = own_or_lent(listener, self.blocks.handle, CODEC, host, port, me)
        self.pool: EndpointPool[FrameT] = EndpointPool(CODEC)
        self.coordinator: Coordinator | None = None
        if self.role.leader == me:
            if store is None:
                raise ValueError("the leader is a source and needs its store")
            self.coordinator = Coordinator(
                me, self.role.participants, lambda: store, self.options.silence_s
            )
            self.blocks.control = self.coordinator.converse
        self.progress: BlockProgress  # set by _adopt once the store exists
        self._layer_events: list[tuple[float, int, int]] = []
        self._task: asyncio.Task[object] | None = None
        self._killed = False
        if store is not None:
            self._adopt(store)

    def _adopt(self, store: BlockStore) -> None:
        if self.spec.model_digest and store.manifest.digest != self.spec.model_digest:
            raise ValueError(
                f"{self.me}: store holds {store.manifest.digest}, "
                f"plan wants {self.spec.model_digest}"
            )
        self.store = store
        self.progress = BlockProgress(store)
        self.blocks.attach(self.progress)

        def layers(start: int, end: int) -> None:
            self._layer_events.append((time.monotonic(), start, end))
            if self.on_layers_ready is not None:
                self.on_layers_ready(start, end)

        store.on_layers_ready(layers)

    @property
    def first_byte_at(self) -> float | None:
        """Wall clock the first received bytes landed here (None: none yet, or a sender)."""
        progress = getattr(self, "progress", None)
        return progress.first_byte_at if progress is not None else None

    async def start(self) -> str:
        await self.server.start()
        return self.server.address

    async def run(self, peers: Mapping[str, str]) -> NodeResult:
        self._task = asyncio.current_task()
        await self.start()
        try:
            if self.coordinator is not None:
                result = await self._lead(self.coordinator)
            else:
                result = await self._follow(peers)
        except Exception:
            if self._killed:
                raise asyncio.CancelledError from None
            raise
        finally:
            await self.close()
        if self._killed:  # a kill that raced an I/O error must still read as a kill
            raise asyncio.CancelledError
        result.bytes_sent = self.blocks.bytes_sent
        log.info("%s: bytes by receiver %s", self.me, self.blocks.sent_to)
        return result

    async def _lead(self, coord: Coordinator) -> NodeResult:
        opts = self.options
        began = time.monotonic()
        # coordinator.py says why a chain need not start in common
        rolling = self.role.strategy == PlanStrategy.CHAIN and not opts.common_start
        t0 = await coord.start_when_ready(opts.ready_timeout_s, rolling)
        if rolling:
            log.info("%s: started, leading (peers start as each is ready)", self.me)
        else:
            log.info("%s: started, leading (every peer ready after %.3f s)", self.me, t0 - began)
        result = self._result(t0, time.time())
        self._emit(result)
        await coord.finish_when_done(opts.deadline_s + opts.ready_timeout_s)
        return result

    async def _follow(self, peers: Mapping[str, str]) -> NodeResult:
        opts, role = self.options, self.role
        link = LeaderLink(
            self.pool,
            peers[role.leader],
            self.me,
            opts.ready_timeout_s,
            opts.heartbeat_s,
            key=opts.key,
        )
        began = time.monotonic()
        sent = await link.hello(self.store.manifest.digest if self.store else None)
        said = time.monotonic()
        if sent is not None:
            store = BlockStore(sent.manifest)
            store.materialized = list(sent.materialized)
            self._adopt(store)
        await prewarm(self.pool, [peers[p] for p in role.contacts if p in peers], 5.0)
        fetcher = Fetcher(
            self.me,
            self.progress,
            self.pool,
            peers,
            depth=opts.depth,
            stall_timeout_s=opts.stall_timeout_s,
            key=opts.key,
        )
        await fetcher.attach_all(role.contacts)
        warmed = time.monotonic()
        since = await link.ready()
        t0, wall = time.monotonic(), time.time()
        log.info(
            "%s: started (leader's hello %.3f s, store and data connections %.3f s, "
            "ready to start %.3f s, %.3f s after the leader)",
            self.me, said - began, warmed - said, t0 - warmed, since,
        )  # fmt: skip
        receiver = None
        if not role.is_source:
            receiver = Receiver(
                role, fetcher, max_attempts=opts.max_attempts, deadline=t0 + opts.deadline_s
            )
            await receiver.run()
            log.info("%s: blocks by sender %s", self.me, fetcher.served_by)
            if not self.progress.store.complete():
                self.progress.abandon()
            # Our senders must not keep a turn for us in their step order.
            await self.pool.close("data")
        result = self._result(t0, wall, receiver)
        self._emit(result)
        await link.done(result, opts.deadline_s + opts.ready_timeout_s, opts.linger_s)
        return result

    def _result(self, t0: float, wall: float, receiver: Receiver | None = None) -> NodeResult:
        assert self.store is not None
        got = arrivals(self.store.installed_at, t0) if receiver is not None else {}
        missing = self.store.missing()
        return NodeResult(
            node=self.me,
            role="source" if self.role.is_source else "target",
            tier=self.role.tier,
            strategy=str(self.role.strategy),
            start_wall=wall,
            block_arrivals=got,
            complete_s=completion(got, missing),
            missing=missing,
            bytes_received=receiver.fetcher.bytes_received if receiver else 0,
            bytes_sent=self.blocks.bytes_sent,
            refetched=sorted(set(receiver.fetcher.refetched)) if receiver else [],
            abandoned_peers=list(receiver.state.dead) if receiver else [],
            layers_ready=[(round(t - t0, 6), s, e) for t, s, e in self._layer_events if t >= t0],
        )

    def _emit(self, result: NodeResult) -> None:
        if self.on_result is not None:
            self.on_result(result)

    async def close(self) -> None:
        await self.pool.close()
        await self.server.close()

    async def kill(self) -> None:
        """Stop abruptly, as if the process died (tests): connections drop, tasks end."""
        self._killed = True
        task = self._task if self._task is not asyncio.current_task() else None
        if task is not None:
            task.cancel()
            await asyncio.sleep(0)
        self.pool.abort_all()
        await self.server.close()
        # Python 3.11's wait_for can swallow a cancellation that races an I/O error.
        while task is not None and not task.done():
            task.cancel()
            await asyncio.sleep(0.01)
