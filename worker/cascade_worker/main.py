"""`cascade-worker`: the process inside every worker pod.

The worker reports who it is, answers the probes, takes control requests that move
model weights (pack the local checkpoint into blocks, take part in a multicast transfer
plan, or fetch the model from a peer worker: control/jobs.py) and serves the model it holds
(an engine driven by serving/: /v1/generate, /v1/load, /v1/control/serve|drain), alone
or in an execution pipeline with other workers (/v1/control/stage|local).

Endpoints (port $CASCADE_WORKER_PORT, default 8080, bound to $POD_IP when set):
``/healthz``, ``/readyz`` and ``/metrics`` from :mod:`cascade_protocol.service`, the
control routes under ``/v1/control/`` (control/routes.py), the inference routes, and
``GET /v1/status`` -> a :class:`cascade_protocol.status.WorkerStatus` (camelCase): who
this is, what it holds and does, and how its engine serves. Readiness means "the
process serves"; once the worker is asked to serve (--serve-on-start, a serve or a
stage request), "an engine takes requests, or a pipeline stage listens".
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import logging
import os
import sys
import threading
import time
from collections.abc import Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry, Gauge, Info

from cascade_protocol.service import create_app, new_registry, serve, setup_logging
from cascade_protocol.status import (
    STATUS_PATH,
    DeviceInfo,
    StartupStage,
    WorkerRole,
    WorkerStatus,
)
from cascade_worker.access import peer_key
from cascade_worker.access.http_auth import guard, register_auth_metrics
from cascade_worker.config import WorkerConfig, load_config
from cascade_worker.control.host_copy import add_host_copy
from cascade_worker.control.jobs import CONTROL_KEY, Control, import_transfer_path
from cascade_worker.control.routes import add_control
from cascade_worker.serving.api import SERVING_KEY
from cascade_worker.serving.factory import EngineFactory, default_engine_factory
from cascade_worker.serving.lifecycle_routes import add_serving
from cascade_worker.serving.report import serving_status
from cascade_worker.timeline import Startup, rss_bytes
from cascade_worker.transport.env import stop_notifier, use_notifier_thread

log = logging.getLogger("cascade_worker")

CONFIG_KEY = web.AppKey("cascade_worker_config", WorkerConfig)
TERMINATION_LOG = "/dev/termination-log"  # the kubelet's default terminationMessagePath


def register_metrics(
    registry: CollectorRegistry, config: WorkerConfig, device: DeviceInfo | None
) -> None:
    """The worker's own series; the engine's series join them later."""
    info = Info(
        "cascade_worker", "Which model and deployment this worker serves.", registry=registry
    )
    info.info({"model": config.model_uri, "deployment": config.deployment})
    up = Gauge("cascade_worker_up", "1 while the worker process is serving.", registry=registry)
    up.set(1)
    if device is not None:
        Info(
            "cascade_worker_device", "What this worker's engine computes on.", registry=registry
        ).info({k: str(v).lower() for k, v in device.model_dump().items()})


def engine_device(config: WorkerConfig) -> DeviceInfo | None:
    """The settled device (`settle_device`) as /v1/status reports it; None on a host copy."""
    if config.host_copy:
        return None
    from cascade_worker.engine.device import describe

    name = config.device or "cpu"
    stands_in = config.node_emulation and config.gpus > 0 and not name.startswith("cuda")
    return describe(name, emulated=stands_in)


def worker_status(app: web.Application) -> WorkerStatus:
    """Who this worker is, what its store holds and does, and how its engine serves."""
    config = app[CONFIG_KEY]
    role = WorkerRole.HOST_COPY if config.host_copy else WorkerRole.INSTANCE
    status = WorkerStatus(
        pod=config.pod_name, model_uri=config.model_uri, data_port=config.data_port, role=role
    )
    ctl = app[CONTROL_KEY]
    update = {"startup": ctl.startup.info, "rss_bytes": rss_bytes()}
    status = ctl.state.status(status).model_copy(update=update)
    return status if config.host_copy else serving_status(app[SERVING_KEY], status)


async def _status(request: web.Request) -> web.Response:
    status = worker_status(request.app)
    return web.json_response(status.model_dump(mode="json", by_alias=True))


def build_app(
    config: WorkerConfig,
    control: Control | None = None,
    factory: EngineFactory = default_engine_factory,
) -> web.Application:
    """The worker app; tests pass multicast options (`control`) and a fake engine."""
    registry = new_registry()
    device = engine_device(config)  # once: the metric and /v1/status say the same
    register_metrics(registry, config, device)
    app = create_app(registry)
    app[CONFIG_KEY] = config
    guard(app, config.peer_key, config.generate_key)
    peer_key.install(config.peer_key)  # for the pipeline's connections (access/peer_key.py)
    register_auth_metrics(registry)
    control = control or Control(config)
    control.startup.info.device = device
    add_control(app, control, registry)
    if config.host_copy:
        add_host_copy(app)
    else:
        add_serving(app, registry, factory)
    app.router.add_get(STATUS_PATH, _status)
    return app


def warm_imports(engine: bool = True, startup: Startup | None = None) -> None:
    """Import what the worker's first orders need: the transfer path (torch, ucxx, the
    multicast node), the engine and the pipeline roles (not on a host copy). Cold, on a
    CPU-limited node, they take seconds (the start-up's imports stage). A failure here
    is only logged: the order that needs the module reports it."""
    began = time.monotonic()
    try:
        import_transfer_path()
        if engine:
            importlib.import_module("cascade_worker.engine.engine")
            # A live scale-up's pipeline (the head brings the planner and networkx: 0.15 s)
            for module in ("cascade_worker.pipeline.head", "cascade_worker.pipeline.server"):
                importlib.import_module(module)
        if startup is not None:
            startup.record(StartupStage.IMPORTS, time.monotonic() - began)
    except Exception as exc:  # the build lacks a piece; its order will say so
        log.warning("preloading the transfer path and engine failed: %s", exc)


def preload(engine: bool = True, startup: Startup | None = None) -> None:
    """Warm the slow imports on a background thread now, while the worker waits for
    its orders, instead of when an order comes."""
    args = (engine, startup)
    threading.Thread(target=warm_imports, args=args, name="preload", daemon=True).start()


async def run(config: WorkerConfig) -> None:
    """Serve; the preload starts once the worker listens, so it does not hold back the
    control API the operator plans from (both share the pod's CPU quota)."""
    listening: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    app = build_app(config)
    startup = app[CONTROL_KEY].startup

    def listening_now(_: object) -> None:
        startup.listening()
        preload(not config.host_copy, startup)

    listening.add_done_callback(listening_now)
    await serve(
        app, config.host, config.port, drain_seconds=config.drain_seconds, started=listening
    )


def settle_device(config: WorkerConfig) -> WorkerConfig:
    """The engine's device, decided once before anything listens (engine/device.py): a
    pod that asked for a GPU it cannot find fails here, not on its first request."""
    if config.host_copy:  # holds weights in host memory; runs no engine
        return config
    from cascade_worker.engine.device import choose_device, probe

    device = choose_device(
        config.device, config.gpus, probe, emulated=config.node_emulation, pod=config.pod_name
    )
    return dataclasses.replace(config, device=device)


def refuse_start(message: str) -> int:
    """Log why the worker cannot start and leave it where Kubernetes shows it (the
    container's termination message, `kubectl describe pod`)."""
    log.error("cannot start: %s", message)
    try:
        with open(TERMINATION_LOG, "w", encoding="utf-8") as out:
            out.write(message)
    except OSError:
        pass  # not under a kubelet that provides one
    return 3


def main(argv: Sequence[str] | None = None) -> int:
    setup_logging(os.environ)
    config = load_config(sys.argv[1:] if argv is None else argv, os.environ)
    log.info(
        "cascade-worker pod=%s deployment=%s model=%s",
        config.pod_name,
        config.deployment or "-",
        config.model_uri or "-",
    )
    from cascade_worker.engine.device import DeviceUnavailable

    asked = config.device or "auto"
    try:
        config = settle_device(config)
    except (DeviceUnavailable, ValueError) as exc:
        return refuse_start(str(exc))
    log.info("engine device %s (asked %s, %d GPU(s))", config.device, asked, config.gpus)
    if config.materialize_once:
        return materialize(config)
    # All the worker's UCX traffic runs on its one loop (transfers, pipeline head and
    # stage): the notifier thread wakes it instead of every request spinning on it.
    use_notifier_thread()
    try:
        asyncio.run(run(config))
    finally:
        stop_notifier()
    return 0


def materialize(config: WorkerConfig) -> int:
    """A profile Job's run: record this deployment's start-up state beside the weights
    (control.artifacts.profile_once) with the engine options a serving worker would use."""
    from cascade_worker.control.artifacts import profile_once
    from cascade_worker.serving.factory import engine_options

    if not config.model_path:
        log.error("materialize: $CASCADE_MODEL_PATH is empty")
        return 2
    try:
        profile_once(config.model_path, config.blocks, engine_options(config), config.pod_name)
    except Exception:
        log.exception("materialize %s failed", config.model_path)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
