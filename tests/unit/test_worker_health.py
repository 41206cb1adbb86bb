"""The shared probe/metrics server: routes, readiness lifecycle, drain on stop.

The last test runs the real `cascade-worker` and `cascade-gateway` entry modules as
subprocesses on loopback and sends them SIGTERM.
"""

from __future__ import annotations

import asyncio
import http.server
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from cascade_protocol.load import LoadReport
from cascade_protocol.service import HEALTH_KEY, Health, create_app, new_registry, serve

T = TypeVar("T")
Client = TestClient[web.Request, web.Application]


def with_client(app: web.Application, body: Callable[[Client], Awaitable[T]]) -> T:
    async def run() -> T:
        async with TestClient(TestServer(app)) as client:
            return await body(client)

    return asyncio.run(run())


def test_probes_answer_once_started() -> None:
    async def body(client: Client) -> tuple[int, str, int]:
        health = await client.get("/healthz")
        ready = await client.get("/readyz")
        return health.status, await health.text(), ready.status

    assert with_client(create_app(new_registry()), body) == (200, "ok", 200)


def test_readyz_is_503_before_start_and_while_draining() -> None:
    app = create_app(new_registry())

    async def body(client: Client) -> list[tuple[int, str]]:
        out = []
        for started, draining in ((False, False), (True, True)):
            app[HEALTH_KEY].started = started
            app[HEALTH_KEY].draining = draining
            resp = await client.get("/readyz")
            out.append((resp.status, await resp.text()))
        health = await client.get("/healthz")
        out.append((health.status, await health.text()))
        return out

    assert with_client(app, body) == [(503, "starting"), (503, "draining"), (200, "ok")]


def test_health_ready_property() -> None:
    assert not Health().ready
    assert Health(started=True).ready
    assert not Health(started=True, draining=True).ready


def test_metrics_text_and_openmetrics() -> None:
    async def body(client: Client) -> tuple[str, str, str, str]:
        plain = await client.get("/metrics")
        om = await client.get(
            "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
        )
        return (
            plain.headers["Content-Type"],
            await plain.text(),
            om.headers["Content-Type"],
            await om.text(),
        )

    plain_type, plain, om_type, om = with_client(create_app(new_registry()), body)
    assert plain_type.startswith("text/plain; version=0.0.4")
    assert "process_start_time_seconds" in plain
    assert om_type.startswith("application/openmetrics-text")
    assert om.rstrip().endswith("# EOF")


def test_serve_drains_then_stops() -> None:
    """On stop: readiness turns 503 at once, liveness stays 200, then the listener closes."""

    async def scenario() -> tuple[int, int, int, bool]:
        app = create_app(new_registry())
        stop = asyncio.Event()
        started: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve(app, "127.0.0.1", 0, drain_seconds=0.5, stop=stop, started=started)
        )
        port = await asyncio.wait_for(started, 5)
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/readyz") as resp:
                before = resp.status
            stop.set()
            await asyncio.sleep(0.1)
            async with session.get(f"{base}/readyz") as resp:
                during = resp.status
            async with session.get(f"{base}/healthz") as resp:
                alive = resp.status
        await asyncio.wait_for(task, 5)
        return before, during, alive, task.done()

    assert asyncio.run(scenario()) == (200, 503, 200, True)


def _http_status(url: str) -> int:
    """The status code; 0 when no answer came within 2 s (a loaded machine, a process
    still importing), so a wait for readiness asks again instead of failing."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code
    except (TimeoutError, urllib.error.URLError):
        return 0


def _start(module: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", module, "--port", "0"],
        env={**os.environ, "POD_IP": "127.0.0.1", **env},
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        match = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if match:
            return proc, int(match.group(1))
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"{module} did not start")


class _ReadyBackend(http.server.BaseHTTPRequestHandler):
    """A worker that only answers the gateway's load poll: ready, idle."""

    def do_GET(self) -> None:
        body = LoadReport(instance="w", model="m", ready=True, max_batch=4).model_dump_json()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def ready_backend() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ReadyBackend)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def run_sigterm_scenario(module: str, env: dict[str, str]) -> dict[str, Any]:
    """Start a pod process, SIGTERM it, and observe readiness and the exit."""
    proc, port = _start(module, {"CASCADE_DRAIN_SECONDS": "1.0", **env})
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 10  # the gateway is ready once it has polled a backend
        while (ready_before := _http_status(f"{base}/readyz")) != 200:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        ready_during = _http_status(f"{base}/readyz")
        code = proc.wait(timeout=10)
        return {
            "ready_before": ready_before,
            "ready_during": ready_during,
            "code": code,
            "exit_after": time.monotonic() - sent,
        }
    finally:
        if proc.poll() is None:
            proc.kill()
        assert proc.stderr is not None
        proc.stderr.close()


@pytest.mark.parametrize(
    ("module", "env"),
    [
        ("cascade_worker.main", {"CASCADE_MODEL_URI": "file:///m"}),
        ("cascade_gateway.main", {"CASCADE_MODEL_NAME": "m"}),
    ],
)
def test_pod_process_sigterm_turns_readiness_off_then_exits_cleanly(
    module: str, env: dict[str, str], ready_backend: str
) -> None:
    if module == "cascade_gateway.main":
        env = {**env, "CASCADE_BACKENDS": ready_backend}
    result = run_sigterm_scenario(module, env)
    assert result["ready_before"] == 200
    assert result["ready_during"] == 503
    assert result["code"] == 0
    assert result["exit_after"] < 5
