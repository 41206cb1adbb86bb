"""The gateway process: model listing, 503 for inference routes, metrics.

SIGTERM handling is shared with the worker and tested for both in test_worker_health.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from cascade_gateway.config import GatewayConfig
from cascade_gateway.main import build_app, models_body

CONFIG = GatewayConfig(
    host="127.0.0.1", port=0, model_name="tiny-llama", deployment="tiny", drain_seconds=0.0
)


def request(config: GatewayConfig, calls: list[tuple[str, str, Any]]) -> list[tuple[int, str, str]]:
    async def run() -> list[tuple[int, str, str]]:
        out = []
        async with TestClient(TestServer(build_app(config, created=1700000000))) as client:
            for method, path, payload in calls:
                resp = await client.request(method, path, json=payload)
                out.append((resp.status, resp.content_type, await resp.text()))
        return out

    return asyncio.run(run())


def test_models_lists_the_served_model() -> None:
    [(status, ctype, body)] = request(CONFIG, [("GET", "/v1/models", None)])
    assert (status, ctype) == (200, "application/json")
    assert json.loads(body) == {
        "object": "list",
        "data": [
            {"id": "tiny-llama", "object": "model", "created": 1700000000, "owned_by": "cascade"}
        ],
    }


def test_models_is_empty_without_a_model_name() -> None:
    assert models_body("", 0) == {"object": "list", "data": []}


def test_inference_routes_are_503_with_openai_error() -> None:
    completion = {"model": "tiny-llama", "prompt": "hi"}
    chat = {"model": "tiny-llama", "messages": [{"role": "user", "content": "hi"}]}
    answers = request(
        CONFIG,
        [("POST", "/v1/completions", completion), ("POST", "/v1/chat/completions", chat)],
    )
    for status, ctype, body in answers:
        assert (status, ctype) == (503, "application/json")
        error = json.loads(body)["error"]
        assert error["type"] == "service_unavailable"
        assert error["message"].startswith("inference engine not available yet")
        assert error["code"] == "engine_unavailable"


def test_probes_and_metrics() -> None:
    answers = request(
        CONFIG,
        [
            ("GET", "/healthz", None),
            ("GET", "/readyz", None),
            ("POST", "/v1/completions", {}),
            ("GET", "/metrics", None),
        ],
    )
    assert [a[0] for a in answers] == [200, 200, 503, 200]
    metrics = answers[-1][2]
    assert 'cascade_gateway_info{deployment="tiny",model="tiny-llama"} 1.0' in metrics
    assert "cascade_gateway_up 1.0" in metrics
    assert 'cascade_gateway_requests_total{code="503",endpoint="/v1/completions"} 1.0' in metrics


def test_unknown_route_is_404_and_get_on_post_route_is_405() -> None:
    answers = request(CONFIG, [("GET", "/v2/nothing", None), ("GET", "/v1/completions", None)])
    assert [a[0] for a in answers] == [404, 405]
