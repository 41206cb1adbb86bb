"""aiohttp handlers of the OpenAI routes: parse, dispatch, write JSON or SSE.

Each request gets one deadline (``--request-timeout``) over everything: queueing (also
while held because no backend is ready at all), retries and generation. A streaming
response is started by its first write: the first chunk from a backend or, after
``--keepalive-seconds`` of silence, an SSE keep-alive comment (repeated for every such
silence, so proxies keep a held or stalled stream open; see events.py). Failures
before that get a proper status code
(429 queue full, 503 no backend in time or draining, 502 all attempts failed, the
worker's own 4xx passed through). After it, failures end the stream with an OpenAI
error event (``data: {"error": ...}``, which the SDKs raise as ``APIError``) and
``data: [DONE]``. Non-streaming requests always get plain JSON errors. A client that
goes away is noticed both by a failed write and by a watcher on the connection
(aiohttp does not cancel handlers itself in production), and the backend request is
cancelled with it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable
from contextlib import aclosing
from typing import TypeVar

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
from cascade_gateway.events import ClientGone, EventStream
from cascade_gateway.runtime import Gateway
from cascade_gateway.scheduler import ClassQueueFull
from cascade_gateway.upstream import Rejected
from cascade_protocol import json_body
from cascade_protocol.generate import RequestClass

log = logging.getLogger(__name__)

GATEWAY_KEY = web.AppKey("cascade_gateway", Gateway)
# How often a waiting handler checks whether its client is still connected.
DISCONNECT_POLL_S = 0.5
T = TypeVar("T")


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
        gw.demand.arrived(cls, gw.pool.clock())
        work = _stream(request, gw, job) if job.stream else _complete(gw, job)
        response = await _until_disconnect(request, work)
    except errors.OpenAIError as exc:
        response = web.json_response(exc.body(), status=exc.status, headers=exc.headers)
    except ClassQueueFull as exc:
        error = errors.queue_full(exc.request_class, exc.limit, gw.config.retry_after)
        response = web.json_response(error.body(), status=error.status, headers=error.headers)
    except Rejected as exc:
        response = web.json_response(exc.body, status=exc.status)
    except ClientGone as exc:
        response = exc.response or web.Response(status=499, text="client closed the connection")
    except web.HTTPRequestEntityTooLarge as exc:
        error = errors.OpenAIError(413, f"The request body is too large: {exc.text}")
        response = web.json_response(error.body(), status=error.status)
    except Exception:  # a bug: still answer in OpenAI's shape, and count it
        log.exception("%s failed", endpoint.value)
        error = errors.OpenAIError(500, "Internal gateway error.", type="server_error")
        response = web.json_response(error.body(), status=error.status)
    gw.metrics.requests.labels(endpoint.value, str(response.status), cls.value).inc()
    return response


def _parse(gw: Gateway, endpoint: Endpoint, raw: bytes, class_header: str | None) -> Job:
    try:
        body = json_body.load(raw)
    except json_body.TooDeep as exc:
        raise errors.bad_request(
            f"We could not parse the JSON body of your request: {exc}."
        ) from None
    except json_body.BodyError:
        raise errors.bad_request(
            "We could not parse the JSON body of your request. (HINT: This likely means you "
            "aren't using your HTTP library correctly. The OpenAI API expects a JSON payload.)"
        ) from None
    limits = Limits(
        models=gw.models(), max_model_len=gw.max_model_len(), max_prompt_bytes=gw.max_prompt_bytes()
    )
    parse = parse_chat if endpoint is Endpoint.CHAT else parse_completion
    return parse(body, class_header, limits, response_id(endpoint, uuid.uuid4().hex))


def _deadline_error(gw: Gateway, progress: dispatch.Progress) -> errors.OpenAIError:
    timeout = gw.config.request_timeout
    if progress.dispatched:
        return errors.timed_out(timeout)
    return errors.no_backend(timeout, held=not gw.serving())


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
    out = EventStream(request, gw.config.keepalive_seconds)
    failure: errors.OpenAIError | Rejected | None = None
    first = True
    out.start()
    try:
        async with (
            asyncio.timeout(gw.config.request_timeout),
            aclosing(dispatch.run(gw, job, progress, buffered=False)) as chunks,
        ):
            async for chunk in chunks:
                if first and job.endpoint is Endpoint.CHAT:
                    await out.send(sse(stream_chunk(job, env, "", None, first=True)))
                first = False
                env.usage.add(chunk)
                if chunk.text:
                    await out.send(sse(stream_chunk(job, env, chunk.text, None)))
                if chunk.finish_reason is not None:
                    finish = OPENAI_FINISH.get(chunk.finish_reason, "stop")
                    await out.send(sse(stream_chunk(job, env, "", finish)))
    except TimeoutError:
        failure = _deadline_error(gw, progress)
    except dispatch.StreamBroken as exc:
        failure = errors.stream_broken(str(exc))
    except (errors.OpenAIError, Rejected) as exc:  # reach the client as events once started
        failure = exc
    finally:
        await out.stop()
    if failure is not None:
        if not out.started:  # nothing sent yet: a plain status code and JSON body
            raise failure
        await out.send(
            sse(failure.body() if isinstance(failure, errors.OpenAIError) else failure.body)
        )
    elif job.include_usage:
        await out.send(sse(usage_chunk(job, env)))
    await out.send(DONE)
    assert out.response is not None
    return out.response


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
