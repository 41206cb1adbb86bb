"""Execution pipelines across worker apps: /v1/control/stage, serve with stages, local.

Three worker apps in this process (one event loop: every UCX connection lives on it,
as in a worker process), each holding the same small float32 model. One serves it
alone and records greedy tokens; then two become stages [1, 3) and [3, 4) and the
first their head over [0, 1): its /v1/generate returns the same tokens, and again when
it switches to local execution in the middle of generating. A stage that goes away
fails the head's in-flight requests with its name and the head reports failed; and
the routes refuse what does not fit (malformed ranges, missing blocks, busy workers).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from engine_harness import make_model
from waiting import until_doc

from cascade_worker.blocks.store import BlockStore
from cascade_worker.config import WorkerConfig
from cascade_worker.control.jobs import CONTROL_KEY
from cascade_worker.main import build_app
from cascade_worker.serving.api import SERVING_KEY
from cascade_worker.serving.service import Serving

pytestmark = [pytest.mark.ucx, pytest.mark.timeout(120), pytest.mark.usefixtures("one_ucx_loop")]

PROMPTS = [[5, 9, 14, 200, 17, 3, 8], [90, 91, 92], [7], list(range(20, 50))]
NEW_TOKENS = 120  # long enough that a switch lands mid-generation
BLOCKS = 4  # one layer per block: partial stores are easy to make


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    return make_model(tmp_path / "m")


def config(pod: str, model_dir: Path) -> WorkerConfig:
    return WorkerConfig(
        host="127.0.0.1", port=0, model_uri=f"file://{model_dir}", deployment="tiny",
        pod_name=pod, drain_seconds=0.0, model_path=str(model_dir), data_port=0,
        pipeline_port=0, blocks=BLOCKS, max_batch=8, max_model_len=256, device="cpu",
        request_drain_seconds=2.0,
    )  # fmt: skip


class Worker:
    def __init__(self, server: TestServer, http: ClientSession) -> None:
        self.server = server
        self.http = http
        self.base = f"http://127.0.0.1:{server.port}"

    @property
    def serving(self) -> Serving:
        return self.server.app[SERVING_KEY]

    def hold(self, store: BlockStore) -> None:
        self.server.app[CONTROL_KEY].state.store = store

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        async with self.http.request(method, self.base + path, json=body) as resp:
            text = await resp.text()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text

    async def ok(self, path: str, body: Any = None) -> dict[str, Any]:
        status, doc = await self.call("POST", path, {} if body is None else body)
        assert status == 202, (path, body, doc)
        assert isinstance(doc, dict)
        return doc

    async def refused(self, path: str, body: Any, status: int, words: str) -> None:
        got, doc = await self.call("POST", path, body)
        assert got == status and words in doc["error"], (path, body, got, doc)

    async def status(self) -> dict[str, Any]:
        doc = (await self.call("GET", "/v1/status"))[1]
        assert isinstance(doc, dict)
        return doc

    async def until(self, what: str, test: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        return await until_doc(self.status, test, 60, what, every=0.05)

    async def engine(self, phase: str) -> dict[str, Any]:
        return await self.until(f"engine {phase}", lambda d: d["engine"] == phase)

    async def stage(self, layers: list[int]) -> str:
        await self.ok("/v1/control/stage", {"layers": layers})
        doc = await self.until("stage listening", lambda d: bool((d["stage"] or {}).get("address")))
        assert doc["stage"]["layers"] == layers and doc["engine"] == "off"
        return str(doc["stage"]["address"])

    async def generate(
        self, rid: str, prompt: list[int], on_token: Callable[[], None] = lambda: None
    ) -> tuple[list[int], dict[str, Any]]:
        """Greedy token ids of one request, and its final chunk."""
        params = {"max_tokens": NEW_TOKENS, "temperature": 0.0, "ignore_eos": True}
        body = {"request_id": rid, "prompt_token_ids": prompt, "params": params}
        tokens: list[int] = []
        async with self.http.post(self.base + "/v1/generate", json=body) as resp:
            assert resp.status == 200, await resp.text()
            async for line in resp.content:
                if not line.strip():
                    continue
                chunk = json.loads(line)
                tokens += chunk["token_ids"]
                if chunk["token_ids"]:
                    on_token()
        return tokens, chunk

    async def greedy(self) -> dict[str, list[int]]:
        outs = await asyncio.gather(*(self.generate(f"p{i}", p) for i, p in enumerate(PROMPTS)))
        for _, last in outs:
            assert last["finish_reason"] == "length", last
        return {f"p{i}": tokens for i, (tokens, _) in enumerate(outs)}


@asynccontextmanager
async def workers(model_dir: Path, n: int) -> AsyncIterator[list[Worker]]:
    servers = [
        TestServer(build_app(config(f"w-{i}", model_dir)), host="127.0.0.1") for i in range(n)
    ]
    async with ClientSession() as http:
        for s in servers:
            await s.start_server()
        try:
            found = [Worker(s, http) for s in servers]
            for w in found:
                await w.ok("/v1/control/load")
            for w in found:
                await w.until("loaded", lambda d: d["phase"] == "ready")
            yield found
        finally:
            for s in servers:
                await s.close()


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(test(), 100)

    asyncio.run(bounded())


def partial(store: BlockStore, blocks: list[int]) -> BlockStore:
    """A store holding only `blocks` of `store`'s model, as while receiving it."""
    out = BlockStore(store.manifest, prefault=False)
    for i in blocks:
        out.buffer(i)[:] = store.buffer(i)
        assert out.install(i)
    return out


