"""The worker's control jobs: load a checkpoint, take part in a transfer, show the manifest.

Jobs run in the background, one at a time (state.py); progress and the last
outcome show in GET /v1/status. A transfer runs a MulticastNode on the data port: the
plan says whether this pod sends (it must hold the model the plan names) or receives
(it starts from an empty store and gets the manifest from the plan's leader). The
bodies are the shared protocol's (cascade_protocol.control); refusals are
RequestErrors (errors.py), answered as JSON by `json_errors`. The routes are
mounted by routes.py. torch and ucxx load on first use, not at start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import Counter

from cascade_api.scaleplan import SourceTier
from cascade_protocol.control import Accepted, ManifestInfo, TransferRequest
from cascade_protocol.peer_auth import PeerKey
from cascade_protocol.status import TransferReport, TransferRole, WeightsFrom, WorkerPhase
from cascade_worker.config import WorkerConfig
from cascade_worker.control.artifacts import offer_stored
from cascade_worker.control.errors import RequestError, parse_body
from cascade_worker.control.state import WorkerState
from cascade_worker.timeline import Startup

if TYPE_CHECKING:
    from cascade_worker.blocks.store import BlockStore
    from cascade_worker.multicast.result import NodeResult
    from cascade_worker.multicast.runner import MulticastNode, NodeOptions
    from cascade_worker.transport.shared import SharedServer

log = logging.getLogger(__name__)


@dataclass
class NodeHooks:
    """What a transfer's node tells the layer above (serving, for live scaling): the
    layer ranges that became runnable, and the node's own result, as they happen."""

    on_layers_ready: Callable[[int, int], None] | None = None
    on_result: Callable[[NodeResult], None] | None = None
    on_end: Callable[[], None] | None = None  # the transfer job is over (any outcome)


@dataclass
class Control:
    config: WorkerConfig
    options: NodeOptions | None = None  # multicast tuning; None = the executor's defaults
    state: WorkerState = field(default_factory=WorkerState)
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    received: Counter | None = None
    # Set by the serving layer: the hooks a transfer's node gets (live scaling); the
    # control layer itself knows nothing of serving.
    transfer_hooks: Callable[[TransferRequest], NodeHooks] | None = None
    startup: Startup = field(default_factory=Startup)  # registered by add_control
    data_port: SharedServer[Any] | None = None  # bound by the first transfer, kept

    def data_listener(self) -> SharedServer[Any]:
        """The data port every transfer of this worker borrows (transport/shared.py)."""
        if self.data_port is None:
            from cascade_protocol.peer_auth import MULTICAST
            from cascade_worker.access.refusals import count
            from cascade_worker.multicast.frames import CODEC
            from cascade_worker.transport.shared import SharedServer

            config = self.config
            self.data_port = SharedServer(
                CODEC, config.host, config.data_port, name="data",
                on_refused=lambda why: count(MULTICAST, why),
            )  # fmt: skip
        return self.data_port

    def spawn(self, job: Awaitable[Any]) -> None:
        """Run `job` in the background, held until done; a failure is logged, not lost."""
        task: asyncio.Task[Any] = asyncio.ensure_future(job)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background job failed", exc_info=task.exception())


CONTROL_KEY = web.AppKey("cascade_worker_control", Control)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def json_errors(handler: Callable[[Control, web.Request], Awaitable[Any]]) -> Handler:
    """Run a handler; its pydantic result is the 202 body, a RequestError the refusal."""

    async def wrapped(request: web.Request) -> web.StreamResponse:
        ctl = request.app[CONTROL_KEY]
        try:
            body = await handler(ctl, request)
        except RequestError as exc:
            log.warning("%s %s refused (%d): %s", request.method, request.path, exc.status, exc)
            return web.json_response({"error": exc.message}, status=exc.status)
        status = 200 if isinstance(body, ManifestInfo) else 202
        return web.json_response(body.model_dump(mode="json", by_alias=True), status=status)

    return wrapped


async def transfer(ctl: Control, request: web.Request) -> Accepted:
    req = parse_body(TransferRequest, await request.read())
    return await start_transfer(ctl, req)


