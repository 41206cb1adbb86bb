"""The small HTTP server every Cascade pod process runs: probes, metrics, graceful drain.

The worker and the gateway both answer the same three endpoints the operator's probes and
Prometheus rely on, so the behaviour lives here once and both import it:

- ``GET /healthz``: liveness. 200 "ok" as long as the event loop answers.
- ``GET /readyz``: readiness. 200 once the server has started, 503 from the moment a
  SIGTERM/SIGINT arrives. Kubernetes then takes the pod out of its Service endpoints
  while in-flight requests finish during the drain grace. A process may add readiness
  gates (the worker: "an engine serves"); each one that names a reason makes it 503.
- ``GET /metrics``: Prometheus text (or OpenMetrics when asked for it) from a registry
  owned by the app, so several apps can live in one test process.

``serve()`` is the only function here that touches sockets and signals; ``create_app()``
builds a plain aiohttp application that tests drive with aiohttp's test client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.web_log import AccessLogger
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.exposition import choose_encoder

from cascade_api.constants import HEALTH_PATH, READY_PATH
from cascade_protocol.load import LOAD_PATH
from cascade_protocol.status import STATUS_PATH

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
# Probes, scrapes and polls arrive every few seconds; logging them would drown real
# requests (the gateway polls every worker's load each second, the operator their
# status each tick). Failed ones are still logged.
QUIET_PATHS = frozenset({HEALTH_PATH, READY_PATH, METRICS_PATH, LOAD_PATH, STATUS_PATH})


@dataclass
class Health:
    """Probe state shared by the handlers and the serving loop."""

    # Set by the app's startup hook: the listener is up, requests can be taken.
    started: bool = False
    # Set on SIGTERM: stop taking new traffic, let in-flight requests finish.
    draining: bool = False
    # Extra conditions: each returns why the process is not ready, or None when it is.
    gates: list[Callable[[], str | None]] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return self.not_ready_reason() is None

    def not_ready_reason(self) -> str | None:
        if self.draining:
            return "draining"
        if not self.started:
            return "starting"
        for gate in self.gates:
            reason = gate()
            if reason is not None:
                return reason
        return None


HEALTH_KEY = web.AppKey("cascade_health", Health)
REGISTRY_KEY = web.AppKey("cascade_registry", CollectorRegistry)


def new_registry() -> CollectorRegistry:
    """A registry with the standard process metrics (process_start_time_seconds, ...)."""
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


class QuietAccessLogger(AccessLogger):
    """aiohttp's access log without the successful probe, scrape and poll lines."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        if request.path in QUIET_PATHS and response.status < 400:
            return
        super().log(request, response, time)


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _readyz(request: web.Request) -> web.Response:
    reason = request.app[HEALTH_KEY].not_ready_reason()
    if reason is None:
        return web.Response(text="ok")
    return web.Response(status=503, text=reason)


async def _metrics(request: web.Request) -> web.Response:
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    body = encoder(request.app[REGISTRY_KEY])
    return web.Response(body=body, headers={"Content-Type": content_type})


async def _mark_started(app: web.Application) -> None:
    app[HEALTH_KEY].started = True


def create_app(registry: CollectorRegistry, health: Health | None = None) -> web.Application:
    """An aiohttp app with the probe and metrics routes; callers add their own routes."""
    app = web.Application()
    app[HEALTH_KEY] = health if health is not None else Health()
    app[REGISTRY_KEY] = registry
    app.router.add_get(HEALTH_PATH, _healthz)
    app.router.add_get(READY_PATH, _readyz)
    app.router.add_get(METRICS_PATH, _metrics)
    app.on_startup.append(_mark_started)
    return app


def setup_logging(env: Mapping[str, str]) -> None:
    """One log format for every Cascade pod process; level from $CASCADE_LOG_LEVEL."""
    logging.basicConfig(
        level=env.get("CASCADE_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


async def serve(
    app: web.Application,
    host: str,
    port: int,
    *,
    drain_seconds: float,
    stop: asyncio.Event | None = None,
    started: asyncio.Future[int] | None = None,
) -> None:
    """Serve ``app`` until SIGTERM/SIGINT (or ``stop``), then drain and shut down.

    ``started`` (optional) receives the bound port, which matters when ``port`` is 0.
    """
    stop = stop if stop is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)

    runner = web.AppRunner(
        app,
        handle_signals=False,
        access_log_class=QuietAccessLogger,
        shutdown_timeout=drain_seconds + 1.0,
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = _bound_port(runner, port)
        log.info("listening on %s:%d", host, bound)
        if started is not None and not started.done():
            started.set_result(bound)
        await stop.wait()
        app[HEALTH_KEY].draining = True
        log.info("stop requested: readiness now 503, draining for %.1fs", drain_seconds)
        await asyncio.sleep(drain_seconds)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        await runner.cleanup()
        log.info("stopped")


def _bound_port(runner: web.AppRunner, requested: int) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return requested
