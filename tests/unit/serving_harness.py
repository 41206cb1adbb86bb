"""Shared pieces of the serving tests: a deterministic fake EngineCore, a stand-in store,
and a worker app on a real loopback port with that fake behind /v1/control/serve."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from waiting import until_doc

from cascade_protocol.generate import FinishReason, GenerateChunk, GenerateRequest
from cascade_worker.config import WorkerConfig
from cascade_worker.control.jobs import CONTROL_KEY
from cascade_worker.engine.core import EngineStats, RequestRejected
from cascade_worker.engine.options import EngineOptions
from cascade_worker.main import build_app
from cascade_worker.serving.api import SERVING_KEY
from cascade_worker.serving.service import Serving

VOCAB = 1000


@dataclass
class _Running:
    request: GenerateRequest
    prompt_tokens: int
    generated: int = 0


class FakeCore:
    """One token per step per running request (token id 100+i, text " t<i>"); honours
    max_batch, max_tokens and abort; rejects prompts that do not fit max_model_len.
    A prompt's length is its token ids, else its words. Records what happened."""

    def __init__(self, *, max_batch: int = 4, max_model_len: int = 4096, step_s: float = 0.0):
        self.max_batch = max_batch
        self.max_model_len = max_model_len
        self.step_s = step_s
        self.fail_next_step = False
        self.waiting: deque[_Running] = deque()
        self.running: dict[str, _Running] = {}
        self.pending: list[GenerateChunk] = []  # ABORT chunks for the next step
        self.added: list[str] = []
        self.aborted: list[str] = []
        self.peak_running = 0
        self.steps = 0
        self.threads: set[int] = set()

    def _called(self) -> None:
        self.threads.add(threading.get_ident())

    def tokenize(self, request: GenerateRequest) -> GenerateRequest:
        return request  # its prompts are counted in words at add_request

    def add_request(self, request: GenerateRequest) -> None:
        self._called()
        if request.prompt_token_ids is not None:
            if any(not 0 <= t < VOCAB for t in request.prompt_token_ids):
                raise RequestRejected("token id out of range", "prompt_token_ids")
            n = len(request.prompt_token_ids)
        elif request.prompt is not None:
            n = len(request.prompt.split())
        else:
            n = sum(len(m.content.split()) for m in request.messages or [])
        wanted = n + request.params.max_tokens
        if wanted > self.max_model_len:
            raise RequestRejected(
                f"This model's maximum context length is {self.max_model_len} tokens; "
                f"you asked for {wanted} ({n} prompt + {request.params.max_tokens})",
                "params.max_tokens",
            )
        self.added.append(request.request_id)
        self.waiting.append(_Running(request, n))

    def abort_request(self, request_id: str) -> None:
        self._called()
        self.aborted.append(request_id)
        found = self.running.pop(request_id, None)
        for r in list(self.waiting):
            if r.request.request_id == request_id:
                self.waiting.remove(r)
                found = r
        if found is not None:
            self.pending.append(
                GenerateChunk(request_id=request_id, finish_reason=FinishReason.ABORT)
            )

    def step(self) -> list[GenerateChunk]:
        self._called()
        self.steps += 1
        if self.fail_next_step:
            self.fail_next_step = False
            raise RuntimeError("boom")
        if self.step_s:
            time.sleep(self.step_s)
        chunks, self.pending = self.pending, []
        while self.waiting and len(self.running) < self.max_batch:
            r = self.waiting.popleft()
            self.running[r.request.request_id] = r
        self.peak_running = max(self.peak_running, len(self.running))
        for rid, r in list(self.running.items()):
            i = r.generated
            r.generated += 1
            done = r.generated >= r.request.params.max_tokens
            chunks.append(
                GenerateChunk(
                    request_id=rid,
                    text=f" t{i}",
                    token_ids=[100 + i],
                    finish_reason=FinishReason.LENGTH if done else None,
                    prompt_tokens=r.prompt_tokens,
                    completion_tokens=r.generated,
                )
            )
            if done:
                del self.running[rid]
        return chunks

    def has_work(self) -> bool:
        self._called()
        return bool(self.waiting or self.running or self.pending)

    def stats(self) -> EngineStats:
        self._called()
        used = sum(r.prompt_tokens + r.generated for r in self.running.values())
        return EngineStats(
            waiting=len(self.waiting),
            running=len(self.running),
            max_batch=self.max_batch,
            kv_cache_usage=min(1.0, used / (self.max_batch * self.max_model_len)),
            max_model_len=self.max_model_len,
        )

    def set_max_batch(self, n: int) -> None:
        self._called()
        self.max_batch = n


