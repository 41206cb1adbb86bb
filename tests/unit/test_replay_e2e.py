"""The replay against a fake OpenAI streaming server on loopback, and the CLI.

The fake server streams one chunk per token with a fixed first-token delay and spacing,
so TTFT and ITL have known lower bounds; some output lengths select failures: 7 is always
rejected (429), 8 is rejected on its first attempt only, 9 answers 500, 11 fails
mid-stream, 13 never answers.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from cascade_bench.replay.client import ClientOptions, replay
from cascade_bench.replay.prompts import TokenRange, prompt_ids
from cascade_bench.replay.run import ReplayConfig, run_sync
from cascade_bench.replay.scale import Scaling, schedule
from cascade_bench.replay.trace import load_trace
from cascade_cli.main import main

pytestmark = pytest.mark.timeout(60)

FIRST_S = 0.1  # delay before the first token
GAP_S = 0.03  # between tokens
REAL_TRACE = Path(__file__).resolve().parents[2] / "../shared/traces/azure_llm_code_2023.csv"


@dataclass
class Fake:
    url: str = ""
    seen: list[dict[str, Any]] = field(default_factory=list)  # body, headers, arrival
    attempts: dict[str, int] = field(default_factory=dict)


FAKE = web.AppKey("fake", Fake)


async def _completions(request: web.Request) -> web.StreamResponse:
    fake = request.app[FAKE]
    body = await request.json()
    fake.seen.append({"body": body, "headers": dict(request.headers), "t": time.monotonic()})
    n = body["max_tokens"]
    key = json.dumps(body["prompt"])
    fake.attempts[key] = fake.attempts.get(key, 0) + 1
    if n == 7 or (n == 8 and fake.attempts[key] == 1):
        return web.json_response(
            {"error": {"message": "busy", "code": 429}}, status=429, headers={"Retry-After": "0"}
        )
    if n == 9:
        return web.json_response({"error": {"message": "boom"}}, status=500)
    if n == 13:
        await asyncio.sleep(30)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await asyncio.sleep(FIRST_S)
    for i in range(n):
        if i:
            await asyncio.sleep(GAP_S)
        if n == 11 and i == 2:
            await resp.write(b'data: {"error": {"message": "engine died", "code": 500}}\n\n')
            return resp
        await resp.write(b'data: {"choices": [{"index": 0, "text": "x"}]}\n\n')
    usage = {"prompt_tokens": len(body["prompt"]), "completion_tokens": n}
    await resp.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
    await resp.write(b"data: [DONE]\n\n")
    return resp


async def _models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": "fake-model"}]})


@pytest.fixture
def fake() -> Iterator[Fake]:
    """The fake server in its own thread and loop, so the code under test owns its loop."""
    state, ready, stop = Fake(), threading.Event(), threading.Event()
    loop = asyncio.new_event_loop()

    async def serve() -> None:
        app = web.Application()
        app[FAKE] = state
        app.router.add_post("/v1/completions", _completions)
        app.router.add_get("/v1/models", _models)
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        state.url = f"http://127.0.0.1:{port}"
        ready.set()
        while not stop.is_set():
            await asyncio.sleep(0.02)
        await runner.cleanup()
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in rest:
            t.cancel()
        await asyncio.gather(*rest, return_exceptions=True)

    thread = threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield state
    stop.set()
    thread.join(10)
    loop.close()


def write_trace(path: Path, outputs: list[int], gap_s: float = 0.05) -> Path:
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for i, n in enumerate(outputs):
        lines.append(f"2023-11-16 18:17:{i * gap_s:010.7f},100,{n}")
    path.write_text("\n".join(lines) + "\n")
    return path


def config(trace: Path, url: str, **kw: Any) -> ReplayConfig:
    scaling = Scaling(context_scale=0.1, batch_fraction=0.5, seed=3)
    return replace(ReplayConfig(trace, url, scaling=scaling, progress=False), **kw)


def test_replay_measures_ttft_itl_and_counts_failures(fake: Fake, tmp_path: Path) -> None:
    outputs = [5, 7, 6, 9, 11, 8, 4, 6, 5, 13]
    trace = write_trace(tmp_path / "t.csv", outputs)
    doc = run_sync(config(trace, fake.url, timeout_s=1.0, per_request=True))

    a = doc["classes"]["all"]
    assert doc["requests"] == doc["sent"] == a["requests"] == 10
    assert doc["target"]["model"] == "fake-model"  # from /v1/models
    assert (a["completed"], a["rejected_429"], a["errors"]) == (5, 2, 3)  # 7, 8 / 9, 11, 13
    assert a["error_kinds"] == {"http 500": 1, "stream": 1, "timeout": 1}
    assert a["output_tokens"] == 5 + 6 + 4 + 6 + 5  # from usage
    assert a["prompt_tokens"] == 5 * 10  # round(100 x 0.1)

    # Timing: TTFT is at least the server's first-token delay, ITL close to its spacing.
    assert FIRST_S <= a["ttft_s"]["p50"] < FIRST_S + 0.3
    assert GAP_S * 0.8 <= a["itl_s"]["p50"] < GAP_S + 0.05
    assert a["e2e_s"]["max"] >= FIRST_S + 5 * GAP_S
    assert a["slo"]["met"] == 5 and a["slo"]["attainment"] == pytest.approx(0.5)
    i, b = doc["classes"]["interactive"], doc["classes"]["batch"]
    assert i["requests"] + b["requests"] == 10
    assert b["requests"] == doc["scaling"]["class_counts"]["batch"] > 0

    # Open loop: all ten left on schedule (50 ms apart) though each takes > 200 ms.
    arrivals = sorted(s["t"] for s in fake.seen)
    assert arrivals[-1] - arrivals[0] < 0.45 + 0.3
    assert doc["send_lag_s"]["max"] < 0.25

    # The class travels in the body, for batch requests only; prompts are exact.
    sent_class = {
        json.dumps(s["body"]["prompt"]): s["body"].get("request_class", "interactive")
        for s in fake.seen
    }
    for r in doc["records"]:
        ids = prompt_ids(r["index"], 10, TokenRange(), seed=3)
        assert sent_class[json.dumps(ids)] == r["class"]
    timeout = next(r for r in doc["records"] if r["max_tokens"] == 13)
    assert timeout["error"].startswith("timeout")


def test_retry_429_on_request(fake: Fake, tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.csv", [8, 7])
    cfg = config(trace, fake.url, model="m", retry_429=2, per_request=True)
    doc = run_sync(replace(cfg, scaling=replace(cfg.scaling, batch_fraction=0.0)))
    by_len = {r["max_tokens"]: r for r in doc["records"]}
    assert by_len[8]["attempts"] == 2 and by_len[8]["error"] is None
    assert by_len[7]["attempts"] == 3 and by_len[7]["rejected"]
    assert doc["classes"]["all"]["rejected_429"] == 1
    assert all("request_class" not in s["body"] for s in fake.seen)


def test_stop_keeps_what_was_measured(fake: Fake, tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.csv", [5, 200, 5], gap_s=1.0)
    plan = schedule(load_trace(trace), Scaling(batch_fraction=0))

    async def go() -> Any:
        task = asyncio.create_task(replay(plan, ClientOptions(fake.url, "m")))
        await asyncio.sleep(1.4)  # the first done, the second streaming, the third unsent
        task.cancel()
        return await task

    res = asyncio.run(go())
    assert res.interrupted
    assert [r.index for r in res.records] == [0, 1]
    first, second = res.records
    assert first.ok and first.output_tokens == 5
    assert second.error == "interrupted: replay stopped" and len(second.token_times) > 3


def test_cli_writes_report_and_json(fake: Fake, tmp_path: Path, capsys: Any) -> None:
    trace = write_trace(tmp_path / "t.csv", [3, 7, 4])
    out = tmp_path / "out" / "r.json"
    argv = ["bench", "replay", "--trace", str(trace), "--url", fake.url, "--model", "m"]
    flags = ["--class-via", "header", "--batch-fraction", "0.5", "--seed", "4"]  # 1 and 2 batch
    assert main([*argv, "--json", str(out), "--no-progress", *flags]) == 0
    text = capsys.readouterr().out
    assert "replay: t.csv: 3 of 3 requests" in text and "round(ContextTokens x 0.1)" in text
    outcome = next(line.split() for line in text.splitlines() if line.startswith("all "))
    assert outcome[1:5] == ["3", "2", "1", "0"]  # requests, completed, 429, errors
    doc = json.loads(out.read_text())
    assert set(doc["classes"]) == {"interactive", "batch", "all"}
    assert doc["scaling"]["prompt_tokens"]["scale"] == 0.1
    assert doc["target"]["class_via"] == "header"
    headers = [s["headers"].get("X-Request-Class") for s in fake.seen]
    assert headers.count("batch") == doc["classes"]["batch"]["requests"] == 2
    assert all("request_class" not in s["body"] for s in fake.seen)


def test_cli_refuses_bad_input(tmp_path: Path, capsys: Any) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-01-01 00:00:00,1,x\n")
    assert main(["bench", "replay", "--trace", str(trace), "--dry-run"]) == 1
    assert f"{trace}:2: GeneratedTokens is not an integer" in capsys.readouterr().err
    assert main(["bench", "replay", "--trace", str(trace)]) == 1
    assert "--url is required" in capsys.readouterr().err


@pytest.mark.skipif(not REAL_TRACE.exists(), reason="the shared trace is not beside the repo")
def test_cli_dry_run_on_the_azure_trace(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "dry.json"
    argv = ["bench", "replay", "--trace", str(REAL_TRACE), "--dry-run", "--json", str(out)]
    assert main([*argv, "--start-s", "600", "--duration-s", "300", "--speedup", "2"]) == 0
    text = capsys.readouterr().out
    assert "of 8819 requests (trace time 600-900 s)" in text and "dry run: nothing sent" in text
    doc = json.loads(out.read_text())
    assert doc["dry_run"] and doc["trace"]["requests"] == 8819
    assert doc["scaling"]["schedule_span_s"] <= 150
    assert doc["requests"] == sum(doc["scaling"]["class_counts"].values()) > 0


def test_cli_dry_run_of_an_empty_window(tmp_path: Path, capsys: Any) -> None:
    trace = write_trace(tmp_path / "t.csv", [3, 4])
    assert main(["bench", "replay", "--trace", str(trace), "--dry-run", "--start-s", "60"]) == 0
    text = capsys.readouterr().out
    assert "0 of 2 requests" in text and "nothing to send" in text
