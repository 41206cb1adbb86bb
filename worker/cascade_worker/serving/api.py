"""The inference routes on the worker's HTTP port, spoken by the gateway.

    POST /v1/generate  GenerateRequest JSON -> 200 application/x-ndjson, one GenerateChunk
                       per line, the last with a finish_reason
    GET  /v1/load      -> LoadReport JSON (routing and the autoscaler)

Refusals happen before the 200 and use OpenAI's error body, so the gateway can pass
them through: `{"error": {"message", "type", "param", "code"}}`. 400 for a body that is
not JSON or not a valid request (`param` names the field) or that the engine rejects
(`code` "context_length_exceeded" for a too long prompt), 429 with Retry-After when the
waiting queue is full, 503 when no engine takes requests (none, starting, draining).

A client that goes away aborts its request in the engine: a failed write says so while
tokens flow, and while a request waits without output the handler checks its connection
every DISCONNECT_CHECK_S (aiohttp does not cancel handlers on disconnect by default).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from cascade_protocol import json_body
from cascade_protocol.generate import GenerateRequest
from cascade_protocol.load import LOAD_PATH
from cascade_protocol.service import HEALTH_KEY
from cascade_worker.control.errors import describe
from cascade_worker.engine.core import RequestRejected
from cascade_worker.serving.errors import NotServing, WaitingQueueFull
from cascade_worker.serving.service import Serving
from cascade_worker.serving.stream import RequestStream

log = logging.getLogger(__name__)

SERVING_KEY = web.AppKey("cascade_worker_serving", Serving)
NDJSON = "application/x-ndjson"
DISCONNECT_CHECK_S = 1.0
# Words that mark a rejection as a context-length problem (RequestRejected has no code).
LENGTH_WORDS = ("context length", "max_model_len", "too long", "maximum context")


def error_response(
    status: int,
    message: str,
    *,
    type_: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return web.json_response(body, status=status, headers=headers)


def parse_generate(raw: bytes) -> GenerateRequest | web.Response:
    """The request, or the 400 response naming what is wrong with it."""
    try:
        doc: Any = json_body.load(raw)
    except json_body.BodyError as exc:
        return error_response(400, str(exc), code="invalid_json")
    if not isinstance(doc, dict):
        return error_response(400, f"body must be a JSON object, got {type(doc).__name__}")
    try:
        return GenerateRequest.model_validate(doc)
    except ValidationError as exc:
        loc = exc.errors()[0]["loc"]
        param = ".".join(str(p) for p in loc) or None
        return error_response(400, describe(exc), param=param)


def rejected_response(exc: RequestRejected) -> web.Response:
    code = getattr(exc, "code", None)
    if code is None and any(word in str(exc).lower() for word in LENGTH_WORDS):
        code = "context_length_exceeded"
    return error_response(400, str(exc), param=exc.param, code=code)


async def generate(request: web.Request) -> web.StreamResponse:
    serving = request.app[SERVING_KEY]
    refused = serving.metrics.refused
    parsed = parse_generate(await request.read())
    if isinstance(parsed, web.Response):
        refused.labels(reason="invalid").inc()
        return parsed
    engine = serving.engine
    try:
        if engine is None:
            raise NotServing(f"not serving (engine {serving.phase})")
        stream = await engine.submit(parsed)
    except NotServing as exc:
        refused.labels(reason="not_serving").inc()
        return error_response(503, str(exc), type_="service_unavailable", code="not_serving")
    except WaitingQueueFull as exc:
        refused.labels(reason="queue_full").inc()
        retry = {"Retry-After": str(exc.retry_after_s)}
        return error_response(429, str(exc), type_="rate_limit_error", code="queue_full",
                              headers=retry)  # fmt: skip
    except RequestRejected as exc:
        refused.labels(reason="rejected").inc()
        return rejected_response(exc)
    return await _stream(request, stream)


async def _stream(request: web.Request, stream: RequestStream) -> web.StreamResponse:
    """Write chunks as NDJSON lines until the final one; abort if the client leaves."""
    resp = web.StreamResponse(headers={"Content-Type": NDJSON, "Cache-Control": "no-cache"})
    try:
        await resp.prepare(request)
        while True:
            chunks = stream.ready()
            if not chunks:
                try:
                    chunks = [await asyncio.wait_for(stream.get(), DISCONNECT_CHECK_S)]
                except TimeoutError:
                    if request.transport is None or request.transport.is_closing():
                        log.info("client of %s went away while waiting", stream.request_id)
                        break
                    continue
            await resp.write(b"".join(c.model_dump_json().encode() + b"\n" for c in chunks))
            if chunks[-1].finish_reason is not None:
                await resp.write_eof()
                break
    except ConnectionError:  # aiohttp's ClientConnectionResetError is one
        log.info("client of %s went away", stream.request_id)
    finally:
        stream.abort()  # no-op when the engine finished it
    return resp


async def load(request: web.Request) -> web.Response:
    serving = request.app[SERVING_KEY]
    report = serving.load_report(ready=request.app[HEALTH_KEY].ready)
    return web.json_response(report.model_dump(mode="json"))


def add_inference_routes(app: web.Application, serving: Serving) -> None:
    app[SERVING_KEY] = serving
    app.router.add_post("/v1/generate", generate)
    app.router.add_get(LOAD_PATH, load)
