"""A fake worker and a running gateway on loopback, shared by the gateway tests.

``FakeWorker`` speaks the worker protocol (``POST /v1/generate`` -> NDJSON
``GenerateChunk``s, ``GET /v1/load`` -> ``LoadReport``) and can be told to fail in each
way a real one can: answer 429/503/500, drop the connection before or after some
tokens, hand a request back (MIGRATE) as a draining worker does, be slow, or hold every
request until a gate opens. It continues a resumed request where it says (token i is
100 + i, text "<name><i> "). It records what it received
so tests can check what the gateway sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer
from aiohttp.typedefs import Handler

from cascade_gateway.config import GatewayConfig
from cascade_gateway.handlers import GATEWAY_KEY
from cascade_gateway.main import build_app
from cascade_gateway.runtime import Gateway
from cascade_protocol.generate import FinishReason, GenerateChunk, GenerateRequest
from cascade_protocol.load import LoadReport

MODEL = "tiny-llama"


def gateway_config(**overrides: object) -> GatewayConfig:
    base = GatewayConfig(
        host="127.0.0.1",
        port=0,
        model_name=MODEL,
        deployment="tiny",
        drain_seconds=0.0,
        request_timeout=10.0,
        poll_seconds=0.05,
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


@dataclass
class FakeWorker:
    name: str
    max_batch: int = 8
    max_model_len: int = 64
    ready: bool = True
    draining: bool = False
    running_reported: int = 0
    # "ok" | "429" | "503" | "500" | "drop" (close before answering) |
    # "die_after" (close after `die_after` token chunks) | "error_chunk" |
    # "migrate_after" (hand the request back, MIGRATE, after `die_after` token chunks) |
    # "hang_after" (after `die_after` token chunks stop, as a SIGSTOPped worker: nothing
    # more on any stream, load polls unanswered) | "hang" (the same before its headers)
    mode: str = "ok"
    die_after: int = 2
    chunk_delay: float = 0.0
    # Fail only this many requests, then behave (mode resets to "ok").
    fail_times: int | None = None
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    received: list[GenerateRequest] = field(default_factory=list)
    # request ids whose client connection closed before the end.
    cancelled: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    active: int = 0
    server: TestServer | None = None
    hung: bool = False  # a "hang" mode struck: streams and load polls wait forever
    # Like a worker with $CASCADE_PEER_TOKEN: requests without this bearer token get 401.
    token: str | None = None

    def __post_init__(self) -> None:
        self.gate.set()

    @property
    def url(self) -> str:
        assert self.server is not None
        return str(self.server.make_url("")).rstrip("/")

    @web.middleware
    async def _door(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if (
            self.token is not None
            and request.headers.get("Authorization") != f"Bearer {self.token}"
        ):
            return web.json_response({"error": "needs the deployment's credentials"}, status=401)
        return await handler(request)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._door])
        app.router.add_get("/v1/load", self._load)
        app.router.add_post("/v1/generate", self._generate)
        return app

    async def _hang(self) -> None:
        self.hung = True
        await asyncio.Event().wait()  # until the connection closes (cancelled)

    async def _load(self, request: web.Request) -> web.Response:
        if self.hung:
            await self._hang()
        report = LoadReport(
            instance=self.name,
            model=MODEL,
            ready=self.ready,
            draining=self.draining,
            running=self.running_reported,
            max_batch=self.max_batch,
            max_model_len=self.max_model_len,
            tokens_per_s=10.0,
        )
        return web.json_response(report.model_dump(mode="json"))

    def _failing(self) -> str:
        mode = self.mode
        if mode != "ok" and self.fail_times is not None:
            self.fail_times -= 1
            if self.fail_times <= 0:
                self.mode, self.fail_times = "ok", None
        return mode

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        req = GenerateRequest.model_validate(await request.json())
        self.received.append(req)
        mode = self._failing()
        if mode in ("429", "503", "500"):
            body = {"error": {"message": f"{self.name} says {mode}", "type": "x", "param": None,
                              "code": None}}  # fmt: skip
            return web.json_response(body, status=int(mode))
        if mode == "drop":
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        if req.prompt == "too long":
            body = {"error": {"message": "prompt too long for the worker",
                              "type": "invalid_request_error", "param": "prompt",
                              "code": "context_length_exceeded"}}  # fmt: skip
            return web.json_response(body, status=400)
        self.active += 1
        try:
            if mode == "hang":
                await self._hang()
            return await self._stream(request, req, mode)
        finally:
            self.active -= 1

    async def _stream(
        self, request: web.Request, req: GenerateRequest, mode: str
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await resp.prepare(request)
        n = req.params.max_tokens
        prompt_tokens = len(req.prompt_token_ids or []) or 3
        first = len(req.resume.token_ids) if req.resume is not None else 0
        try:
            await self.gate.wait()
            for i in range(first, n):
                if mode == "migrate_after" and i == first + self.die_after:
                    chunk = GenerateChunk(
                        request_id=req.request_id, finish_reason=FinishReason.MIGRATE,
                        error="migrate: instance draining", completion_tokens=i,
                    )  # fmt: skip
                    await resp.write(chunk.model_dump_json().encode() + b"\n")
                    return resp
                if mode == "hang_after" and i == first + self.die_after:
                    await self._hang()
                if mode == "die_after" and i == first + self.die_after:
                    assert request.transport is not None
                    request.transport.close()
                    return resp
                if mode == "error_chunk" and i == first + self.die_after:
                    chunk = GenerateChunk(
                        request_id=req.request_id, finish_reason=FinishReason.ERROR, error="boom"
                    )
                    await resp.write(chunk.model_dump_json().encode() + b"\n")
                    return resp
                if self.chunk_delay:
                    await asyncio.sleep(self.chunk_delay)
                last = i == n - 1
                chunk = GenerateChunk(
                    request_id=req.request_id,
                    text=f"{self.name}{i} ",
                    token_ids=[100 + i],
                    finish_reason=FinishReason.LENGTH if last else None,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=i + 1,
                )
                await resp.write(chunk.model_dump_json().encode() + b"\n")
        except (ConnectionError, asyncio.CancelledError):
            self.cancelled.append(req.request_id)
            raise
        self.finished.append(req.request_id)
        return resp


@dataclass
class Running:
    gateway: TestServer
    workers: list[FakeWorker]

    @property
    def base_url(self) -> str:
        return str(self.gateway.make_url("/v1"))

    @property
    def gw(self) -> Gateway:
        return self.gateway.app[GATEWAY_KEY]

    async def wait_ready(self, count: int | None = None, timeout: float = 5.0) -> None:
        """Until `count` (default: all) backends are routable in the gateway's view."""
        from cascade_gateway.router import ready_count

        want = len(self.workers) if count is None else count
        async with asyncio.timeout(timeout):
            while ready_count(self.gw.pool.views(), self.gw.pool.clock()) < want:
                await asyncio.sleep(0.01)


@asynccontextmanager
async def running(workers: list[FakeWorker], **config: object) -> AsyncIterator[Running]:
    """Start the workers and a gateway routing to them; wait until all are ready."""
    async with AsyncExitStack() as stack:
        for worker in workers:
            worker.server = TestServer(worker.app())
            await stack.enter_async_context(worker.server)
        backends = tuple(w.url for w in workers)
        app = build_app(gateway_config(backends=backends, **config), created=1700000000)
        gateway = TestServer(app)
        await stack.enter_async_context(gateway)
        run = Running(gateway, workers)
        if any(w.ready and not w.draining for w in workers):
            await run.wait_ready(sum(1 for w in workers if w.ready and not w.draining))
        yield run


def sse_events(body: str) -> list[object]:
    """The data payloads of an SSE body ("[DONE]" kept as a string)."""
    out: list[object] = []
    for block in body.split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def run_with(
    workers: list[FakeWorker],
    test: Callable[[Running, aiohttp.ClientSession], Awaitable[None]],
    **config: Any,
) -> None:
    """Run `test` against a gateway in front of `workers`, with a client session."""

    async def go() -> None:
        async with running(workers, **config) as run, aiohttp.ClientSession() as http:
            await test(run, http)

    asyncio.run(go())
