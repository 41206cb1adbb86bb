"""Serving on the worker app: serve/drain control routes, status, readiness, metrics,
serve-on-start, shutdown drain, and the default engine factory's guard."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest
from serving_harness import Factory, FakeStore, request, run, worker

from cascade_worker.checkpoints.checkpoint import write_checkpoint
from cascade_worker.checkpoints.spec import ModelSpec
from cascade_worker.engine.options import EngineOptions
from cascade_worker.serving.factory import EngineUnavailable, default_engine_factory


def test_serve_then_drain_flips_status_and_readiness() -> None:
    async def go() -> None:
        async with worker(max_batch=8, max_model_len=256, device="cpu") as w:
            assert (await w.call("GET", "/readyz"))[0] == 200  # never asked to serve
            doc = await w.status()
            assert (doc["serving"], doc["draining"], doc["engine"]) == (False, False, "off")
            w.hold_model()
            status, body = await w.call("POST", "/v1/control/serve", {"maxBatch": 2})
            assert status == 202 and body["action"] == "serve"
            doc = await w.wait_engine("serving")
            assert doc["serving"] is True and doc["maxBatch"] == 2
            assert (doc["running"], doc["waiting"], doc["layers"]) == (0, 0, [0, 4])
            assert w.factory.options == [
                EngineOptions(max_batch=2, max_model_len=256, device="cpu")
            ]
            assert (await w.call("GET", "/readyz")) == (200, "ok")
            status, body = await w.call("POST", "/v1/control/drain", {"timeoutS": 1})
            assert status == 202 and body["action"] == "drain"
            doc = await w.wait_engine("off")
            assert doc["serving"] is False
            status, text = await w.call("GET", "/readyz")
            assert status == 503 and "engine off" in text
            # Drained, it can serve again.
            await w.serve()
            assert (await w.call("GET", "/readyz"))[0] == 200

    run(go)


def test_serve_refusals(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")

    async def go() -> None:
        async with worker() as w:
            status, body = await w.call("POST", "/v1/control/serve", {})
            assert status == 409 and "no complete model" in body["error"]
            w.hold_model(FakeStore(whole=False))
            assert (await w.call("POST", "/v1/control/serve", {}))[0] == 409
            w.hold_model()
            status, body = await w.call("POST", "/v1/control/serve", {"layers": [0, 2]})
            assert status == 409 and "stage" in body["error"]
            status, body = await w.call("POST", "/v1/control/serve", {"layers": [3, 9]})
            assert status == 400 and body["error"].startswith("layers:")
            status, body = await w.call("POST", "/v1/control/serve", {"maxBatch": 0})
            assert (status == 400 and "maxBatch" in body["error"]) or "max_batch" in body["error"]
            status, body = await w.call("POST", "/v1/control/serve", {"bogus": 1})
            assert status == 400
            status, body = await w.call("POST", "/v1/control/drain", {})
            assert status == 409 and "not serving" in body["error"]
            await w.serve({"layers": [0, 4]})
            status, body = await w.call("POST", "/v1/control/serve", {})
            assert status == 409 and "drain it first" in body["error"]
            # Replacing the served model is refused until drained.
            status, body = await w.call("POST", "/v1/control/load", {"modelPath": str(tmp_path)})
            assert status == 409 and "serving" in body["error"]
            status, body = await w.call("POST", "/v1/control/fetch", {"peer": "127.0.0.1:1"})
            assert status == 409 and "serving" in body["error"]

    run(go)


def test_a_refused_load_is_a_failed_job_in_status_counted_in_a_row(tmp_path: Path) -> None:
    """The operator reads `failures` and `failedAt` to back off its load orders, and
    Degraded shows `error`: a path that is no model answers 400 and says so there too."""

    async def go() -> None:
        async with worker(Factory()) as w:
            for n in (1, 2):
                status, body = await w.call("POST", "/v1/control/load", {"modelPath": "/etc"})
                assert status == 400 and "not a model directory" in body["error"]
                doc = await w.status()
                assert doc["phase"] == "failed" and "/etc is not a model directory" in doc["error"]
                assert doc["failures"] == n and doc["failedAt"] > 0
            # A malformed order is the caller's mistake, not a failed job.
            status, _ = await w.call("POST", "/v1/control/load", {"modelPath": "/etc", "blocks": 0})
            assert status == 400 and (await w.status())["failures"] == 2

    run(go)


def test_factory_failure_shows_in_status_and_readiness() -> None:
    async def go() -> None:
        factory = Factory()
        factory.fail = RuntimeError("no GPU here")
        async with worker(factory) as w:
            w.hold_model()
            assert (await w.call("POST", "/v1/control/serve", {}))[0] == 202
            doc = await w.wait_engine("failed")
            assert "no GPU here" in doc["engineError"]
            status, text = await w.call("GET", "/readyz")
            assert status == 503 and "no GPU here" in text
            factory.fail = None
            await w.serve()  # a retry may succeed

    run(go)


def test_a_dead_engine_is_not_ready_and_can_be_drained_and_replaced() -> None:
    async def go() -> None:
        async with worker() as w:
            await w.serve()

            def broken() -> bool:
                raise RuntimeError("engine thread exploded")

            w.factory.core.has_work = broken
            status, lines = await w.generate(request("r1"))
            assert lines[-1]["finish_reason"] == "error"
            doc = await w.wait_engine("failed")
            assert "exploded" in doc["engineError"]
            status, text = await w.call("GET", "/readyz")
            assert status == 503 and "exploded" in text
            assert (await w.call("POST", "/v1/control/drain", {}))[0] == 202
            await w.wait_engine("off")
            await w.serve()
            assert (await w.generate(request("r2")))[1][-1]["finish_reason"] == "length"

    run(go)


def test_metrics_after_a_few_requests() -> None:
    async def go() -> None:
        async with worker(Factory(step_s=0.002)) as w:
            await w.serve()
            for i in range(3):
                await w.generate(request(f"r{i}", max_tokens=4))
            status, text = await w.call("GET", "/metrics")
            assert status == 200

            def value(series: str) -> float:
                match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
                assert match, series
                return float(match[1])

            assert value("cascade_worker_generated_tokens_total") == 12
            assert value("cascade_worker_prompt_tokens_total") == 6
            assert value('cascade_worker_requests_total{finish_reason="length"}') == 3
            assert value("cascade_worker_time_to_first_token_seconds_count") == 3
            assert value("cascade_worker_inter_token_latency_seconds_count") == 9
            assert 0 < value("cascade_worker_inter_token_latency_seconds_sum") < 5
            assert value("cascade_worker_tokens_per_second") > 0
            assert value("cascade_worker_serving") == 1
            assert value("cascade_worker_max_batch") == 4
            assert value("cascade_worker_requests_waiting") == 0
            assert value("cascade_worker_requests_running") == 0
            assert 0 <= value("cascade_worker_kv_cache_usage_ratio") <= 1
            assert "cascade_worker_blocks_loaded 2.0" in text  # control's series stay
            assert "cascade_worker_bytes_received_total" in text
            await w.call("POST", "/v1/generate", b"nope")
            _, text = await w.call("GET", "/metrics")
            assert 'cascade_worker_requests_refused_total{reason="invalid"} 1.0' in text

    run(go)


def test_shutdown_drains_in_flight_requests() -> None:
    async def go() -> None:
        async with worker(Factory(step_s=0.01)) as w:
            await w.serve()
            task = asyncio.ensure_future(w.generate(request("r1", max_tokens=20)))
            while "r1" not in w.factory.core.running:
                await asyncio.sleep(0.01)
            await w.server.close()  # runs the app's shutdown hooks, as SIGTERM does
            _, lines = await task
            assert lines[-1]["finish_reason"] == "length"
            assert len(lines) == 20

    run(go)


def test_shutdown_hands_back_what_outlives_the_drain_deadline() -> None:
    async def go() -> None:
        async with worker(Factory(step_s=0.01), request_drain_seconds=0.1) as w:
            await w.serve()
            task = asyncio.ensure_future(w.generate(request("r1", max_tokens=4000)))
            while "r1" not in w.factory.core.running:
                await asyncio.sleep(0.01)
            await w.server.close()
            _, lines = await task
            assert lines[-1]["finish_reason"] == "migrate"
            assert "r1" in w.factory.core.aborted  # out of the engine

    run(go)


TINY = ModelSpec(layers=2, hidden=32, heads=4, kv_heads=2, intermediate=64, vocab=300)


def test_serve_on_start_loads_the_model_path_and_serves(tmp_path: Path) -> None:
    model = tmp_path / "tiny"
    write_checkpoint(model, TINY)

    async def go() -> None:
        async with worker(serve_on_start=True, model_path=str(model), blocks=2) as w:
            doc = await w.wait_engine("serving", "failed", timeout=60)
            assert doc["engine"] == "serving", doc
            assert doc["phase"] == "ready" and doc["layers"] == [0, 2]
            assert (await w.call("GET", "/readyz"))[0] == 200
            status, lines = await w.generate(request("r1", max_tokens=2))
            assert status == 200 and lines[-1]["finish_reason"] == "length"

    run(go, timeout=90)


def test_the_real_engine_behind_the_api(tmp_path: Path) -> None:
    spec = ModelSpec(
        layers=2, hidden=32, heads=4, kv_heads=2, intermediate=64, vocab=300, dtype="float32"
    )
    write_checkpoint(tmp_path / "m", spec)
    greedy = {"max_tokens": 6, "temperature": 0}

    async def go() -> None:
        config = {
            "model_path": str(tmp_path / "m"),
            "blocks": 2,
            "max_batch": 2,
            "max_model_len": 64,
        }
        async with worker(default_engine_factory, serve_on_start=True, **config) as w:
            doc = await w.wait_engine("serving", "failed", timeout=60)
            assert doc["engine"] == "serving", doc
            assert (doc["maxBatch"], doc["maxModelLen"]) == (2, 64)
            bodies = [
                {"request_id": f"r{i}", "prompt": "Hello there", "params": greedy} for i in range(3)
            ]
            results = await asyncio.gather(*(w.generate(body) for body in bodies))
            tokens = [[t for line in lines for t in line["token_ids"]] for _, lines in results]
            assert all(lines[-1]["finish_reason"] in ("length", "stop") for _, lines in results)
            assert tokens[0] == tokens[1] == tokens[2]  # greedy, whatever else is batched
            long = {"request_id": "long", "prompt": "word " * 100, "params": greedy}
            status, doc = await w.call("POST", "/v1/generate", long)
            assert status == 400 and doc["error"]["code"] == "context_length_exceeded"

    run(go, timeout=90)


def test_awaiting_weights_is_not_ready_and_reads_no_storage(tmp_path: Path) -> None:
    async def go() -> None:
        model = str(tmp_path / "never-read")  # a scale-up target must not touch storage
        async with worker(await_weights=True, model_path=model) as w:
            status, text = await w.call("GET", "/readyz")
            assert status == 503 and text == "awaiting weights"
            doc = await w.call("GET", "/v1/status")
            assert doc[1]["phase"] == "idle" and doc[1]["engine"] == "off"

    run(go)


def test_serve_on_start_without_a_model_is_not_ready() -> None:
    async def go() -> None:
        async with worker(serve_on_start=True) as w:
            doc = await w.wait_engine("failed")
            assert "CASCADE_MODEL_PATH" in doc["engineError"]
            status, text = await w.call("GET", "/readyz")
            assert status == 503 and "engine failed" in text

    run(go)


def test_default_factory_says_clearly_when_the_engine_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "cascade_worker.engine.engine", None)
    with pytest.raises(EngineUnavailable, match=r"cascade_worker\.engine\.engine"):
        default_engine_factory(FakeStore(), EngineOptions())  # type: ignore[arg-type,unused-ignore]


def test_engine_options_pass_only_what_was_set() -> None:
    assert EngineOptions().as_kwargs() == {}
    assert EngineOptions(max_batch=8, device="cuda:0").as_kwargs() == {
        "max_batch": 8,
        "device": "cuda:0",
    }
