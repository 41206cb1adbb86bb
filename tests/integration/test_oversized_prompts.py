"""A prompt that cannot fit the context is refused at the gateway, cheaply (issue 34,
item 3).

SmolLM2-135M-Instruct (8,192-token context, longest token 81 bytes) behind one
ModelDeployment. Eight 900 KB prompts in parallel (under the 1 MiB body limit; ~450k
tokens of ordinary text) are each answered 400 `context_length_exceeded` by the gateway
in under 0.2 s, before any worker tokenizes them; an unrelated request sent at the same
time takes at most twice its usual time, and the worker's resident memory afterwards is
within 10 % of what it was before.
"""

from __future__ import annotations

import json
import statistics
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from integration_helpers import Namespace, real_model_served

from cascade_api.constants import WORKER_PORT
from cascade_dev.testing import DevCluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

MD = "long"
PARALLEL = 8
PROMPT = ("The quick brown fox jumps over the lazy dog. " * 20_000)[:900_000]


@pytest.fixture(scope="module")
def served(
    dev_cluster: DevCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Namespace, str]]:
    log_dir = tmp_path_factory.mktemp("oversized")
    with real_model_served(dev_cluster, MD, 1, log_dir, timeout=300) as served:
        yield served


def post(url: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], float]:
    """Status, JSON answer and seconds of one POST."""
    req = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    return status, json.loads(raw), time.perf_counter() - start


def unrelated(url: str) -> float:
    status, _, took = post(
        url, "/v1/completions",
        {"model": MD, "prompt": "Hello", "max_tokens": 8, "temperature": 0, "ignore_eos": True},
    )  # fmt: skip
    assert status == 200
    return took


def worker_rss(ns: Namespace) -> float:
    [pod] = ns.ready_pods(MD)
    ip = pod["status"]["podIP"]
    with urllib.request.urlopen(f"http://{ip}:{WORKER_PORT}/metrics", timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith("process_resident_memory_bytes "):
                return float(line.split()[1])
    raise AssertionError("the worker's /metrics has no process_resident_memory_bytes")


def test_prompts_that_cannot_fit_are_refused_at_the_gateway_in_parallel(
    served: tuple[Namespace, str],
) -> None:
    ns, url = served
    big = {"model": MD, "prompt": PROMPT, "max_tokens": 4}

    def refused_at_gateway() -> bool:  # once the gateway has the worker's token bound
        status, answer, _ = post(url, "/v1/completions", big)
        message = answer["error"]["message"]
        return status == 400 and message.startswith("This model's maximum context length")

    wait_for("the gateway's byte bound", refused_at_gateway, timeout=60)
    usual = statistics.median(unrelated(url) for _ in range(5))
    rss_before = worker_rss(ns)
    with ThreadPoolExecutor(PARALLEL + 1) as pool:
        side = pool.submit(lambda: [unrelated(url) for _ in range(3)])
        answers = list(pool.map(lambda _: post(url, "/v1/completions", big), range(PARALLEL)))
        during = max(side.result())
    chat = post(url, "/v1/chat/completions",
                {"model": MD, "messages": [{"role": "user", "content": PROMPT}]})  # fmt: skip
    times = sorted(took for _, _, took in answers)
    print(
        f"{PARALLEL} x 900 KB refused in {times[0]:.3f}-{times[-1]:.3f} s; unrelated request "
        f"{usual:.3f} s alone, {during:.3f} s during; chat {chat[2]:.3f} s"
    )
    for status, answer, took in [*answers, chat]:
        assert status == 400 and answer["error"]["code"] == "context_length_exceeded"
        assert took < 0.2
    assert during <= 2 * usual
    rss_after = worker_rss(ns)
    print(f"worker RSS {rss_before / 2**20:.0f} -> {rss_after / 2**20:.0f} MiB")
    assert abs(rss_after - rss_before) <= 0.10 * rss_before
