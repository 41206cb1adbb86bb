"""aiohttp handlers of the OpenAI routes: parse, dispatch, write JSON or SSE.

Each request gets one deadline (``--request-timeout``) over everything: queueing,
retries and generation. A streaming response is started only when the first chunk
arrives from a backend, so every failure before it still gets a proper status code
(429 queue full, 503 no backend in time or draining, 502 all attempts failed, the
worker's own 4xx passed through). After it, failures end the stream with an OpenAI
error event (``data: {"error": ...}``, which the SDKs raise as ``APIError``) and
``data: [DONE]``. A client that goes away is noticed both by a failed write and by a
watcher on the connection (aiohttp does not cancel handlers itself in production), and
the backend request is cancelled with it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Awaitable
from contextlib import aclosing
from typing import Any, TypeVar

from aiohttp import web

from cascade_gateway import dispatch, errors
from cascade_gateway.api_request import (
    CLASS_HEADER,
    Endpoint,
    Job,
    Limits,
    parse_chat,
    parse_completion,
)
from cascade_gateway.api_response import (
    DONE,
    OPENAI_FINISH,
    Envelope,
    full_response,
    response_id,
    sse,
    stream_chunk,
    usage_chunk,
)
from cascade_gateway.runtime import Gateway
from cascade_gateway.scheduler import QueueFull
from cascade_gateway.upstream import Rejected
from cascade_protocol.generate import RequestClass

log = logging.getLogger(__name__)

GATEWAY_KEY = web.AppKey("cascade_gateway", Gateway)
# How often a waiting handler checks whether its client is still connected.
DISCONNECT_POLL_S = 0.5
T = TypeVar("T")


class ClientGone(Exception):
    """The client closed its connection; nothing more can be sent."""

    def __init__(self, response: web.StreamResponse | None = None) -> None:
        super().__init__("client closed the connection")
        # The stream already started, if any: the one aiohttp must finish, not a new one.
        self.response = response


async def completions(request: web.Request) -> web.StreamResponse:
    return await _serve(request, Endpoint.COMPLETIONS)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _serve(request, Endpoint.CHAT)


async def _serve(request: web.Request, endpoint: Endpoint) -> web.StreamResponse:
    gw = request.app[GATEWAY_KEY]
    cls = RequestClass.INTERACTIVE
    response: web.StreamResponse
    try:
        if gw.health.draining:
            raise errors.draining()
        job = _parse(gw, endpoint, await request.read(), request.headers.get(CLASS_HEADER))
        cls = job.request_class
        work = _stream(request, gw, job) if job.stream else _complete(gw, job)
        response = await _until_disconnect(request, work)
    except errors.ApiError as exc:
        response = web.json_response(exc.body(), status=exc.status, headers=exc.headers)
    except QueueFull as exc:
        error = errors.queue_full(exc.request_class, exc.limit, gw.config.retry_after)
        response = web.json_response(error.body(), status=error.status, headers=error.headers)
    except Rejected as exc:
        response = web.json_response(exc.body, status=exc.status)
    except ClientGone as exc:
        response = exc.response or web.Response(status=499, text="client closed the connection")
    except web.HTTPRequestEntityTooLarge as exc:
        error = errors.ApiError(413, f"The request body is too large: {exc.text}")
        response = web.json_response(error.body(), status=error.status)
    except Exception:  # a bug: still answer in OpenAI's shape, and count it
        log.exception("%s failed", endpoint.value)
        error = errors.ApiError(500, "Internal gateway error.", type="server_error")
        response = web.json_response(error.body(), status=error.status)
    gw.metrics.requests.labels(endpoint.value, str(response.status), cls.value).inc()
    return response


def _parse(gw: Gateway, endpoint: Endpoint, raw: bytes, class_header: str | None) -> Job:
    try:
        body = json.loads(raw)
    except ValueError:  # also UnicodeDecodeError
        raise errors.bad_request(
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload.)"
        ) from None
    limits = Limits(models=gw.models(), max_model_len=gw.max_model_len())
    parse = parse_chat if endpoint is Endpoint.CHAT else parse_completion
    return parse(body, class_header, limits, response_id(endpoint, uuid.uuid4().hex))


def _deadline_error(gw: Gateway, progress: dispatch.Progress) -> errors.ApiError:
    timeout = gw.config.request_timeout
    return errors.timed_out(timeout) if progress.dispatched else errors.no_backend(timeout)


async def _complete(gw: Gateway, job: Job) -> web.StreamResponse:
    progress = dispatch.Progress(arrived=gw.pool.clock())
    env = Envelope(job.request.request_id, int(time.time()), job.model)
    texts: list[str] = []
    finish = "stop"
    try:
        async with asyncio.timeout(gw.config.request_timeout):
            async with aclosing(dispatch.run(gw, job, progress, buffered=True)) as chunks:
                async for chunk in chunks:
                    env.usage.add(chunk)
                    texts.append(chunk.text)
                    if chunk.finish_reason is not None:
                        finish = OPENAI_FINISH.get(chunk.finish_reason, "stop")
    except TimeoutError:
        raise _deadline_error(gw, progress) from None
    return web.json_response(full_response(job, env, "".join(texts), finish))


async def _stream(request: web.Request, gw: Gateway, job: Job) -> web.StreamResponse:
    progress = dispatch.Progress(arrived=gw.pool.clock())
    env = Envelope(job.request.request_id, int(time.time()), job.model)
    response: web.StreamResponse | None = None

    async def send(data: dict[str, Any] | bytes) -> None:
        nonlocal response
        if response is None:
            response = web.StreamResponse(
                headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
            )
            await response.prepare(request)
        try:
            await response.write(data if isinstance(data, bytes) else sse(data))
        except ConnectionError as exc:  # aiohttp's ClientConnectionResetError too
            raise ClientGone(response) from exc

    error: errors.ApiError | None = None
    try:
        async with asyncio.timeout(gw.config.request_timeout):
            async with aclosing(dispatch.run(gw, job, progress, buffered=False)) as chunks:
                async for chunk in chunks:
                    if response is None and job.endpoint is Endpoint.CHAT:
                        await send(stream_chunk(job, env, "", None, first=True))
                    env.usage.add(chunk)
                    if chunk.text:
                        await send(stream_chunk(job, env, chunk.text, None))
                    if chunk.finish_reason is not None:
                        finish = OPENAI_FINISH.get(chunk.finish_reason, "stop")
                        await send(stream_chunk(job, env, "", finish))
    except TimeoutError:
        error = _deadline_error(gw, progress)
    except dispatch.StreamBroken as exc:
        error = errors.stream_broken(str(exc))
    if error is not None:
        if response is None:
            raise error
        await send(error.body())
    elif job.include_usage:
        await send(usage_chunk(job, env))
    await send(DONE)
    assert response is not None
    return response


async def _until_disconnect(request: web.Request, work: Awaitable[T]) -> T:
    """Run ``work``; cancel it (raising ClientGone) if the client's connection closes."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                return task.result()
            transport = request.transport
            if transport is None or transport.is_closing():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise ClientGone()
    finally:
        if not task.done():  # we were cancelled ourselves (test server, shutdown)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
