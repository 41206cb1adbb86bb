"""The only module that talks to workers' control APIs (the data plane's front door).

The operator reads each worker's GET /v1/status to know what it holds and does, reads
a holder's block table (GET /v1/control/manifest) to plan from it, and POSTs the typed
orders the lifecycle decided (weights/orders.py). Answers are parsed into the shared
protocol's types. Short timeouts and no retries: a worker that does not answer (or
answers something that does not parse) is simply unknown this tick (`None`), and the
next tick asks again.
Orders are at-least-once, so a 409 ("already doing that") counts as delivered.
Every request but the status read carries the pod's deployment's peer token.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from cascade_api import constants as c
from cascade_operator.clients.http import get_typed, pod_url
from cascade_protocol.control import ManifestInfo
from cascade_protocol.peer_auth import TokensByHost
from cascade_protocol.status import STATUS_PATH, WorkerStatus

Body = dict[str, Any]


class Order(Protocol):
    @property
    def pod(self) -> str: ...
    @property
    def address(self) -> str: ...
    @property
    def path(self) -> str: ...
    def body(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Delivery:
    pod: str
    ok: bool  # accepted now, or the worker already does it (409)
    status: int  # HTTP status, 0 when the worker could not be reached
    detail: str = ""


class WorkerClient:
    def __init__(self, timeout_s: float = 1.0, order_timeout_s: float = 5.0) -> None:
        self.timeout_s = timeout_s
        self.order_timeout_s = order_timeout_s
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="worker-http")
        # What every request to a pod carries: its deployment's peer token (the controller
        # says, each reconcile, for the pods it sees).
        self._tokens = TokensByHost()

    def authorize(self, ips: Iterable[str | None], token: str) -> None:
        """Requests to these pod IPs carry `token` (their deployment's)."""
        self._tokens.authorize(ips, token)

    def _call(self, method: str, url: str, body: Body | None, timeout: float) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            url, data=data, method=method, headers=self._tokens.headers_for(url)
        )
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                return err.code, json.loads(raw or b"null")
            except ValueError:
                return err.code, raw.decode(errors="replace")

    def status(self, ip: str | None) -> WorkerStatus | None:
        """GET /v1/status, or None when the worker cannot be reached or answers badly."""
        if not ip:
            return None
        return get_typed(pod_url(ip, c.WORKER_PORT, STATUS_PATH), WorkerStatus, self.timeout_s)

    def statuses(self, ips: Sequence[str | None]) -> list[WorkerStatus | None]:
        """Every worker's status, asked in parallel (one slow worker costs one timeout)."""
        return list(self._pool.map(self.status, ips))

    def answering(self, ips: Sequence[str], timeout_s: float = 0.25) -> bool:
        """Whether any of these workers answers its status now (a cheap probe of pods
        whose control API was not up at the last reconcile)."""
        urls = [pod_url(ip, c.WORKER_PORT, STATUS_PATH) for ip in ips]
        found = self._pool.map(lambda u: get_typed(u, WorkerStatus, timeout_s), urls)
        return any(s is not None for s in found)

    def manifest(self, ip: str) -> ManifestInfo | None:
        """GET /v1/control/manifest of a holder: its digest and block table."""
        url = pod_url(ip, c.WORKER_PORT, "/v1/control/manifest")
        return get_typed(url, ManifestInfo, self.timeout_s, self._tokens.headers_for(url))

    def send(self, order: Order) -> Delivery:
        url = f"http://{order.address}{order.path}"
        try:
            code, doc = self._call("POST", url, order.body(), self.order_timeout_s)
        except (OSError, ValueError) as err:
            return Delivery(order.pod, False, 0, str(err))
        detail = json.dumps(doc)[:300] if not isinstance(doc, str) else doc[:300]
        return Delivery(order.pod, code < 300 or code == 409, code, detail)

    def send_all(self, orders: Sequence[Order]) -> list[Delivery]:
        return list(self._pool.map(self.send, orders))
