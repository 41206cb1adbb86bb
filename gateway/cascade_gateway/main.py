"""`cascade-gateway`: the OpenAI-compatible front of one ModelDeployment.

A request's path through the gateway::

    POST /v1/{chat/,}completions
      -> api_request: validate, 400/404 naming the field      (pure)
      -> scheduler:   class queue, 429 when full; held while  (policy.py, pure)
                      no backend is ready, up to the deadline
      -> router:      own role, then mixed, least loaded       (router.py, pure)
      -> dispatch:    stream from the worker, retry elsewhere before the first token
      -> handlers:    OpenAI JSON or SSE (api_response.py, pure)

Backends are worker URLs (static flags, or the deployment's worker pods when
``CASCADE_DISCOVERY=kubernetes``); each one's ``/v1/load`` report is polled about once
a second (backends.py); a backend that makes no progress on its streams for the stall
bound has them moved to others (stalls.py). Endpoints (port $CASCADE_GATEWAY_PORT,
default 8000, bound to $POD_IP when set): ``POST /v1/completions``,
``POST /v1/chat/completions`` (stream and non-stream), ``GET /v1/models``,
``GET /v1/load`` (the gateway's aggregate load report for the autoscaler,
:class:`cascade_protocol.gateway_load.GatewayLoad`), and from
:mod:`cascade_protocol.service` ``/healthz``, ``/readyz`` (200 while not draining, with
or without backends: requests are held until one is ready) and ``/metrics``.
On SIGTERM new requests get 503 while accepted ones finish within the drain grace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
from aiohttp import web

from cascade_gateway import upstream
from cascade_gateway.backends import BackendPool, poll_loop, stall_loop
from cascade_gateway.config import DISCOVERY_KUBERNETES, GatewayConfig, load_config
from cascade_gateway.demand import DemandTracker
from cascade_gateway.handlers import GATEWAY_KEY, chat_completions, completions
from cascade_gateway.loadreport import class_load
from cascade_gateway.metrics import register_metrics
from cascade_gateway.router import ready_count, routable
from cascade_gateway.runtime import Gateway
from cascade_gateway.scheduler import Scheduler
from cascade_protocol.gateway_load import GATEWAY_LOAD_PATH, BackendLoad, GatewayLoad
from cascade_protocol.generate import RequestClass
from cascade_protocol.peer_auth import bearer_headers
from cascade_protocol.service import Health, create_app, new_registry, serve, setup_logging

log = logging.getLogger("cascade_gateway")

OWNED_BY = "cascade"


def models_body(model_names: Sequence[str], created: int) -> dict[str, Any]:
    """OpenAI ``GET /v1/models`` list: the model(s) this gateway serves, if named."""
    data = [
        {"id": name, "object": "model", "created": created, "owned_by": OWNED_BY}
        for name in model_names
    ]
    return {"object": "list", "data": data}


def load_body(gw: Gateway) -> GatewayLoad:
    now = gw.pool.clock()
    metrics = gw.metrics
    classes = {
        cls.value: class_load(
            gw.scheduler.depth(cls),
            gw.scheduler.in_flight(cls),
            gw.scheduler.limits[cls],
            metrics.recent_ttft[cls].values(now),
            metrics.recent_wait[cls].values(now),
        )
        for cls in RequestClass
    }
    backends = [
        BackendLoad(
            url=s.url,
            pod=s.pod,
            role=s.role,
            ready=routable(s.view(), now),
            draining=bool(s.report and s.report.draining),
            in_flight=s.in_flight,
            interactive_in_flight=s.interactive_in_flight,
            running=s.report.running if s.report else 0,
            waiting=s.report.waiting if s.report else 0,
            max_batch=s.report.max_batch if s.report else 0,
            batch_room=s.report.batch_room if s.report else 0,
            kv_cache_usage=s.report.kv_cache_usage if s.report else 0.0,
            tokens_per_s=s.report.tokens_per_s if s.report else 0.0,
            error=s.error,
        )
        for s in gw.pool.states()
    ]
    return GatewayLoad(
        model=gw.config.model_name,
        deployment=gw.config.deployment,
        draining=gw.health.draining,
        backends_total=len(backends),
        backends_ready=sum(b.ready for b in backends),
        tokens_per_s=sum(b.tokens_per_s for b in backends),
        classes=classes,
        backends=backends,
        demand=gw.demand.report(now, gw.scheduler.held(), gw.scheduler.queued(RequestClass.BATCH)),
    )


async def _models(request: web.Request) -> web.Response:
    gw = request.app[GATEWAY_KEY]
    names = [gw.config.model_name] if gw.config.model_name else sorted(gw.models())
    gw.metrics.requests.labels("/v1/models", "200", "-").inc()
    return web.json_response(models_body(names, gw.created))


async def _load(request: web.Request) -> web.Response:
    return web.json_response(load_body(request.app[GATEWAY_KEY]).model_dump(mode="json"))


async def _background(app: web.Application) -> AsyncIterator[None]:
    """The backend HTTP session, the load poller and (optionally) pod discovery."""
    gw = app[GATEWAY_KEY]
    config = gw.config
    # One connection per in-flight stream; each fails when its backend vanishes.
    connector = aiohttp.TCPConnector(limit=0, socket_factory=upstream.connect_socket)
    gw.session = aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None, connect=5.0),
        read_bufsize=1 << 20,
        headers=bearer_headers(config.peer_token or None),  # workers want the deployment's
    )
    tasks = [asyncio.create_task(poll_loop(gw.pool, gw.session, config.poll_seconds))]
    if config.stall_seconds > 0:
        stalls = gw.metrics.backend_stalls
        tasks.append(
            asyncio.create_task(stall_loop(gw.pool, config.stall_seconds, lambda _: stalls.inc()))
        )
    if config.discovery == DISCOVERY_KUBERNETES:
        from cascade_gateway.kube import discovery_loop

        tasks.append(
            asyncio.create_task(
                discovery_loop(
                    gw.pool, config.namespace, config.deployment, config.discovery_seconds
                )
            )
        )
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        gw.scheduler.close()
        await gw.session.close()


def build_app(config: GatewayConfig, *, created: int | None = None) -> web.Application:
    registry = new_registry()
    metrics = register_metrics(registry, config)
    pool = BackendPool(config.backends)
    limits = {
        RequestClass.INTERACTIVE: config.interactive_queue,
        RequestClass.BATCH: config.batch_queue,
    }
    scheduler = Scheduler(pool, limits, config.backend_slack, config.queue_order)
    health = Health()
    gw = Gateway(
        config=config,
        pool=pool,
        scheduler=scheduler,
        metrics=metrics,
        health=health,
        created=int(time.time()) if created is None else created,
        demand=DemandTracker(started=pool.clock()),
    )
    metrics.bind(
        scheduler.depth, scheduler.in_flight, lambda: ready_count(pool.views(), pool.clock())
    )
    app = create_app(registry, health)
    app[GATEWAY_KEY] = gw
    app.router.add_get("/v1/models", _models)
    app.router.add_get(GATEWAY_LOAD_PATH, _load)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.cleanup_ctx.append(_background)
    return app


def main(argv: Sequence[str] | None = None) -> int:
    setup_logging(os.environ)
    config = load_config(sys.argv[1:] if argv is None else argv, os.environ)
    log.info(
        "cascade-gateway deployment=%s model=%s backends=%s discovery=%s",
        config.deployment or "-",
        config.model_name or "-",
        ",".join(config.backends) or "-",
        config.discovery,
    )
    asyncio.run(
        serve(build_app(config), config.host, config.port, drain_seconds=config.drain_seconds)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
