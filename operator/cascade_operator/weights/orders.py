"""Typed orders the operator sends to workers' control APIs, built from a decision.

The lifecycle decides (lifecycle.py), the I/O layer executes: it POSTs `order.body()`
to `http://{order.address}{order.path}`. Orders are at-least-once: a reconcile repeated
after a crash sends them again, so the I/O layer counts a 409 from a worker that
already does what it was told (its status shows the transfer running, the engine
starting) as delivered. Nothing here sends anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel

from cascade_api.scaleplan import ScalePlanSpec
from cascade_operator.weights.workers import WorkerView
from cascade_planner.topology import BYTES_PER_MBIT
from cascade_protocol.control import LoadRequest, ServeRequest, TransferRequest


def wire(body: BaseModel) -> dict[str, Any]:
    """A control body as the worker reads it: camelCase, defaults left out."""
    return body.model_dump(mode="json", by_alias=True, exclude_defaults=True)


@dataclass(frozen=True)
class TransferOrder:
    """POST /v1/control/transfer: take this pod's role (source or target) in a plan."""

    path: ClassVar[str] = "/v1/control/transfer"
    plan: str  # ScalePlan name, for logs and events
    pod: str
    address: str  # "ip:port" of the worker's control API
    spec: ScalePlanSpec
    # pod -> "ip:port" of every participant's data (UCX) listener: the worker connects to
    # its upstream and downstream peers by these, it never resolves pod names.
    peers: Mapping[str, str] = field(default_factory=dict)
    live: bool = False  # the deployment's spec.liveScaling.enabled
    cooperative: bool = False  # and its spec.liveScaling.cooperative
    send_mbit: int | None = None  # its spec.multicast.rateMbit

    def body(self) -> dict[str, Any]:
        pace = self.send_mbit * BYTES_PER_MBIT if self.send_mbit else None
        return wire(
            TransferRequest(
                plan=self.spec,
                peers=dict(self.peers),
                live=self.live,
                cooperative=self.live and self.cooperative,
                send_bytes_per_s=pace,
            )
        )


@dataclass(frozen=True)
class ServeOrder:
    """POST /v1/control/serve: start an engine on the complete model the pod holds."""

    path: ClassVar[str] = "/v1/control/serve"
    pod: str
    address: str
    max_batch: int | None = None  # the deployment's engine.maxBatchSize
    max_model_len: int | None = None  # engine.maxModelLen

    def body(self) -> dict[str, Any]:
        return wire(ServeRequest(max_batch=self.max_batch, max_model_len=self.max_model_len))


@dataclass(frozen=True)
class LoadOrder:
    """POST /v1/control/load: pack the checkpoint from storage (no copy exists anywhere)."""

    path: ClassVar[str] = "/v1/control/load"
    pod: str
    address: str

    def body(self) -> dict[str, Any]:
        return wire(LoadRequest())


def addressable(w: WorkerView | None) -> bool:
    return w is not None and w.alive and w.ip is not None and w.phase is not None


def transfer_orders(
    name: str,
    spec: ScalePlanSpec,
    workers: Mapping[str, WorkerView],
    *,
    live: bool = False,
    cooperative: bool = False,
    send_mbit: int | None = None,
) -> list[TransferOrder] | None:
    """One order per participant, sources first (the first source leads the start);
    None when a participant cannot be reached, so nothing is half-dispatched. `live`:
    the targets serve while the weights arrive (worker: serving/live.py); `send_mbit`:
    each participant's sending pace."""
    pods = [s.pod for s in spec.sources] + list(spec.targets)
    found = [workers.get(p) for p in pods]
    if not all(addressable(w) for w in found):
        return None
    ready = [w for w in found if w is not None]
    peers = {w.name: w.data_address() for w in ready}
    return [
        TransferOrder(name, w.name, w.control_address(), spec, peers, live, cooperative, send_mbit)
        for w in ready
    ]
