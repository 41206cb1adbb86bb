"""The worker's door: HTTP requests and UCX connections from peers without the
deployment's token are refused before any work, and counted.

HTTP: every route but the probes, the metrics scrape and the read-only status needs
`Authorization: Bearer <token>`: the control API (`/v1/control/*`) the peer token (the
operator's orders, a worker's fetch); generate and load the peer token or the generate
token (the gateway's, which can do no more). 401 without credentials, 403 with wrong
ones; the body names which.
UCX: the transports check the `PeerProof` their opening frame carries
(multicast/serve.py, pipeline/server.py) and count refusals here too.

A worker started without $CASCADE_PEER_TOKEN (library use, unit tests, a worker run by
hand) is open and says so once in its log; the operator always sets it.
"""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from prometheus_client import CollectorRegistry

from cascade_api.constants import HEALTH_PATH, READY_PATH
from cascade_protocol.peer_auth import AUTH_HEADER, PeerKey
from cascade_protocol.service import METRICS_PATH
from cascade_protocol.status import STATUS_PATH
from cascade_worker.access.refusals import HTTP, REFUSED

log = logging.getLogger(__name__)

# Open to anyone: the kubelet's probes, Prometheus, and a status that holds no secret.
OPEN_PATHS = frozenset({HEALTH_PATH, READY_PATH, METRICS_PATH, STATUS_PATH})


def register_auth_metrics(registry: CollectorRegistry) -> None:
    registry.register(REFUSED)


CONTROL_PREFIX = "/v1/control/"


def peer_auth_middleware(key: PeerKey, generate: PeerKey | None = None) -> Middleware:
    """Refuse requests to any non-open path that lack the deployment's bearer token; the
    generate token opens everything but the control API."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path in OPEN_PATHS:
            return await handler(request)
        header = request.headers.get(AUTH_HEADER)
        if header is None:
            REFUSED.add(HTTP, "no_credentials")
            return web.json_response(
                {"error": f"{request.path} needs the deployment's credentials "
                 f"({AUTH_HEADER}: Bearer ...)"},
                status=401,
                headers={"WWW-Authenticate": "Bearer"},
            )  # fmt: skip
        control = request.path.startswith(CONTROL_PREFIX)
        as_gateway = generate is not None and not control and generate.header_ok(header)
        if not key.header_ok(header) and not as_gateway:
            REFUSED.add(HTTP, "wrong_credentials")
            return web.json_response(
                {"error": f"{request.path}: wrong credentials for this deployment"}, status=403
            )
        return await handler(request)

    return middleware


def guard(app: web.Application, key: PeerKey | None, generate: PeerKey | None = None) -> None:
    """Put the door on a worker app (before it starts); without a key, log that it is open."""
    if key is None:
        log.warning(
            "no peer token ($CASCADE_PEER_TOKEN): this worker's control API, generate and "
            "UCX ports accept anyone (fine for tests and local runs, never in a cluster)"
        )
        return
    app.middlewares.append(peer_auth_middleware(key, generate))
