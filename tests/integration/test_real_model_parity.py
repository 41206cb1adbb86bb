"""The real model through the gateway computes what transformers computes.

SmolLM2-135M-Instruct (tests/real_model.py) served by one ModelDeployment: every prompt
of the reference set, as a chat (the worker renders the model's own template) and as a
completion, streamed and not, greedy, 64 tokens: the gateway's text equals transformers'
generate on the same converted checkpoint. Then the same requests again while the
deployment scales 1 -> 3 live: the new pods receive the weights along a chain paced to
RATE_MBIT, form an execution pipeline with the source as their blocks arrive, switch to
local execution (KV recomputed) when they hold the model and hand streams back to the
gateway, which resumes them elsewhere. Each of those requests must still return exactly
the reference text; the test asserts that requests did cross a pipeline and a migrated
stream (gateway metrics), so the comparison covers those paths, not just local serving.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from integration_helpers import (
    Namespace,
    model_deployment,
    namespace_with_operator,
    worker_statuses,
)
from real_model import NEW_TOKENS, Reference, ensure_real_model, references

from cascade_dev.testing import DevCluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

MD = "smol"
RATE_MBIT = 120  # 257 MiB at 15 MB/s a hop: ~18 s of transfer, long enough to serve in
BLOCKS = 6  # five layers a block: the first target heads a pipeline after half the model


@pytest.fixture(scope="module")
def served(
    dev_cluster: DevCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Namespace, str]]:
    model = ensure_real_model()
    references()  # the transformers run, before the cluster's pods compete for the cores
    log_dir = tmp_path_factory.mktemp("parity")
    with namespace_with_operator(dev_cluster, "cascade-parity", log_dir) as ns:
        manifest = model_deployment(
            MD,
            1,
            model=model,
            multicast={"strategy": "chain", "blocks": BLOCKS, "rateMbit": RATE_MBIT},
            liveScaling={"enabled": True},
        )
        ns.kubectl("apply", "--validate=false", "-f", "-", stdin=json.dumps(manifest))
        ns.wait_ready(MD, 1, 300)
        url = ""

        def gateway_up() -> bool:
            nonlocal url
            try:
                url = dev_cluster.url(f"{ns.ns}/{MD}-gateway")
            except AssertionError:
                return False
            return True

        wait_for("the gateway's endpoint", gateway_up, timeout=120)
        yield ns, url
        print((log_dir / "operator.log").read_text()[-3000:])


def body(ref: Reference, stream: bool) -> tuple[str, dict[str, Any]]:
    common = {
        "model": MD, "max_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True,
        "stream": stream,
    }  # fmt: skip
    if ref.kind == "chat":
        return "/v1/chat/completions", {
            **common, "messages": [{"role": "user", "content": ref.prompt}]
        }  # fmt: skip
    return "/v1/completions", {**common, "prompt": ref.prompt}


async def ask(session: aiohttp.ClientSession, url: str, ref: Reference, stream: bool) -> str:
    """The text the gateway returns (a stream's deltas joined); raises on any failure."""
    path, doc = body(ref, stream)
    async with session.post(url + path, json=doc) as resp:
        if resp.status != 200:
            raise AssertionError(f"{path}: HTTP {resp.status}: {await resp.text()}")
        if not stream:
            out = await resp.json()
            choice = out["choices"][0]
            assert out["usage"]["completion_tokens"] == NEW_TOKENS, out["usage"]
            assert choice["finish_reason"] == "length", choice
            return str(choice["message"]["content"] if ref.kind == "chat" else choice["text"])
        parts: list[str] = []
        finish = None
        async for raw in resp.content:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choice = json.loads(line[6:])["choices"][0]
            delta = choice["delta"].get("content") if ref.kind == "chat" else choice["text"]
            parts.append(delta or "")
            finish = choice.get("finish_reason") or finish
        assert finish == "length", finish
        return "".join(parts)


async def ask_all(url: str, every_s: float) -> dict[tuple[int, bool], str | Exception]:
    """Every reference, non-streamed and streamed, one started each `every_s`."""
    cases = [(i, stream) for stream in (False, True) for i in range(len(references()))]
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(timeout=timeout) as session:

        async def one(i: int, stream: bool) -> str | Exception:
            try:
                return await ask(session, url, references()[i], stream)
            except Exception as exc:  # reported with the case, all cases still run
                return exc

        tasks = []
        for i, stream in cases:
            tasks.append(asyncio.create_task(one(i, stream)))
            await asyncio.sleep(every_s)
        results = await asyncio.gather(*tasks)
    return dict(zip(cases, results, strict=True))


def mismatches(results: dict[tuple[int, bool], str | Exception]) -> list[str]:
    refs = references()
    return [
        f"{refs[i].kind} {refs[i].prompt!r} stream={stream}: {got!r} != {refs[i].text!r}"
        for (i, stream), got in results.items()
        if got != refs[i].text
    ]


def metric(url: str, name: str) -> float:
    """The sum of a gateway counter's samples (every label set)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and not line.startswith("#")
    )


def worker_modes(ns: Namespace) -> dict[str, tuple[str, int, int, int]]:
    """pod -> (mode, running, blocks loaded, blocks total) from each worker's status."""
    return {
        pod: (doc["mode"], doc["running"], doc["blocksLoaded"], doc["blocksTotal"])
        for pod, doc in worker_statuses(ns, MD).items()
    }


def test_a_single_instance_returns_transformers_text(served: tuple[Namespace, str]) -> None:
    _, url = served
    results = asyncio.run(ask_all(url, 0.0))
    assert len(results) == 2 * len(references()) >= 32
    assert mismatches(results) == []


def test_requests_across_a_live_scale_up_return_transformers_text(
    served: tuple[Namespace, str],
) -> None:
    ns, url = served
    migrated_before = metric(url, "cascade_gateway_migrations_total")
    seen: list[tuple[float, dict[str, tuple[str, int, int, int]]]] = []

    async def scale_and_ask() -> dict[tuple[int, bool], str | Exception]:
        await asyncio.to_thread(ns.kubectl, "scale", f"md/{MD}", "--replicas=3")
        t0 = time.monotonic()
        work = asyncio.ensure_future(ask_all(url, 0.5))
        while not work.done():
            seen.append((time.monotonic() - t0, await asyncio.to_thread(worker_modes, ns)))
            await asyncio.sleep(0.3)
        return await work

    results = asyncio.run(scale_and_ask())
    for at, modes in seen:
        print(f"{at:6.1f}s {modes}")
    assert mismatches(results) == []
    heads = [
        pod
        for _, modes in seen
        for pod, (mode, running, _, _) in modes.items()
        if mode == "head" and running > 0
    ]
    assert heads, "no request ran on an execution pipeline during the scale-up"
    wait_for(
        "3 workers serving alone",
        lambda: [m[0] for m in worker_modes(ns).values()] == ["local"] * 3,
        timeout=300,
    )
    migrated = metric(url, "cascade_gateway_migrations_total") - migrated_before
    print(f"pipeline heads seen serving: {sorted(set(heads))}; streams migrated: {migrated}")
    assert migrated > 0, "no stream was handed back and resumed during the switch to local"
