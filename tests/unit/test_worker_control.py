"""The worker control API: two worker apps on loopback, load on A, fetch on B from A."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer
from ports import free_port
from waiting import until, until_doc

from cascade_api.scaleplan import Source, SourceTier
from cascade_planner.spec import plan_spec
from cascade_protocol.control import ManifestInfo
from cascade_worker.blocks.store import BlockStore
from cascade_worker.checkpoints.checkpoint import write_checkpoint
from cascade_worker.checkpoints.spec import ModelSpec
from cascade_worker.config import WorkerConfig
from cascade_worker.control import jobs as control
from cascade_worker.control.errors import RequestError
from cascade_worker.control.fetch import split_peer
from cascade_worker.control.jobs import CONTROL_KEY, Control
from cascade_worker.main import build_app
from cascade_worker.multicast import NodeOptions

pytestmark = [pytest.mark.timeout(120), pytest.mark.ucx]

TINY = ModelSpec(layers=4, hidden=32, heads=4, kv_heads=2, intermediate=64, vocab=300)
FAST = NodeOptions(chunk_bytes=16 * 1024, stall_timeout_s=5, deadline_s=20, linger_s=0.5)


def config(pod: str, model_path: str = "") -> WorkerConfig:
    return WorkerConfig(
        host="127.0.0.1",
        port=0,
        model_uri="file://" + model_path,
        deployment="tiny",
        pod_name=pod,
        drain_seconds=0.0,
        model_path=model_path,
        data_port=free_port(),
        blocks=2,
    )


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("model") / "tiny"
    write_checkpoint(out, TINY)
    return out


class Worker:
    def __init__(self, server: TestServer, http: ClientSession) -> None:
        self.server = server
        self.http = http
        self.control = server.app[CONTROL_KEY]

    @property
    def peer(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        url = f"http://{self.peer}{path}"
        kwargs: dict[str, Any] = {"data": body} if isinstance(body, bytes) else {"json": body}
        async with self.http.request(method, url, **kwargs) as resp:
            return resp.status, await resp.json(content_type=None)

    async def status(self) -> dict[str, Any]:
        _, doc = await self.call("GET", "/v1/status")
        assert isinstance(doc, dict)
        return doc

    async def wait_phase(self, *phases: str, timeout: float = 60) -> dict[str, Any]:
        return await until_doc(
            self.status, lambda doc: doc["phase"] in phases, timeout, f"phase {phases}", 0.1
        )


@asynccontextmanager
async def workers(*configs: WorkerConfig) -> AsyncIterator[list[Worker]]:
    servers = [
        TestServer(build_app(c, Control(c, options=FAST)), host="127.0.0.1") for c in configs
    ]
    async with ClientSession() as http:
        for s in servers:
            await s.start_server()
        try:
            yield [Worker(s, http) for s in servers]
        finally:
            for s in servers:
                await s.close()


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def test_load_then_fetch_gives_identical_weights(model_dir: Path, tmp_path: Path) -> None:
    async def go() -> None:
        async with workers(config("w-0", str(model_dir)), config("w-1")) as (a, b):
            assert (await b.status())["phase"] == "idle"
            status, doc = await a.call("POST", "/v1/control/load", {})
            assert status == 202, doc
            sa = await a.wait_phase("ready", "failed")
            assert sa["phase"] == "ready" and sa["blocksLoaded"] == sa["blocksTotal"] == 2
            status, doc = await b.call("POST", "/v1/control/fetch", {"peer": a.peer})
            assert status == 202, doc
            assert doc["action"] == "fetch" and doc["role"] == "target"
            sb = await b.wait_phase("ready", "failed")
            assert sb["phase"] == "ready", sb
            assert sb["modelDigest"] == sa["modelDigest"]
            assert sb["lastTransfer"]["complete"] and sb["lastTransfer"]["missing"] == []
            assert sb["bytesReceived"] > 0
            await a.wait_phase("ready")
            store_a, store_b = a.control.state.store, b.control.state.store
            assert store_a is not None and store_b is not None
            for i in range(store_a.num_blocks):
                assert np.array_equal(store_a.buffer(i), store_b.buffer(i))
            store_a.write_model_dir(tmp_path / "a")
            store_b.write_model_dir(tmp_path / "b")
            files = sorted(p.name for p in (tmp_path / "a").iterdir())
            assert files == sorted(p.name for p in (tmp_path / "b").iterdir())
            for name in files:
                assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
            async with b.http.get(f"http://{b.peer}/metrics") as resp:
                metrics = await resp.text()
            assert "cascade_worker_blocks_loaded 2.0" in metrics
            assert f"cascade_worker_bytes_received_total {float(sb['bytesReceived'])}" in metrics

    run(go)


def transfer_body(a: Worker, b: Worker, info: dict[str, Any]) -> dict[str, Any]:
    """A one-hop chain from a (which holds the model) to b, as the operator sends it."""
    plan = plan_spec(
        "chain",
        [Source(pod=a.control.config.pod_name, tier=SourceTier.HOST)],
        [b.control.config.pod_name],
        ManifestInfo.model_validate(info).blocks,
        deployment="tiny",
        model_digest=info["modelDigest"],
    ).model_dump(mode="json", by_alias=True)
    peers = {w.control.config.pod_name: f"127.0.0.1:{w.control.config.data_port}" for w in (a, b)}
    return {"plan": plan, "peers": peers}


def test_transfer_order_is_answered_while_the_transfer_path_still_loads(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cold import of torch and ucxx takes seconds on a CPU-limited node: the order is
    # accepted at once, status keeps answering, and the transfer runs once it loaded.
    loaded = threading.Event()
    real = control.import_transfer_path

    def cold_import() -> Any:
        assert loaded.wait(30)
        return real()

    monkeypatch.setattr(control, "import_transfer_path", cold_import)

    async def go() -> None:
        async with workers(config("w-0", str(model_dir)), config("w-1")) as (a, b):
            assert (await a.call("POST", "/v1/control/load", {}))[0] == 202
            await a.wait_phase("ready")
            _, info = await a.call("GET", "/v1/control/manifest")
            body = transfer_body(a, b, info)
            for w in (a, b):
                t0 = time.monotonic()
                status, doc = await w.call("POST", "/v1/control/transfer", body)
                assert status == 202, doc
                assert time.monotonic() - t0 < 1.0
            sb_before = await b.status()
            assert sb_before["phase"] == "transferring"
            status, doc = await b.call("POST", "/v1/control/transfer", body)
            assert status == 409 and "busy" in doc["error"]  # the slot is taken meanwhile
            assert sb_before["firstByteAt"] is None  # cleared for this transfer
            began = time.time()
            loaded.set()
            sb = await b.wait_phase("ready", "failed")
            assert sb["phase"] == "ready" and sb["lastTransfer"]["complete"], sb
            # The target says when the plan's first bytes landed (its own clock).
            assert began <= sb["firstByteAt"] <= time.time()
            sa = await a.wait_phase("ready")
            assert sa["lastTransfer"]["role"] == "source" and sa["firstByteAt"] is None

    run(go)


def test_a_node_that_cannot_start_fails_its_transfer(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> Any:
        raise RuntimeError("no ucx here")

    monkeypatch.setattr(control, "import_transfer_path", broken)

    async def go() -> None:
        async with workers(config("w-0", str(model_dir)), config("w-1")) as (a, b):
            assert (await a.call("POST", "/v1/control/load", {}))[0] == 202
            await a.wait_phase("ready")
            _, info = await a.call("GET", "/v1/control/manifest")
            status, doc = await b.call("POST", "/v1/control/transfer", transfer_body(a, b, info))
            assert status == 202 and doc["role"] == "target", doc
            sb = await b.wait_phase("failed")
            last = sb["lastTransfer"]
            assert last["role"] == "target" and not last["complete"], sb
            assert last["missing"] == [0, 1] and "no ucx here" in last["error"]
            assert "no ucx here" in sb["error"]
            # The slot is free again: the next order is taken (and fails the same way).
            status, _ = await b.call("POST", "/v1/control/transfer", transfer_body(a, b, info))
            assert status == 202

    run(go)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/control/load", b"{not json", "JSON"),
        ("/v1/control/load", {"blocks": 0}, "blocks"),
        ("/v1/control/load", {"modelPath": "/nonexistent"}, "modelPath"),
        ("/v1/control/load", {"modelpath": "/x"}, "modelpath"),
        ("/v1/control/fetch", {}, "peer"),
        ("/v1/control/fetch", {"peer": "1.2.3.4:http"}, "peer"),
        ("/v1/control/transfer", {"peers": {}}, "plan"),
        ("/v1/control/transfer", {"plan": {"strategy": "chain"}, "peers": {}}, "plan.deployment"),
    ],
)
def test_bad_requests_are_400_naming_the_field(path: str, body: Any, field: str) -> None:
    async def go() -> None:
        async with workers(config("w-0")) as (a,):
            status, doc = await a.call("POST", path, body)
            assert status == 400, doc
            assert field in doc["error"]

    run(go)


def test_conflicts_are_409(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The first load must still run when the second request arrives: it waits for it.
    real = BlockStore.from_model_dir.__func__  # type: ignore[attr-defined]
    second_asked = threading.Event()

    def slow_load(cls: type[BlockStore], path: Path, blocks: int, **kw: Any) -> BlockStore:
        assert second_asked.wait(30), "the second load request never came"
        store: BlockStore = real(cls, path, blocks, **kw)
        return store

    monkeypatch.setattr(BlockStore, "from_model_dir", classmethod(slow_load))

    async def go() -> None:
        async with workers(config("w-0", str(model_dir)), config("w-1")) as (a, b):
            # Nothing held: no manifest to offer, nothing to fetch.
            status, doc = await a.call("GET", "/v1/control/manifest")
            assert status == 409 and "no complete model" in doc["error"]
            status, doc = await b.call("POST", "/v1/control/fetch", {"peer": a.peer})
            assert status == 409 and "holds no model" in doc["error"]
            assert (await b.status())["phase"] == "idle"
            # Busy: a second job while the first runs.
            status, _ = await a.call("POST", "/v1/control/load", {})
            assert status == 202
            status, doc = await a.call("POST", "/v1/control/load", {})
            second_asked.set()
            assert status == 409 and "busy" in doc["error"]
            await a.wait_phase("ready")
            # A transfer that keeps the worker busy (its peer never shows up) blocks others.
            _, info = await a.call("GET", "/v1/control/manifest")
            plan = plan_spec(
                "chain",
                [Source(pod="w-0", tier=SourceTier.HOST)],
                ["w-9"],
                ManifestInfo.model_validate(info).blocks,
                deployment="tiny",
                model_digest=info["modelDigest"],
            ).model_dump(mode="json", by_alias=True)
            peers = {"w-0": f"127.0.0.1:{a.control.config.data_port}", "w-9": "127.0.0.1:1"}
            body = {"plan": plan, "peers": peers}
            status, doc = await a.call("POST", "/v1/control/transfer", body)
            assert status == 202 and doc["role"] == "source", doc
            assert (await a.status())["phase"] == "transferring"
            status, doc = await a.call("POST", "/v1/control/transfer", body)
            assert status == 409 and "busy" in doc["error"]
            # A source must hold the model the plan names; a receiver is not a source.
            wrong = {**plan, "modelDigest": "other"}
            status, doc = await b.call("POST", "/v1/control/transfer", {**body, "plan": wrong})
            assert status == 400 and "not part of the plan" in doc["error"]
            plan_b = {**wrong, "sources": [{"pod": "w-1", "tier": "host"}]}
            plan_b["chains"] = [{"source": "w-1", "hops": ["w-9"]}]
            peers_b = {"w-1": "127.0.0.1:2", "w-9": "127.0.0.1:1"}
            status, doc = await b.call(
                "POST", "/v1/control/transfer", {"plan": plan_b, "peers": peers_b}
            )
            assert status == 409 and "no complete model" in doc["error"]

    run(go)


def test_split_peer() -> None:
    assert split_peer("198.18.0.7") == ("198.18.0.7", 8080)
    assert split_peer("127.0.0.1:9000") == ("127.0.0.1", 9000)
    assert split_peer("[fd00::5]:8080") == ("[fd00::5]", 8080)
    for bad in (":80", "h:0", "h:x", "example.com"):
        with pytest.raises(RequestError):
            split_peer(bad)
    # The cloud metadata service and other non-pod addresses: refused before any call.
    for bad in ("169.254.169.254", "169.254.169.254:80", "224.0.0.1", "0.0.0.0", "[fe80::1]"):
        with pytest.raises(RequestError, match="not a pod address"):
            split_peer(bad)


def test_a_background_job_that_fails_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        ctl = Control(config("w0"), options=FAST)

        async def broken() -> None:
            raise RuntimeError("the job broke")

        ctl.spawn(broken())
        await until(lambda: not ctl.tasks, what="the failed job let go")  # held until done

    with caplog.at_level("ERROR", logger="cascade_worker.control.jobs"):
        asyncio.run(scenario())
    assert "background job failed" in caplog.text and "the job broke" in caplog.text