def test_three_worker_pipeline_matches_one_worker_and_switches_to_local(model_dir: Path) -> None:
    async def go() -> None:
        async with workers(model_dir, 3) as (w0, w1, w2):
            await w0.ok("/v1/control/serve")
            await w0.engine("serving")
            expected = await w0.greedy()
            assert all(len(t) == NEW_TOKENS for t in expected.values())
            await w0.ok("/v1/control/drain")
            await w0.engine("off")

            stages = [await w1.stage([1, 3]), await w2.stage([3, 4])]
            assert (await w1.call("GET", "/readyz"))[0] == 200  # a stage works...
            assert (await w1.call("GET", "/v1/load"))[1]["ready"] is False  # ...takes no requests
            doc = await w0.ok("/v1/control/serve", {"layers": [0, 1], "stages": stages})
            assert doc["role"] == "head"
            doc = await w0.engine("serving")
            assert doc["layers"] == [0, 4]
            assert doc["pipeline"] == {
                "stages": stages,
                "localLayers": [0, 1],
                "coveredAt": None,
                "servingAt": None,
            }
            assert (await w0.call("GET", "/v1/load"))[1]["ready"] is True
            assert await w0.greedy() == expected
            assert w1.serving.stage is not None and w1.serving.stage.server is not None
            assert w1.serving.stage.server.steps_done > 0

            # Leave the pipeline while all four requests are generating.
            flowing = asyncio.Event()
            runs = [
                asyncio.create_task(w0.generate(f"s{i}", p, flowing.set))
                for i, p in enumerate(PROMPTS)
            ]
            await flowing.wait()
            await w0.ok("/v1/control/local")
            doc = await w0.until("left the pipeline", lambda d: d["pipeline"] is None)
            assert doc["engine"] == "serving" and doc["layers"] == [0, 4]
            assert not all(r.done() for r in runs), "generation ended before the switch"
            outs = await asyncio.gather(*runs)
            assert {f"p{i}": t for i, (t, _) in enumerate(outs)} == expected
            assert all(last["finish_reason"] == "length" for _, last in outs)
            assert w1.serving.stage.server.describe()["session"] is None  # the head detached
            await w0.refused("/v1/control/local", {}, 409, "not a pipeline head")

            # Stages drain like engines; a drained worker can serve again.
            await w1.ok("/v1/control/drain")
            await w1.until("stage stopped", lambda d: d["stage"] is None)
            await w1.ok("/v1/control/serve")
            await w1.engine("serving")

    run(go)


