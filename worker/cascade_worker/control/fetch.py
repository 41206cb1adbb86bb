"""`POST /v1/control/fetch`: get the model from one peer worker, asked over HTTP.

The convenience behind "tell a worker to fetch a model from another worker": this
worker reads what the peer holds (GET /v1/control/manifest; with `blocks`, a peer that
holds nothing is asked to load first), plans a one-hop chain with the planner (peer =
source and leader, self = target), and hands the same plan and peers map to the peer
(POST /v1/control/transfer) and to itself. Data addresses are the peers' data ports;
this worker's own address is its bind host, or, when bound to every interface, the
address the fetch request reached it on.

Who may make this worker call out: only holders of the deployment's token (access/http_auth.py), and
only to a unicast address: a fetch aimed at link-local (cloud metadata at
169.254.169.254), multicast or unspecified addresses, or at a name, is refused before any
request goes out. The peer must itself accept the deployment's token (the calls carry
it), so a stranger's address answers 401/403 and the fetch fails.
"""

from __future__ import annotations

import asyncio
import ipaddress
import time
from typing import Any

import aiohttp
from aiohttp import web

from cascade_api.constants import WORKER_PORT
from cascade_api.scaleplan import Source, SourceTier
from cascade_protocol.control import Accepted, FetchRequest, ManifestInfo, TransferRequest
from cascade_protocol.status import STATUS_PATH, WorkerPhase
from cascade_worker.control.errors import RequestError, parse_body
from cascade_worker.control.jobs import Control, start_transfer

HTTP_TIMEOUT = aiohttp.ClientTimeout(total=30)
PEER_LOAD_TIMEOUT_S = 300.0
ANY_HOST = ("", "0.0.0.0", "::")


def split_peer(peer: str) -> tuple[str, int]:
    """ "IP[:PORT]" -> (host, port); RequestError(400) naming `peer` when malformed."""
    host, sep, port = peer.rpartition(":")
    if peer.endswith("]") or (host.count(":") and not host.endswith("]")):
        host, sep = peer, ""  # [v6] or a bare v6 address: no port
    host, port_n = (peer, WORKER_PORT) if not sep else (host, port)
    if sep and (not host or not port.isdigit() or not 0 < int(port) < 65536):
        raise RequestError(400, f"peer: {peer!r} is not IP or IP:PORT")
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise RequestError(400, f"peer: {host!r} is not an IP address (a pod IP)") from None
    if ip.is_link_local or ip.is_multicast or ip.is_unspecified or ip.is_reserved:
        raise RequestError(400, f"peer: {host} is not a pod address (link-local, multicast, ...)")
    return host, int(port_n)


async def _call(
    http: aiohttp.ClientSession, method: str, url: str, body: Any = None
) -> tuple[int, Any]:
    try:
        async with http.request(method, url, json=body) as resp:
            return resp.status, await resp.json(content_type=None)
    except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
        raise RequestError(409, f"peer {url} unreachable or not a worker: {exc!r}") from exc


async def peer_manifest(http: aiohttp.ClientSession, base: str, blocks: int | None) -> ManifestInfo:
    """What the peer holds; with `blocks`, have an idle peer load first and wait for it."""
    status, doc = await _call(http, "GET", f"{base}/v1/control/manifest")
    if status == 200:
        return ManifestInfo.model_validate(doc)
    if blocks is None:
        raise RequestError(409, f"peer {base} holds no model: {doc.get('error', doc)}")
    status, doc = await _call(http, "POST", f"{base}/v1/control/load", {"blocks": blocks})
    if status != 202:
        raise RequestError(409, f"peer {base} refused to load: {doc.get('error', doc)}")
    give_up = time.monotonic() + PEER_LOAD_TIMEOUT_S
    while time.monotonic() < give_up:
        await asyncio.sleep(0.5)
        _, doc = await _call(http, "GET", f"{base}{STATUS_PATH}")
        if doc.get("phase") != WorkerPhase.LOADING:
            break
    status, doc = await _call(http, "GET", f"{base}/v1/control/manifest")
    if status != 200:
        raise RequestError(409, f"peer {base} did not load a model: {doc.get('error', doc)}")
    return ManifestInfo.model_validate(doc)


def own_host(ctl: Control, request: web.Request) -> str:
    if ctl.config.host not in ANY_HOST:
        return ctl.config.host
    sockname = request.transport.get_extra_info("sockname") if request.transport else None
    return str(sockname[0]) if sockname else "127.0.0.1"


async def fetch(ctl: Control, request: web.Request) -> Accepted:
    # Imported here: the planner brings networkx, a quarter of the worker's start-up
    # imports, and a worker only plans when asked to fetch.
    from cascade_planner.spec import plan_spec

    req = parse_body(FetchRequest, await request.read())
    host, port = split_peer(req.peer)
    if ctl.config.data_port == 0:
        raise RequestError(409, "fetch needs a fixed data port (--data-port is 0)")
    state, me = ctl.state, ctl.config.pod_name
    state.claim(WorkerPhase.TRANSFERRING)
    try:
        base = f"http://{host}:{port}"
        key = ctl.config.peer_key
        headers = key.headers if key is not None else {}
        async with aiohttp.ClientSession(timeout=HTTP_TIMEOUT, headers=headers) as http:
            info = await peer_manifest(http, base, req.blocks)
            if info.pod == me:
                raise RequestError(400, f"peer: {req.peer} is this worker ({me})")
            plan = plan_spec(
                "chain",
                [Source(pod=info.pod, tier=SourceTier.HOST)],
                [me],
                info.blocks,
                deployment=ctl.config.deployment or "fetch",
                model_digest=info.model_digest,
            )
            peers = {
                info.pod: f"{host}:{info.data_port}",
                me: f"{own_host(ctl, request)}:{ctl.config.data_port}",
            }
            transfer = TransferRequest(plan=plan, peers=peers)
            body = transfer.model_dump(mode="json", by_alias=True)
            status, doc = await _call(http, "POST", f"{base}/v1/control/transfer", body)
            if status != 202:
                raise RequestError(409, f"peer {base} refused the transfer: {doc.get('error')}")
    except RequestError:
        state.unclaim()
        raise
    accepted = await start_transfer(ctl, transfer, claimed=True)
    return accepted.model_copy(update={"action": "fetch"})
