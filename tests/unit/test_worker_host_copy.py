"""A host copy: a worker app without an engine that loads, receives and sends blocks."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from test_worker_control import TINY, config, run, workers

from cascade_worker.checkpoints.checkpoint import write_checkpoint
from cascade_worker.config import load_config
from cascade_worker.control.host_copy import REFUSED

pytestmark = [pytest.mark.timeout(120), pytest.mark.ucx]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("model") / "tiny"
    write_checkpoint(out, TINY)
    return out


def test_a_host_copy_is_ready_once_it_holds_the_model_and_never_serves(model_dir: Path) -> None:
    host = dataclasses.replace(config("h-0", str(model_dir)), host_copy=True)

    async def go() -> None:
        async with workers(host, config("w-0")) as (h, w):
            async with h.http.get(f"http://{h.peer}/readyz") as resp:
                assert resp.status == 503 and "holds no model" in await resp.text()
            for path in ("/v1/control/serve", "/v1/generate", "/v1/control/stage"):
                status, doc = await h.call("POST", path, {})
                assert (status, doc["error"]) == (409, REFUSED), path
            status, doc = await h.call("POST", "/v1/control/load", {})
            assert status == 202, doc
            sh = await h.wait_phase("ready", "failed")
            assert sh["phase"] == "ready" and sh["role"] == "host-copy"
            assert sh["storeBytes"] > 0 and sh["engine"] == "off"
            async with h.http.get(f"http://{h.peer}/readyz") as resp:
                assert resp.status == 200
            async with h.http.get(f"http://{h.peer}/metrics") as resp:
                metrics = await resp.text()
            assert f'cascade_worker_store_bytes{{tier="host"}} {float(sh["storeBytes"])}' in metrics
            # An instance gets the model from the host copy, byte for byte.
            status, doc = await w.call("POST", "/v1/control/fetch", {"peer": h.peer})
            assert status == 202, doc
            sw = await w.wait_phase("ready", "failed")
            assert sw["phase"] == "ready" and sw["role"] == "instance"
            assert sw["modelDigest"] == sh["modelDigest"]
            assert sw["storeBytes"] == sh["storeBytes"]

    run(go)


def test_a_host_copy_refuses_to_serve_on_start() -> None:
    with pytest.raises(SystemExit):
        load_config([], {"CASCADE_ROLE": "host-copy", "CASCADE_SERVE": "1"})
    assert load_config([], {"CASCADE_ROLE": "host-copy"}).host_copy
    assert not load_config([], {}).host_copy