def test_a_dead_stage_hands_back_the_heads_requests_and_fails_the_head(model_dir: Path) -> None:
    async def go() -> None:
        async with workers(model_dir, 3) as (w0, w1, w2):
            # The head holds only the blocks of its own layers (it is still receiving).
            store = w0.server.app[CONTROL_KEY].state.store
            assert store is not None
            w0.hold(partial(store, [0]))
            stages = [await w1.stage([1, 3]), await w2.stage([3, 4])]
            await w0.ok("/v1/control/serve", {"layers": [0, 1], "stages": stages})
            await w0.engine("serving")
            await w0.refused("/v1/control/local", {}, 409, "missing blocks [1, 2, 3]")

            flowing = asyncio.Event()
            victim = asyncio.create_task(w0.generate("v", PROMPTS[0], flowing.set))
            await flowing.wait()
            await w2.ok("/v1/control/drain")  # the last stage goes away
            tokens, last = await asyncio.wait_for(victim, 40)
            # Handed back, tokens so far standing: the gateway resumes it elsewhere.
            assert last["finish_reason"] == "migrate", last
            assert "pipeline stage" in last["error"] and len(tokens) < NEW_TOKENS
            doc = await w0.engine("failed")
            assert "pipeline broken" in doc["engineError"]
            status, text = await w0.call("GET", "/readyz")
            assert status == 503 and "pipeline stage" in text
            body = {"request_id": "late", "prompt_token_ids": [5, 6]}
            async with w0.http.post(w0.base + "/v1/generate", json=body) as resp:
                assert resp.status == 503
            await w0.ok("/v1/control/drain")
            doc = await w0.engine("off")
            assert doc["pipeline"] is None

    run(go)


def test_pipeline_routes_refuse_what_does_not_fit(model_dir: Path) -> None:
    async def go() -> None:
        async with workers(model_dir, 1) as (w,):
            store = w.server.app[CONTROL_KEY].state.store
            assert store is not None
            stage, serve = "/v1/control/stage", "/v1/control/serve"
            for bad in ([0, 2], [2, 2], [3, 1], [1, 9]):
                await w.refused(stage, {"layers": bad}, 400, "layers:")
            await w.refused(stage, {"layers": [1]}, 400, "layers")
            await w.refused(stage, {}, 400, "layers")
            await w.refused("/v1/control/local", {}, 409, "not a pipeline head")
            await w.refused(serve, {"layers": [0, 2]}, 409, "without `stages`")  # as before
            await w.refused(serve, {"stages": ["127.0.0.1:1"]}, 400, "a pipeline head runs")
            await w.refused(serve, {"layers": [0, 4], "stages": ["127.0.0.1:1"]}, 400, "layers")
            await w.refused(serve, {"layers": [1, 2], "stages": ["127.0.0.1:1"]}, 400, "layers")
            await w.refused(serve, {"layers": [0, 2], "stages": ["nohost"]}, 400, "stages.0")

            # One stage at a time, one engine at a time, but an engine beside a stage
            # (cooperative execution: an instance serves and runs another's layers).
            await w.stage([1, 3])
            await w.refused(stage, {"layers": [2, 4]}, 409, "pipeline stage [1, 3]")
            await w.ok(serve)
            doc = await w.engine("serving")
            assert doc["mode"] == "local" and doc["stage"]["layers"] == [1, 3]
            await w.refused(serve, {}, 409, "an engine serves already")
            await w.ok("/v1/control/drain")
            doc = await w.engine("off")
            assert doc["stage"] is None and doc["mode"] == "idle"

            # Blocks it does not hold are named.
            w.hold(partial(store, [0, 3]))
            await w.refused(stage, {"layers": [1, 3]}, 409, "need blocks [1, 2]")
            head = {"layers": [0, 2], "stages": ["127.0.0.1:1"]}
            await w.refused(serve, head, 409, "need blocks [1]")
            # A stage that cannot be reached: the head fails to start, saying so.
            await w.ok(serve, {"layers": [0, 1], "stages": ["127.0.0.1:1"]})
            doc = await w.engine("failed")
            assert "engine start failed" in doc["engineError"] and doc["pipeline"] is None
            await w.stage([3, 4])  # the blocks it holds still serve as a stage

    run(go)
