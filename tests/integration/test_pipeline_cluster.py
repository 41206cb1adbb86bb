"""Issue 5 on the local cluster: a 3-process pipeline returns one process's greedy tokens.

The operator runs three worker pods of the example model (each loads and serves it at
start). Pod 0's greedy tokens for a few prompts are the reference. Then over the
workers' control API (pod IPs are reachable from the host): pods 1 and 2 drain and
become pipeline stages [1, 3) and [3, 4) on the pipeline port, pod 0 drains and serves
again as their head over [0, 1). Its greedy tokens equal the reference; after
/v1/control/local (pod 0 holds the whole model) they still do, a request in flight
across the switch included.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from integration_helpers import Namespace, generated, http

from cascade_api.constants import PIPELINE_PORT, WORKER_PORT
from cascade_dev.testing import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

MD = "piped"
PROMPTS = [[5, 9, 14, 200, 17, 3, 8], [90, 91, 92], [7], list(range(20, 60))]
NEW_TOKENS = 24
LONG_TOKENS = 400  # a request still generating when the head switches to local


def body(prompt: list[int], max_tokens: int = NEW_TOKENS, rid: str = "") -> dict[str, Any]:
    params = {"max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True}
    return {"request_id": rid or f"r{time.monotonic_ns()}", "prompt_token_ids": prompt,
            "params": params}  # fmt: skip


def greedy(url: str) -> list[list[int]]:
    return [generated(f"{url}/v1/generate", body(p)) for p in PROMPTS]


def status(url: str) -> dict[str, Any]:
    code, doc = http("GET", f"{url}/v1/status")
    assert code == 200, doc
    return dict(doc)


def post(url: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    code, doc = http("POST", f"{url}{path}", payload or {})
    assert code == 202, (url, path, payload, doc)
    return dict(doc)


def until(what: str, url: str, test: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    wait_for(what, lambda: test(status(url)), timeout=120)
    return status(url)


def test_three_process_pipeline_returns_one_process_tokens(cluster: Namespace) -> None:
    cluster.serve_model(MD, 3)
    ips = [p["status"]["podIP"] for p in cluster.ready_pods(MD)]
    head, *stages = [f"http://{ip}:{WORKER_PORT}" for ip in ips]
    assert status(head)["layers"] == [0, 4]  # the example model has 4 decoder layers

    expected = greedy(head)
    long_expected = generated(f"{head}/v1/generate", body(PROMPTS[0], LONG_TOKENS))
    assert all(len(t) == NEW_TOKENS for t in expected)

    for url, layers in zip(stages, ([1, 3], [3, 4]), strict=True):
        post(url, "/v1/control/drain")
        until("stage drained", url, lambda d: d["engine"] == "off")
        assert post(url, "/v1/control/stage", {"layers": layers})["role"] == "stage"
    addresses = []
    for url, ip, layers in zip(stages, ips[1:], ([1, 3], [3, 4]), strict=True):
        doc = until("stage listening", url, lambda d: bool((d["stage"] or {}).get("address")))
        assert doc["stage"] == {
            "layers": layers,
            "address": f"{ip}:{PIPELINE_PORT}",
            "coveredAt": None,
            "redirected": 0,  # a stage of a cooperative live scale-up's source only
        }
        addresses.append(doc["stage"]["address"])

    post(head, "/v1/control/drain")
    until("head drained", head, lambda d: d["engine"] == "off")
    post(head, "/v1/control/serve", {"layers": [0, 1], "stages": addresses})
    doc = until("head serving", head, lambda d: d["engine"] in ("serving", "failed"))
    assert doc["engine"] == "serving", doc
    assert doc["layers"] == [0, 4]
    assert doc["pipeline"] == {
        "stages": addresses,
        "localLayers": [0, 1],
        "coveredAt": None,
        "servingAt": None,
    }

    piped = greedy(head)
    print(f"one process: {expected}\n3-process pipeline: {piped}")
    assert piped == expected

    # Leave the pipeline while a long request generates: it continues unchanged.
    got: dict[str, list[int]] = {}
    runner = threading.Thread(
        target=lambda: got.update(
            long=generated(f"{head}/v1/generate", body(PROMPTS[0], LONG_TOKENS))
        )
    )
    runner.start()
    wait_for("the long request running", lambda: status(head)["running"] > 0, timeout=30)
    post(head, "/v1/control/local")
    doc = until("head local", head, lambda d: d["pipeline"] is None)
    in_flight = runner.is_alive()
    runner.join(timeout=180)
    assert not runner.is_alive()
    assert doc["engine"] == "serving" and doc["layers"] == [0, 4]
    assert got["long"] == long_expected
    local = greedy(head)
    print(f"after the switch to local (long request in flight: {in_flight}): {local}")
    assert local == expected
    for url in stages:  # the head detached; the stages still listen
        assert status(url)["stage"] is not None
