"""The worker process: status, metrics, and a clean exit on SIGTERM."""

from __future__ import annotations

import asyncio
import json

from aiohttp.test_utils import TestClient, TestServer

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
    assert json.loads(body) == {
        "pod": "tiny-w-0",
        "model_uri": "file:///models/tiny-llama",
        "data_port": 18515,
        "phase": "idle",
        "model_digest": None,
        "blocks_loaded": 0,
        "blocks_total": 0,
        "bytes_received": 0,
        "error": None,
        "last_transfer": None,
        "serving": False,
        "draining": False,
        "engine": "off",
        "engine_error": None,
        "max_batch": 0,
        "max_model_len": 0,
        "running": 0,
        "waiting": 0,
        "layers": None,
        "pipeline": None,
        "stage": None,
    }


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
