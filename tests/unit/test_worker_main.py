"""The worker process: status, metrics, and a clean exit on SIGTERM."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

import pytest
from aiohttp.test_utils import TestClient, TestServer

from cascade_protocol.status import WorkerStatus
from cascade_worker import main
from cascade_worker.config import WorkerConfig
from cascade_worker.main import build_app

CONFIG = WorkerConfig(
    host="127.0.0.1",
    port=0,
    model_uri="file:///models/tiny-llama",
    deployment="tiny",
    pod_name="tiny-w-0",
    drain_seconds=0.0,
)


def get(path: str) -> tuple[int, str]:
    async def run() -> tuple[int, str]:
        async with TestClient(TestServer(build_app(CONFIG))) as client:
            resp = await client.get(path)
            return resp.status, await resp.text()

    return asyncio.run(run())


def test_status_reports_identity_and_idle_phase() -> None:
    status, body = get("/v1/status")
    assert status == 200
    doc = json.loads(body)
    startup = doc.pop("startup")
    assert doc.pop("rssBytes") > 10 << 20  # a Python process with aiohttp: tens of MB
    # Its start-up so far: the process stage only (nothing loaded, no engine).
    assert set(startup["stages"]) == {"process"} and startup["stages"]["process"] >= 0
    assert startup["processStartedAt"] <= time.time() and startup["readyAt"] is None
    assert doc == {
        "pod": "tiny-w-0",
        "modelUri": "file:///models/tiny-llama",
        "dataPort": 18515,
        "role": "instance",
        "phase": "idle",
        "modelDigest": None,
        "blocksLoaded": 0,
        "blocksTotal": 0,
        "bytesReceived": 0,
        "storeBytes": 0,
        "error": None,
        "failures": 0,
        "failedAt": None,
        "lastTransfer": None,
        "firstByteAt": None,
        "lastLoad": None,
        "serving": False,
        "draining": False,
        "engine": "off",
        "engineError": None,
        "maxBatch": 0,
        "maxModelLen": 0,
        "running": 0,
        "waiting": 0,
        "layers": None,
        "pipeline": None,
        "stage": None,
        "mode": "idle",
        "materialization": None,  # no engine start yet
    }
    # The shared model reads it back whole (the operator's side of the wire).
    got = WorkerStatus.model_validate_json(body)
    assert got.startup is not None
    assert got.model_copy(update={"startup": None, "rss_bytes": 0}) == WorkerStatus(
        pod="tiny-w-0", model_uri="file:///models/tiny-llama", data_port=18515
    )


def test_metrics_carry_worker_series() -> None:
    status, body = get("/metrics")
    assert status == 200
    assert 'cascade_worker_info{deployment="tiny",model="file:///models/tiny-llama"} 1.0' in body
    assert "cascade_worker_up 1.0" in body
    assert "process_start_time_seconds" in body


def test_two_apps_in_one_process_do_not_clash() -> None:
    # Each app owns its registry: building twice must not raise "Duplicated timeseries".
    build_app(CONFIG)
    build_app(CONFIG)


def test_warm_imports_only_logs_a_missing_piece(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A build without ucxx or the engine still starts; the order that needs it fails.
    def missing() -> None:
        raise ImportError("No module named 'ucxx'")

    monkeypatch.setattr(main, "import_transfer_path", missing)
    main.warm_imports()
    assert "preloading the transfer path and engine failed" in caplog.text


def test_start_up_imports_stay_light() -> None:
    # The control API listens before the heavy pieces load (they are warmed on a thread
    # afterwards): under a node's CPU quota every start-up import delays the first order.
    code = (
        "import sys, cascade_worker.main; "
        "print(sorted(m for m in ('torch', 'ucxx', 'networkx', 'cascade_planner') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
