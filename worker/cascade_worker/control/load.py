"""`POST /v1/control/load`: pack a local checkpoint into the worker's store (the storage
path of a start, and of the operator's load orders), and refuse one whose digest is not
the pinned `spec.model.digest`: a changed or corrupt checkpoint never serves."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path

from aiohttp import web

from cascade_protocol.control import Accepted, LoadRequest
from cascade_protocol.status import LoadReport, WeightsFrom, WorkerPhase
from cascade_worker.control.artifacts import read_artifacts
from cascade_worker.control.errors import RequestError, parse_body
from cascade_worker.control.jobs import Control
from cascade_worker.engine.config import ModelConfig
from cascade_worker.engine.generation_config import FILE as GENERATION_FILE
from cascade_worker.engine.generation_config import GenerationConfig

log = logging.getLogger(__name__)


async def load(ctl: Control, request: web.Request) -> Accepted:
    req = parse_body(LoadRequest, await request.read())
    return start_load(ctl, req)


def start_load(ctl: Control, req: LoadRequest) -> Accepted:
    path, blocks = claim_load(ctl, req)
    ctl.spawn(run_load(ctl, path, blocks))
    return Accepted(action="load")


def claim_load(ctl: Control, req: LoadRequest) -> tuple[Path, int]:
    """Validate a load and claim the job slot; `run_load` does the work. A load whose
    input cannot work (400) is recorded as a failed job (`WorkerState.refuse`)."""
    try:
        return _claim_load(ctl, req)
    except RequestError as err:
        if err.status == 400:
            ctl.state.refuse(f"load: {err.message}")
        raise


def _claim_load(ctl: Control, req: LoadRequest) -> tuple[Path, int]:
    raw = req.model_path or ctl.config.model_path
    if not raw:
        raise RequestError(400, "modelPath: not given and $CASCADE_MODEL_PATH is empty")
    path = Path(raw)
    if not (path / "config.json").is_file():
        raise RequestError(400, f"modelPath: {path} is not a model directory (no config.json)")
    blocks = req.blocks or ctl.config.blocks
    ctl.state.claim(WorkerPhase.LOADING)  # busy or serving: 409 before anything is read
    try:
        check_model(path)
    except RequestError:
        ctl.state.unclaim()
        raise
    return path, blocks


def check_model(path: Path) -> None:
    """Refuse a checkpoint the engine cannot run (architecture, RoPE scaling, a malformed
    generation config...) before a byte of its weights is read, naming the field."""
    try:
        ModelConfig.from_hf(json.loads((path / "config.json").read_text(encoding="utf-8")))
        generation = path / GENERATION_FILE
        if generation.is_file():
            GenerationConfig.from_extras({GENERATION_FILE: generation.read_text(encoding="utf-8")})
    except (ValueError, OSError) as err:  # JSONDecodeError is a ValueError
        raise RequestError(400, f"modelPath: {path}: the engine cannot run it: {err}") from err


async def run_load(ctl: Control, path: Path, blocks: int) -> None:
    """Pack the checkpoint at `path` (read at the storage rate, $CASCADE_STORAGE_MBIT)
    into the store; status reports how the read went as `lastLoad`."""
    from cascade_worker.blocks.store import BlockStore

    began = time.monotonic()
    rate = ctl.config.storage_mbit
    try:
        store = await asyncio.to_thread(BlockStore.from_model_dir, path, blocks, rate_mbit=rate)
    except Exception as exc:  # any failure is reported in status, the worker keeps serving
        log.exception("load %s failed", path)
        ctl.state.release(f"load {path}: {exc}")
        return
    pin = ctl.config.model_digest_pin
    if pin and store.manifest.digest != pin:  # a changed or corrupt checkpoint
        why = f"load {path}: its digest {store.manifest.digest} is not spec.model.digest {pin}"
        log.error("%s; refused, nothing serves from it", why)
        ctl.state.release(why)
        return
    ctl.startup.weights(WeightsFrom.STORAGE, store.held_bytes(), time.monotonic() - began)
    if ctl.config.materialization:  # offered to the engine start, sent with the blocks
        store.materialized = await asyncio.to_thread(read_artifacts, path)
    ctl.state.store = store
    read = store.storage_read
    if read is not None:
        ctl.state.last_load = LoadReport(
            bytes_read=read.bytes_read, seconds=read.seconds, rate_mbit=read.rate_mbit
        )
    ctl.state.release()
    log.info(
        "loaded %s: %d blocks, digest %s, %s", path, store.num_blocks, store.manifest.digest, read
    )