@dataclass
class FakeManifest:
    num_layers: int = 4
    digest: str = "fake-digest"


@dataclass
class FakeStore:
    """What serving and status read of a BlockStore; complete by default."""

    manifest: FakeManifest = field(default_factory=FakeManifest)
    num_blocks: int = 2
    whole: bool = True

    def complete(self) -> bool:
        return self.whole

    def held(self) -> list[int]:
        return list(range(self.num_blocks)) if self.whole else [0]

    def held_bytes(self) -> int:
        return 1024 * len(self.held())


CONFIG = WorkerConfig(
    host="127.0.0.1",
    port=0,
    model_uri="file:///models/fake",
    deployment="fake",
    pod_name="fake-w-0",
    drain_seconds=0.0,
    served_name="fake-model",
    request_drain_seconds=2.0,
)


class Factory:
    """An EngineFactory building FakeCores; remembers what it was asked."""

    def __init__(self, **core: Any) -> None:
        self.core_args = core
        self.cores: list[FakeCore] = []
        self.options: list[EngineOptions] = []
        self.fail: Exception | None = None

    def __call__(self, store: Any, options: EngineOptions) -> FakeCore:
        self.options.append(options)
        if self.fail is not None:
            raise self.fail
        args = dict(self.core_args)
        if options.max_batch:
            args["max_batch"] = options.max_batch
        core = FakeCore(**args)
        self.cores.append(core)
        return core

    @property
    def core(self) -> FakeCore:
        return self.cores[-1]


class Worker:
    """A worker app on a loopback port, and an HTTP client for it."""

    def __init__(self, server: TestServer, http: ClientSession, factory: Any) -> None:
        self.server = server
        self.http = http
        self.factory = factory
        self.base = f"http://127.0.0.1:{server.port}"

    @property
    def serving(self) -> Serving:
        return self.server.app[SERVING_KEY]

    def hold_model(self, store: Any = None) -> None:
        self.server.app[CONTROL_KEY].state.store = store or FakeStore()  # type: ignore[assignment,unused-ignore]

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        kwargs: dict[str, Any] = {"data": body} if isinstance(body, bytes) else {"json": body}
        async with self.http.request(method, self.base + path, **kwargs) as resp:
            text = await resp.text()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text

    async def status(self) -> dict[str, Any]:
        _, doc = await self.call("GET", "/v1/status")
        assert isinstance(doc, dict)
        return doc

    async def wait_engine(self, *phases: str, timeout: float = 10.0) -> dict[str, Any]:
        return await until_doc(
            self.status, lambda doc: doc["engine"] in phases, timeout, f"engine {phases}"
        )

    async def serve(self, body: Any = None) -> None:
        self.hold_model()
        status, doc = await self.call("POST", "/v1/control/serve", body or {})
        assert status == 202, doc
        await self.wait_engine("serving")

    async def generate(self, body: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
        """POST /v1/generate; the NDJSON lines (200) or [error body]."""
        async with self.http.post(self.base + "/v1/generate", json=body) as resp:
            if resp.status != 200:
                return resp.status, [await resp.json()]
            assert resp.headers["Content-Type"].startswith("application/x-ndjson")
            lines = [json.loads(line) async for line in resp.content if line.strip()]
            return resp.status, lines


@asynccontextmanager
async def worker(factory: Any = None, **config: Any) -> AsyncIterator[Worker]:
    """A served app; `factory`: a Factory of fakes (default) or any EngineFactory."""
    factory = factory or Factory()
    app = build_app(replace(CONFIG, **config), factory=factory)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        async with ClientSession() as http:
            yield Worker(server, http, factory)
    finally:
        await server.close()


def run(test: Callable[[], Coroutine[Any, Any, None]], timeout: float = 30.0) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(test(), timeout)

    asyncio.run(bounded())


def request(rid: str, max_tokens: int = 4, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"request_id": rid, "prompt": "hello there"}
    body.update(fields)
    body.setdefault("params", {})["max_tokens"] = max_tokens
    return body
