"""Issue 13, acceptance 5: a replay of 1,000 requests across 1 -> 4 -> 1 loses none.

On the real local cluster, through the gateway: 1,000 completion requests (24 in flight
at a time, prompts of several lengths) while the deployment scales 1 -> 4 after the
first 100 have completed and 4 -> 1 after 700. Every request the gateway accepted must
complete (200, max_tokens tokens, finish "length"); none may fail or vanish. The test
prints how many ran while 2+ instances served.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from integration_helpers import Namespace

from cascade_dev.testing import DevCluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900), pytest.mark.nodes(4)]

MD = "replayed"
REQUESTS = 1000
IN_FLIGHT = 24
MAX_TOKENS = 32
PROMPTS = ["Hello", "The quick brown fox jumps over the lazy dog. " * 4, "Once upon a time " * 12]


async def replay(url: str, ns: Namespace) -> tuple[list[str], int, int]:
    """(failures, requests done while 2+ instances were ready, most instances seen)."""
    failures: list[str] = []
    done = wide = most = 0
    todo = iter(range(REQUESTS))
    scaled_up = scaled_down = False

    async def one(http: aiohttp.ClientSession, i: int) -> None:
        nonlocal done
        body = {"model": MD, "prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": MAX_TOKENS,
                "temperature": 0, "ignore_eos": True}  # fmt: skip
        try:
            async with http.post(f"{url}/v1/completions", json=body) as resp:
                doc = await resp.json(content_type=None)
                choice = (doc.get("choices") or [{}])[0]
                tokens = (doc.get("usage") or {}).get("completion_tokens")
                if resp.status != 200 or choice.get("finish_reason") != "length":
                    failures.append(f"request {i}: {resp.status} {str(doc)[:200]}")
                elif tokens != MAX_TOKENS:
                    failures.append(f"request {i}: {tokens} tokens")
        except (aiohttp.ClientError, TimeoutError) as exc:
            failures.append(f"request {i}: {type(exc).__name__}: {exc}")
        done += 1

    async def client(http: aiohttp.ClientSession) -> None:
        nonlocal scaled_up, scaled_down
        for i in todo:
            await one(http, i)
            if done >= 100 and not scaled_up:
                scaled_up = True
                await asyncio.to_thread(ns.kubectl, "scale", "md", MD, "--replicas=4")
            if done >= 700 and not scaled_down:
                scaled_down = True
                await asyncio.to_thread(ns.kubectl, "scale", "md", MD, "--replicas=1")

    async def watch() -> None:
        nonlocal wide, most
        while done < REQUESTS:
            ready = len(await asyncio.to_thread(ns.ready_pods, MD))
            most = max(most, ready)
            wide += 0 if ready < 2 else 1
            await asyncio.sleep(1.0)

    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        watcher = asyncio.create_task(watch())
        await asyncio.gather(*(client(http) for _ in range(IN_FLIGHT)))
        await watcher
    return failures, wide, most


def test_a_replay_across_one_four_one_loses_no_request(
    cluster: Namespace, dev_cluster: DevCluster
) -> None:
    ns = cluster
    ns.serve_model(MD, 1)
    url = dev_cluster.url(f"{ns.ns}/{MD}-gateway")
    began = time.monotonic()
    failures, wide_s, most = asyncio.run(replay(url, ns))
    took = time.monotonic() - began
    print(f"{REQUESTS} requests in {took:.0f} s; {wide_s} s with 2+ instances, at most {most}")
    assert failures == [], failures[:10]
    assert most == 4  # it did scale out while requests ran
    wait_for("back to 1 instance", lambda: len(ns.worker_pods(MD)) == 1, timeout=180)
