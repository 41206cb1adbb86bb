"""Serving on the worker app: control routes, readiness gate, start-up and shutdown hooks.

    POST /v1/control/serve  {"maxBatch"?, "maxModelLen"?, "layers"?: [start, end],
                             "stages"?: ["ip:port", ...]} -> 202
    POST /v1/control/drain  {"timeoutS"?} -> 202

Like the other control routes (../control/routes.py) they answer at once and work in the
background; GET /v1/status shows `engine` (off, starting, serving, draining, failed).
Serve needs the whole model held (409 otherwise) and the whole layer range: a valid
partial range is 409, a malformed one 400; unless `stages` name the pipeline stages
that run the rest, which makes this worker a pipeline head (pipeline_routes.py, with
/v1/control/stage and /v1/control/local). Drain stops an engine or a stage server.

At start-up with --serve-on-start the worker loads $CASCADE_MODEL_PATH and serves it.
On SIGTERM, cascade_protocol.service.serve() turns readiness 503 and waits the grace;
the shutdown hook then drains the engine (bounded by --request-drain-seconds) before
the listener closes.
"""

from __future__ import annotations

import logging

from aiohttp import web
from prometheus_client import CollectorRegistry

from cascade_protocol.control import Accepted, DrainRequest, LoadRequest, ServeRequest
from cascade_protocol.service import HEALTH_KEY
from cascade_protocol.status import EnginePhase
from cascade_worker.control.errors import RequestError, parse_body
from cascade_worker.control.jobs import CONTROL_KEY, Control, json_errors
from cascade_worker.control.load import claim_load, run_load
from cascade_worker.serving.api import SERVING_KEY, add_inference_routes
from cascade_worker.serving.factory import EngineFactory, default_engine_factory
from cascade_worker.serving.live import live_hooks
from cascade_worker.serving.metrics import ServingMetrics
from cascade_worker.serving.pipeline_routes import add_pipeline_routes, serve_head
from cascade_worker.serving.service import Serving

log = logging.getLogger(__name__)


def check_layers(layers: tuple[int, int] | None, num_layers: int) -> None:
    if layers is None or layers == (0, num_layers):
        return
    start, end = layers
    if not 0 <= start < end <= num_layers:
        raise RequestError(400, f"layers: {list(layers)} is not a range within [0, {num_layers}]")
    raise RequestError(
        409,
        f"layers: {list(layers)} is a stage; without `stages` a worker runs whole models "
        f"(give [0, {num_layers}] or nothing)",
    )


async def _serve(ctl: Control, request: web.Request) -> Accepted:
    req = parse_body(ServeRequest, await request.read())
    serving = request.app[SERVING_KEY]
    if req.stages:
        return await serve_head(ctl, serving, req)
    check_layers(req.layers, ctl.state.held_model().manifest.num_layers)
    store = serving.claim()
    ctl.spawn(serving.start(store, serving.options(req.max_batch, req.max_model_len)))
    return Accepted(action="serve", model_digest=store.manifest.digest)


async def _drain(ctl: Control, request: web.Request) -> Accepted:
    req = parse_body(DrainRequest, await request.read())
    serving = request.app[SERVING_KEY]
    if serving.phase == EnginePhase.DRAINING:
        return Accepted(action="drain")
    if serving.stage is not None:
        if serving.stage.server is None:
            raise RequestError(409, "the pipeline stage is starting; drain it once it listens")
        ctl.spawn(serving.drain(req.timeout_s))
        return Accepted(action="drain", role="stage")
    if serving.engine is None:  # a failed engine is drained too, to free the store
        raise RequestError(409, f"not serving (engine {serving.phase})")
    ctl.spawn(serving.drain(req.timeout_s))
    return Accepted(action="drain")


async def serve_on_start(ctl: Control, serving: Serving) -> None:
    """Load the local checkpoint, then serve it; failures show in status."""
    try:
        path, blocks = claim_load(ctl, LoadRequest())
    except RequestError as exc:
        serving.error = f"serve on start: {exc.message}"
        log.error("%s", serving.error)
        return
    await run_load(ctl, path, blocks)
    try:
        store = serving.claim()
    except RequestError as exc:
        serving.error = f"serve on start: {exc.message}"
        log.error("%s", serving.error)
        return
    await serving.start(store, serving.options())


async def _on_startup(app: web.Application) -> None:
    ctl, serving = app[CONTROL_KEY], app[SERVING_KEY]
    if serving.config.serve_on_start:
        ctl.spawn(serve_on_start(ctl, serving))


async def _on_shutdown(app: web.Application) -> None:
    await app[SERVING_KEY].drain()


def add_serving(
    app: web.Application,
    registry: CollectorRegistry,
    factory: EngineFactory = default_engine_factory,
) -> Serving:
    """Mount inference and serve/drain routes, metrics and hooks (after add_control)."""
    ctl = app[CONTROL_KEY]
    serving = Serving(ctl.config, ctl.state, ServingMetrics(registry), factory, ctl.startup)
    add_inference_routes(app, serving)
    app[HEALTH_KEY].gates.append(serving.not_ready_reason)
    app.router.add_post("/v1/control/serve", json_errors(_serve))
    app.router.add_post("/v1/control/drain", json_errors(_drain))
    add_pipeline_routes(app)
    ctl.transfer_hooks = live_hooks(serving, ctl.spawn)
    app.on_startup.append(_on_startup)
    app.on_shutdown.append(_on_shutdown)
    return serving
