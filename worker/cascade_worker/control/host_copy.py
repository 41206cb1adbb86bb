"""A host copy: the worker process without an engine (BlitzScale §5.3's host pool).

Why a separate role and not a worker pod that also serves: at `replicas: 0` every
instance is gone, and a copy that lives in host memory outside the instances keeps the
model one network transfer away instead of one storage read. A host copy packs the
checkpoint (load), receives it in plans and fetches, and sends it to plans as a source
of tier `host`; it never serves. It is ready once it holds the whole model, so the
operator (and `kubectl get pods`) see a usable copy.
"""

from __future__ import annotations

from aiohttp import web

from cascade_protocol.load import LOAD_PATH
from cascade_protocol.service import HEALTH_KEY
from cascade_worker.control.jobs import CONTROL_KEY, Control

REFUSED = "this pod is a host copy: it holds and sends the model's blocks, it runs no engine"
# What an instance serves and a host copy refuses (409 with REFUSED).
SERVING_ROUTES = (
    ("POST", "/v1/generate"),
    ("POST", "/v1/control/serve"),
    ("POST", "/v1/control/drain"),
    ("POST", "/v1/control/stage"),
    ("POST", "/v1/control/local"),
    ("GET", LOAD_PATH),
)


def not_ready_reason(ctl: Control) -> str | None:
    store = ctl.state.current_store()
    if store is None:
        return "holds no model yet"
    if ctl.state.job is not None or not store.complete():
        return f"holds {len(store.held())}/{store.num_blocks} blocks"
    return None


async def _refuse(_: web.Request) -> web.Response:
    return web.json_response({"error": REFUSED}, status=409)


def add_host_copy(app: web.Application) -> None:
    """Mount the readiness gate and the refusals (after add_control)."""
    ctl = app[CONTROL_KEY]
    app[HEALTH_KEY].gates.append(lambda: not_ready_reason(ctl))
    for method, path in SERVING_ROUTES:
        app.router.add_route(method, path, _refuse)
