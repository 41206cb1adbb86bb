"""A worker with the deployment's peer token refuses every control and generate request
without it (401) or with another (403), changes nothing, and counts the refusals; the
probes, metrics and status stay open."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from cascade_protocol.peer_auth import PeerKey, bearer_headers, new_token
from cascade_worker.access.refusals import HTTP, REFUSED
from cascade_worker.config import WorkerConfig
from cascade_worker.main import build_app

TOKEN = new_token()
GUARDED = [
    ("POST", "/v1/control/load", {}),
    ("POST", "/v1/control/transfer", {}),
    ("POST", "/v1/control/fetch", {"peer": "169.254.169.254"}),
    ("GET", "/v1/control/manifest", None),
    ("POST", "/v1/control/serve", {}),
    ("POST", "/v1/control/drain", {}),
    ("POST", "/v1/control/stage", {"layers": [0, 1]}),
    ("POST", "/v1/control/local", {}),
    ("POST", "/v1/generate", {"prompt": [1, 2], "max_tokens": 2}),
    ("GET", "/v1/load", None),
]


GENERATE = new_token()  # the gateway's: generate and load, never control


def config(key: PeerKey | None) -> WorkerConfig:
    return WorkerConfig(
        host="127.0.0.1", port=0, model_uri="", deployment="d", pod_name="w-0",
        drain_seconds=0.0, data_port=0, pipeline_port=0, peer_key=key,
        generate_key=PeerKey(GENERATE) if key is not None else None,
    )  # fmt: skip


async def call(
    http: ClientSession, base: str, method: str, path: str, body: Any, headers: dict[str, str]
) -> tuple[int, Any]:
    async with http.request(method, base + path, json=body, headers=headers) as resp:
        return resp.status, await resp.json(content_type=None) if resp.status != 200 else None


def test_requests_without_the_token_are_refused_and_change_nothing() -> None:
    async def go() -> None:
        server = TestServer(build_app(config(PeerKey(TOKEN))), host="127.0.0.1")
        await server.start_server()
        base = f"http://127.0.0.1:{server.port}"
        counted = REFUSED.total(HTTP)
        try:
            async with ClientSession() as http:
                before = await (await http.get(base + "/v1/status")).json()
                for method, path, body in GUARDED:
                    status, doc = await call(http, base, method, path, body, {})
                    assert status == 401, (path, status, doc)
                    assert path in doc["error"]
                    wrong = bearer_headers(new_token())
                    status, doc = await call(http, base, method, path, body, wrong)
                    assert status == 403, (path, status, doc)
                    assert "wrong credentials" in doc["error"]
                after = await (await http.get(base + "/v1/status")).json()
                for field in ("phase", "engine", "blocksLoaded", "mode"):
                    assert after.get(field) == before.get(field), field
                # The gateway's token opens generate and load, not the control API.
                gateway = bearer_headers(GENERATE)
                for method, path, body in GUARDED:
                    status, _ = await call(http, base, method, path, body, gateway)
                    control = path.startswith("/v1/control/")
                    assert (status == 403) is control, (path, status)
                # The token opens the door (the handler answers, here: nothing to show).
                ok = bearer_headers(TOKEN)
                status, _ = await call(http, base, "GET", "/v1/control/manifest", None, ok)
                assert status == 409
                for path in ("/healthz", "/metrics", "/v1/status"):
                    async with http.get(base + path) as resp:
                        assert resp.status != 401, path
                metrics = await (await http.get(base + "/metrics")).text()
            controls = sum(p.startswith("/v1/control/") for _, p, _ in GUARDED)
            assert REFUSED.total(HTTP) - counted == 2 * len(GUARDED) + controls
            assert (
                'cascade_worker_peers_refused_total{reason="wrong_credentials",surface="http"}'
                in (metrics)
            )
        finally:
            await server.close()

    asyncio.run(go())


def test_a_worker_without_a_token_is_open() -> None:
    async def go() -> None:
        server = TestServer(build_app(config(None)), host="127.0.0.1")
        await server.start_server()
        try:
            async with ClientSession() as http:
                url = f"http://127.0.0.1:{server.port}/v1/control/manifest"
                async with http.get(url) as resp:
                    assert resp.status == 409  # no model, but not refused
        finally:
            await server.close()

    asyncio.run(go())
