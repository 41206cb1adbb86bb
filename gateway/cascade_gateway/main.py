"""`cascade-gateway`: the OpenAI-compatible front of one ModelDeployment.

In this release the gateway lists its model and answers the probes, so clients,
Services and the operator's readiness checks see the final API surface early. Request
routing (per-class queues, instances and execute-while-load pipelines, load reports to
the autoscaler) comes in a later issue: until then ``POST /v1/completions`` and
``POST /v1/chat/completions`` answer 503 with an OpenAI-style error body, which OpenAI
clients surface as a retryable "service unavailable".

Endpoints (port $CASCADE_GATEWAY_PORT, default 8000, bound to $POD_IP when set):
``/healthz``, ``/readyz``, ``/metrics`` (shared with the worker, see
:mod:`cascade_worker.health`), ``GET /v1/models``, and the two POST routes above.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, Info

from cascade_gateway.config import GatewayConfig, load_config
from cascade_worker.health import create_app, new_registry, serve, setup_logging

log = logging.getLogger("cascade_gateway")

OWNED_BY = "cascade"
UNAVAILABLE_MESSAGE = (
    "inference engine not available yet: this Cascade release does not route requests to workers"
)

CONFIG_KEY = web.AppKey("cascade_gateway_config", GatewayConfig)
CREATED_KEY = web.AppKey("cascade_gateway_created", int)
REQUESTS_KEY = web.AppKey("cascade_gateway_requests", Counter)


def register_metrics(registry: CollectorRegistry, config: GatewayConfig) -> Counter:
    """The gateway's own series; returns the request counter the handlers bump."""
    info = Info(
        "cascade_gateway", "Which model and deployment this gateway serves.", registry=registry
    )
    info.info({"model": config.model_name, "deployment": config.deployment})
    up = Gauge("cascade_gateway_up", "1 while the gateway process is serving.", registry=registry)
    up.set(1)
    return Counter(
        "cascade_gateway_requests",
        "OpenAI API requests by endpoint and HTTP status code.",
        ["endpoint", "code"],
        registry=registry,
    )


def models_body(model_name: str, created: int) -> dict[str, Any]:
    """OpenAI ``GET /v1/models`` list: the one model this gateway serves, if named."""
    data = (
        [{"id": model_name, "object": "model", "created": created, "owned_by": OWNED_BY}]
        if model_name
        else []
    )
    return {"object": "list", "data": data}


def unavailable_body() -> dict[str, Any]:
    """OpenAI-style error for requests the gateway cannot serve yet."""
    return {
        "error": {
            "message": UNAVAILABLE_MESSAGE,
            "type": "service_unavailable",
            "param": None,
            "code": "engine_unavailable",
        }
    }


async def _models(request: web.Request) -> web.Response:
    config = request.app[CONFIG_KEY]
    request.app[REQUESTS_KEY].labels(endpoint="/v1/models", code="200").inc()
    return web.json_response(models_body(config.model_name, request.app[CREATED_KEY]))


async def _unavailable(request: web.Request) -> web.Response:
    request.app[REQUESTS_KEY].labels(endpoint=request.path, code="503").inc()
    return web.json_response(unavailable_body(), status=503)


def build_app(config: GatewayConfig, *, created: int | None = None) -> web.Application:
    registry = new_registry()
    requests = register_metrics(registry, config)
    app = create_app(registry)
    app[CONFIG_KEY] = config
    app[CREATED_KEY] = int(time.time()) if created is None else created
    app[REQUESTS_KEY] = requests
    app.router.add_get("/v1/models", _models)
    app.router.add_post("/v1/completions", _unavailable)
    app.router.add_post("/v1/chat/completions", _unavailable)
    return app


def main(argv: Sequence[str] | None = None) -> int:
    setup_logging(os.environ)
    config = load_config(sys.argv[1:] if argv is None else argv, os.environ)
    log.info(
        "cascade-gateway deployment=%s model=%s", config.deployment or "-", config.model_name or "-"
    )
    asyncio.run(
        serve(build_app(config), config.host, config.port, drain_seconds=config.drain_seconds)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
