"""Control routes that put a worker into an execution pipeline, and take its head out.

    POST /v1/control/stage  {"layers": [a, b]} -> 202: serve layers [a, b) as a stage
    POST /v1/control/serve  {"layers": [0, a], "stages": ["ip:port", ...]} -> 202: head
    POST /v1/control/local  {} -> 202: the head runs every layer itself from now on

A stage listens on $POD_IP:--pipeline-port (default 18516) once started; GET /v1/status
shows `stage: {layers, address}` (address null while it starts). A head's status shows
`layers: [0, L]` (it serves the whole model, through its stages) and `pipeline: {stages,
localLayers}`; after `local`, `pipeline` is null again. /v1/control/drain ends either.

Refusals: 400 for a malformed range or stage address; 409 when the worker already
serves (an engine or a stage) or lacks the blocks of the layers asked for (the message
names them), and for `local` when the worker is no pipeline head or does not hold the
whole model yet.
"""

from __future__ import annotations

from aiohttp import web

from cascade_protocol.control import Accepted, LocalRequest, ServeRequest, StageRequest
from cascade_worker.control.errors import RequestError, parse_body
from cascade_worker.control.jobs import Control, json_errors
from cascade_worker.serving.api import SERVING_KEY
from cascade_worker.serving.service import Serving


def _num_layers(serving: Serving) -> int:
    store = serving.state.current_store()
    if store is None:
        raise RequestError(409, f"worker holds no model (phase {serving.state.phase})")
    return store.manifest.num_layers


async def _stage(ctl: Control, request: web.Request) -> Accepted:
    req = parse_body(StageRequest, await request.read())
    serving = request.app[SERVING_KEY]
    num_layers = _num_layers(serving)
    start, end = req.layers
    if not 0 < start < end <= num_layers:
        raise RequestError(
            400,
            f"layers: {list(req.layers)} is no stage of a {num_layers}-layer model "
            f"(a stage runs [a, b) with 0 < a < b <= {num_layers}; the head runs [0, a))",
        )
    store = serving.claim_stage(req.layers)
    ctl.spawn(serving.start_stage(store, serving.options()))
    return Accepted(action="stage", role="stage", model_digest=store.manifest.digest)


async def serve_head(ctl: Control, serving: Serving, req: ServeRequest) -> Accepted:
    """POST /v1/control/serve with `stages`: this worker becomes their pipeline's head."""
    from cascade_worker.transport.pool import parse_address

    num_layers = _num_layers(serving)
    layers = req.layers
    if layers is None or not (layers[0] == 0 and 0 < layers[1] < num_layers):
        got = "nothing" if layers is None else list(layers)
        raise RequestError(
            400,
            f"layers: a pipeline head runs [0, a) with 0 < a < {num_layers} "
            f"(the stages run the rest), got {got}",
        )
    for i, address in enumerate(req.stages):
        try:
            parse_address(address)
        except ValueError as exc:
            raise RequestError(400, f"stages.{i}: {exc}") from exc
    store = serving.claim(layers)
    options = serving.options(req.max_batch, req.max_model_len)
    ctl.spawn(serving.start_head(store, options, layers[1], list(req.stages)))
    return Accepted(action="serve", role="head", model_digest=store.manifest.digest)


async def _local(ctl: Control, request: web.Request) -> Accepted:
    parse_body(LocalRequest, await request.read())
    serving = request.app[SERVING_KEY]
    head, engine = serving.head, serving.engine
    if head is None or engine is None:
        raise RequestError(409, "not a pipeline head: nothing to switch")
    if head.switching:
        raise RequestError(409, "switching to local execution already")
    if engine.draining or engine.stopped:
        raise RequestError(409, f"the head's engine is {serving.phase}")
    store = serving.state.current_store()
    if store is None or not store.complete():
        missing = store.missing() if store is not None else "all"
        raise RequestError(409, f"the head does not hold the whole model: missing blocks {missing}")
    ctl.spawn(serving.switch_to_local(store))
    return Accepted(action="local", model_digest=store.manifest.digest)


def add_pipeline_routes(app: web.Application) -> None:
    """Mount /v1/control/stage and /v1/control/local (serve dispatches to `serve_head`)."""
    app.router.add_post("/v1/control/stage", json_errors(_stage))
    app.router.add_post("/v1/control/local", json_errors(_local))