async def start_transfer(ctl: Control, req: TransferRequest, *, claimed: bool = False) -> Accepted:
    """Validate and claim the job slot, answer at once; the node runs in the background.

    The job imports the transfer path (torch, ucxx) off the event loop: cold, on a
    CPU-limited node, that takes longer than the operator waits for an order's reply,
    and the loop must keep answering status and probes meanwhile. Peers wait for every
    participant to listen (the leader for `ready_timeout_s`), so accepting before the
    data port is open is safe; a node that cannot start (the data port is taken) fails
    its transfer, which the status reports like any other failed transfer.
    `claimed`: the caller (fetch) already holds the job slot; it is released on refusal.
    """
    from cascade_worker.multicast.roles import role_for  # pure: no torch, no ucxx

    state, me = ctl.state, ctl.config.pod_name
    try:
        try:
            role = role_for(req.plan, me)
        except ValueError as exc:
            raise RequestError(400, f"plan: {exc}") from exc
        unknown = [p for p in role.participants if p not in req.peers]
        if unknown:
            raise RequestError(400, f"peers: no address for {', '.join(unknown)}")
        pin = ctl.config.model_digest_pin
        if pin and req.plan.model_digest != pin:
            raise RequestError(
                409, f"plan: model {req.plan.model_digest} is not spec.model.digest {pin}"
            )
        store = None
        if role.is_source:
            store = state.held_model()
            if req.plan.model_digest and store.manifest.digest != req.plan.model_digest:
                raise RequestError(
                    409,
                    f"plan wants model {req.plan.model_digest}, "
                    f"this worker holds {store.manifest.digest}",
                )
        if not claimed:
            state.claim(WorkerPhase.TRANSFERRING, keeps_store=role.is_source)
            claimed = True
        if not role.is_source:
            state.last_first_byte = None  # this transfer's first byte is still to come
    except RequestError:
        if claimed:
            state.unclaim()
        raise
    ctl.spawn(_run_transfer(ctl, req, store))
    kind = "source" if role.is_source else "target"
    return Accepted(
        action="transfer", role=kind, model_digest=req.plan.model_digest, peers=req.peers
    )


def node_options(
    options: NodeOptions | None, send_bytes_per_s: float | None, key: PeerKey | None
) -> NodeOptions:
    """The node's options with the order's sending pace (spec.multicast.rateMbit) and the
    deployment's peer token."""
    from cascade_worker.multicast.runner import NodeOptions

    opts = options or NodeOptions()
    if send_bytes_per_s is not None:
        opts = replace(opts, rate_bytes_per_s=send_bytes_per_s)
    return opts if key is None else replace(opts, key=key)


def import_transfer_path() -> type[MulticastNode]:
    """The multicast node class, with ucxx imported too (blocking: seconds when cold).
    The worker warms both at start (main.preload); a transfer job calls this on a thread."""
    from cascade_worker.multicast.runner import MulticastNode
    from cascade_worker.transport.env import ucx

    ucx()
    return MulticastNode


async def _run_transfer(ctl: Control, req: TransferRequest, store: BlockStore | None) -> None:
    """One transfer job: the node (a source when `store` is given) from start to report."""
    state, me = ctl.state, ctl.config.pod_name
    role = TransferRole.SOURCE if store is not None else TransferRole.TARGET
    node: MulticastNode | None = None
    error: str | None = None
    hooks = ctl.transfer_hooks(req) if ctl.transfer_hooks is not None else NodeHooks()
    try:
        node_class = await asyncio.to_thread(import_transfer_path)
        if store is not None and ctl.config.materialization and ctl.config.model_path:
            await asyncio.to_thread(offer_stored, store, ctl.config.model_path)
        node = node_class(
            req.plan, me, store, listener=ctl.data_listener(),
            options=node_options(ctl.options, req.send_bytes_per_s, ctl.config.peer_key),
            on_result=hooks.on_result, on_layers_ready=hooks.on_layers_ready,
        )  # fmt: skip
        state.node = node
        result = await node.run(dict(req.peers))
        report = TransferReport(
            role=role,
            complete=not result.missing,
            missing=result.missing,
            bytes_received=result.bytes_received,
            bytes_sent=result.bytes_sent,
            complete_s=result.complete_s,
            error=result.error,
        )
    except Exception as exc:  # reported in status; the worker keeps serving
        log.exception("transfer failed")
        held = node.store if node is not None else store
        missing = held.missing() if held is not None else [b.index for b in req.plan.blocks]
        report = TransferReport(role=role, complete=False, missing=missing, error=str(exc))
    if node is not None and node.store is not None:
        state.store = node.store
    if node is not None and role == TransferRole.TARGET:
        state.last_first_byte = node.first_byte_at
    if role == TransferRole.TARGET and report.complete_s is not None:
        ctl.startup.weights(weights_from(req), report.bytes_received, report.complete_s)
    if not report.complete:
        error = report.error or f"transfer incomplete: missing blocks {report.missing}"
    state.last_transfer = report
    state.bytes_received_total += report.bytes_received
    if ctl.received is not None:
        ctl.received.inc(report.bytes_received)
    state.release(error)
    log.info("transfer ended (%s): %s", role, report.model_dump_json())
    if hooks.on_end is not None:
        hooks.on_end()


def weights_from(req: TransferRequest) -> WeightsFrom:
    """Host when every source of the plan is a host copy, else peer (instances)."""
    hosts = all(s.tier == SourceTier.HOST for s in req.plan.sources)
    return WeightsFrom.HOST if req.plan.sources and hosts else WeightsFrom.PEER


async def manifest(ctl: Control, request: web.Request) -> ManifestInfo:
    from cascade_worker.multicast.local import plan_blocks

    store = ctl.state.held_model()
    return ManifestInfo(
        pod=ctl.config.pod_name,
        data_port=ctl.config.data_port,
        model_digest=store.manifest.digest,
        blocks=plan_blocks(store.manifest),
    )
