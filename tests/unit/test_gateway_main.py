"""The gateway app without backends: model listing, probes, metrics, load report, 4xx.

SIGTERM handling is shared with the worker and tested for both in test_worker_health.py;
requests against fake workers are in test_gateway_openai.py / test_gateway_dispatch.py.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
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
                if isinstance(payload, bytes):
                    resp = await client.request(method, path, data=payload)
                else:
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
    assert models_body([], 0) == {"object": "list", "data": []}
    [(_, _, body)] = request(replace(CONFIG, model_name=""), [("GET", "/v1/models", None)])
    assert json.loads(body)["data"] == []


def test_bad_requests_are_answered_before_queueing() -> None:
    answers = request(
        CONFIG,
        [
            ("POST", "/v1/completions", b"{not json"),
            ("POST", "/v1/completions", [1, 2]),
            ("POST", "/v1/completions", {"prompt": "hi"}),
            ("POST", "/v1/chat/completions", {"model": "other", "messages": []}),
            ("POST", "/v1/completions", {"model": "tiny-llama", "prompt": "x", "top_p": "1"}),
            ("POST", "/v1/chat/completions", b'{"messages":' * 2000 + b"1" + b"}" * 2000),
        ],
    )
    statuses = [a[0] for a in answers]
    assert statuses == [400, 400, 400, 404, 400, 400]
    errors = [json.loads(a[2])["error"] for a in answers]
    assert errors[0]["message"].startswith("We could not parse the JSON body")
    assert errors[1]["message"] == "The request body must be a JSON object."
    assert errors[2]["param"] == "model"
    assert errors[3] == {
        "message": "The model `other` does not exist or you do not have access to it.",
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }
    assert errors[4]["param"] == "top_p"
    assert "nested more than 64 levels deep" in errors[5]["message"]  # not a 500


def test_no_backend_holds_requests_until_their_deadline() -> None:
    config = replace(CONFIG, request_timeout=0.2)
    answers = request(
        config,
        [
            ("GET", "/healthz", None),
            ("GET", "/readyz", None),
            ("POST", "/v1/completions", {"model": "tiny-llama", "prompt": "hi"}),
            ("GET", "/metrics", None),
        ],
    )
    # Ready without backends (requests are held, the Service must keep sending them).
    assert [a[0] for a in answers] == [200, 200, 503, 200]
    error = json.loads(answers[2][2])["error"]
    assert error["code"] == "no_backend"
    assert error["message"] == (
        "No model server was ready to take the request within 0.2 s: the deployment has "
        "no ready instance (scaled to zero, or its first instance is still starting). "
        "Retry later."
    )
    metrics = answers[-1][2]
    assert 'cascade_gateway_info{deployment="tiny",model="tiny-llama"} 1.0' in metrics
    assert "cascade_gateway_up 1.0" in metrics
    assert (
        'cascade_gateway_requests_total{class="interactive",code="503",'
        'endpoint="/v1/completions"} 1.0' in metrics
    )
    for series in (
        'cascade_gateway_queue_depth{class="batch"} 0.0',
        'cascade_gateway_in_flight{class="interactive"} 0.0',
        "cascade_gateway_backends_ready 0.0",
        'cascade_gateway_queue_wait_seconds_count{class="interactive"} 0.0',
        "cascade_gateway_time_to_first_token_seconds_bucket",
        "cascade_gateway_inter_token_latency_seconds_bucket",
    ):
        assert series in metrics, series


def test_load_report_of_an_idle_gateway() -> None:
    config = replace(CONFIG, backends=("http://127.0.0.1:9",), interactive_queue=5)
    [(status, _, body)] = request(config, [("GET", "/v1/load", None)])
    assert status == 200
    load = json.loads(body)
    assert load["model"] == "tiny-llama" and load["deployment"] == "tiny"
    assert (load["backends_total"], load["backends_ready"], load["draining"]) == (1, 0, False)
    assert load["classes"]["interactive"] == {
        "queued": 0,
        "in_flight": 0,
        "queue_limit": 5,
        "ttft_p50_s": None,
        "ttft_p90_s": None,
        "ttft_p99_s": None,
        "queue_wait_p50_s": None,
        "queue_wait_p90_s": None,
    }
    assert load["backends"][0]["url"] == "http://127.0.0.1:9"
    assert load["backends"][0]["ready"] is False


def test_unknown_route_is_404_and_get_on_post_route_is_405() -> None:
    answers = request(CONFIG, [("GET", "/v2/nothing", None), ("GET", "/v1/completions", None)])
    assert [a[0] for a in answers] == [404, 405]


def test_slo_attainment_counts_only_first_tokens_within_the_class_slo() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from cascade_gateway.metrics import register_metrics
    from cascade_protocol.generate import RequestClass

    registry = CollectorRegistry()
    config = replace(CONFIG, interactive_ttft_slo_ms=500, batch_ttft_slo_ms=60_000)
    metrics = register_metrics(registry, config)
    for seconds in (0.1, 0.5, 0.6, 3.0):
        metrics.observe_ttft(RequestClass.INTERACTIVE, 0.0, seconds)
    metrics.observe_ttft(RequestClass.BATCH, 0.0, 30.0)
    text = generate_latest(registry).decode()
    assert 'cascade_gateway_ttft_slo_met_total{class="interactive"} 2.0' in text
    assert 'cascade_gateway_ttft_slo_met_total{class="batch"} 1.0' in text
    assert 'cascade_gateway_time_to_first_token_seconds_count{class="interactive"} 4.0' in text
