"""The worker's control API on its app: the weight-moving routes, their metrics and jobs.

    POST /v1/control/load      {"modelPath"?, "blocks"?}     -> 202, packs in a thread
    POST /v1/control/transfer  {"plan": ScalePlanSpec, "peers": {pod: "host:port"}} -> 202
    POST /v1/control/fetch     {"peer": "IP[:PORT]", "blocks"?} -> 202 (fetch.py)
    GET  /v1/control/manifest  -> what this worker holds, to plan a transfer from it
    POST /v1/control/serve, /v1/control/drain -> 202 (serving/lifecycle_routes.py)

The jobs live in jobs.py, the fetch (which asks a peer first) in fetch.py;
this module only mounts them, so neither of those needs the other's routes. Bodies are
the shared protocol's (cascade_protocol.control); refusals are JSON `{"error": ...}`:
400 for a malformed request, 409 for one that conflicts with what the worker holds or
is doing.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge

from cascade_worker.control.fetch import fetch
from cascade_worker.control.jobs import CONTROL_KEY, Control, json_errors, manifest, transfer
from cascade_worker.control.load import load


def register_control_metrics(ctl: Control, registry: CollectorRegistry) -> None:
    loaded = Gauge(
        "cascade_worker_blocks_loaded", "Model blocks this worker holds.", registry=registry
    )
    loaded.set_function(lambda: ctl.state.blocks_loaded)
    registry.register(ctl.startup.histogram)
    held = Gauge(
        "cascade_worker_store_bytes",
        "Bytes of model blocks held, by memory tier: host (a host copy's host memory) or "
        "device (an instance's store, which its engine's weights are views of).",
        ["tier"],
        registry=registry,
    )
    tier = "host" if ctl.config.host_copy else "device"
    held.labels(tier=tier).set_function(lambda: ctl.state.store_bytes)
    ctl.received = Counter(
        "cascade_worker_bytes_received",
        "Weight bytes received from peers by finished transfers.",
        registry=registry,
    )


async def _stop_jobs(app: web.Application) -> None:
    ctl = app[CONTROL_KEY]
    for task in list(ctl.tasks):
        task.cancel()
    await asyncio.gather(*ctl.tasks, return_exceptions=True)


def add_control(app: web.Application, ctl: Control, registry: CollectorRegistry) -> None:
    """Mount the control routes and metrics on a worker app."""
    app[CONTROL_KEY] = ctl
    register_control_metrics(ctl, registry)
    app.router.add_post("/v1/control/load", json_errors(load))
    app.router.add_post("/v1/control/transfer", json_errors(transfer))
    app.router.add_post("/v1/control/fetch", json_errors(fetch))
    app.router.add_get("/v1/control/manifest", json_errors(manifest))
    app.on_cleanup.append(_stop_jobs)
