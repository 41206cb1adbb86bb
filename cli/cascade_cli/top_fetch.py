"""`cascade top`'s reads: the API server (kubernetes client) and each gateway's load.

Three lists per frame (ModelDeployments, ScalePlans, Cascade's worker and gateway pods)
and one `GET /v1/load` per gateway pod, asked at once with a short timeout: a gateway
that does not answer shows as an error on its row rather than stalling the frame.
The gateway's load report needs no token (the operator reads it the same way).
Everything it reads goes to the pure `top_model.build_snapshot`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from cascade_api import constants as c
from cascade_cli.top_model import Obj, Snapshot, build_snapshot
from cascade_protocol.gateway_load import GATEWAY_LOAD_PATH, GatewayLoad

API_TIMEOUT_S = 5.0
GATEWAY_TIMEOUT_S = 1.0
POD_SELECTOR = (
    f"{c.LABEL_DEPLOYMENT},{c.LABEL_COMPONENT} in ({c.COMPONENT_WORKER},{c.COMPONENT_GATEWAY})"
)


class ReadError(RuntimeError):
    """The API server did not answer a list: the frame keeps the last data."""


def load_kube_config() -> str:
    """Load the kubeconfig (or the in-cluster config); the namespace its context names."""
    from kubernetes import config

    try:
        config.load_kube_config()
    except config.ConfigException:
        config.load_incluster_config()
        return "default"
    try:
        _, active = config.list_kube_config_contexts()
    except config.ConfigException:
        return "default"
    return str((active or {}).get("context", {}).get("namespace") or "default")


class Reader:
    """Reads one snapshot per call; `namespace` "" reads every namespace."""

    def __init__(self, namespace: str, gateway_timeout_s: float = GATEWAY_TIMEOUT_S) -> None:
        from kubernetes import client

        self.namespace = namespace
        self.gateway_timeout_s = gateway_timeout_s
        self._custom = client.CustomObjectsApi()
        self._core = client.CoreV1Api()
        # Pod IPs are direct: an http_proxy in the environment must not catch them.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="top-gateway")

    def snapshot(self) -> Snapshot:
        """One frame's data; ReadError (a RuntimeError) when the API server fails."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            mds = self._custom_items(c.MD_PLURAL)
            plans = self._custom_items(c.SP_PLURAL)
            pods = self._pods()
        except ApiException as err:
            raise ReadError(f"API server: {err.status} {err.reason}") from None
        except HTTPError as err:  # urllib3: refused, timed out (not OSErrors)
            raise ReadError(f"API server unreachable: {type(err).__name__}") from None
        gateways = gateway_ips(pods)
        keys = list(gateways)
        asked = [[self._pool.submit(self.gateway_load, ip) for ip in gateways[k]] for k in keys]
        loads: dict[tuple[str, str], list[GatewayLoad | str]] = {
            k: [f.result() for f in futures] or ["gateway pod not running yet"]
            for k, futures in zip(keys, asked, strict=True)
        }
        return build_snapshot(self.namespace, datetime.now(UTC), mds, pods, plans, loads)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def gateway_load(self, ip: str) -> GatewayLoad | str:
        """The report, or why there is none (one short phrase for the row)."""
        host = f"[{ip}]" if ":" in ip else ip
        url = f"http://{host}:{c.GATEWAY_PORT}{GATEWAY_LOAD_PATH}"
        try:
            with self._opener.open(url, timeout=self.gateway_timeout_s) as resp:
                return GatewayLoad.model_validate_json(resp.read())
        except urllib.error.HTTPError as err:
            return f"gateway {ip}: HTTP {err.code}"
        except (OSError, ValueError) as err:  # URLError, timeouts, refused
            return f"gateway {ip}: unreachable ({getattr(err, 'reason', err)})"
        except ValidationError:
            return f"gateway {ip}: load report unreadable"

    def _custom_items(self, plural: str) -> list[Obj]:
        if self.namespace:
            body = self._custom.list_namespaced_custom_object(
                c.GROUP, c.VERSION, self.namespace, plural, _request_timeout=API_TIMEOUT_S
            )
        else:
            body = self._custom.list_cluster_custom_object(
                c.GROUP, c.VERSION, plural, _request_timeout=API_TIMEOUT_S
            )
        return list(body.get("items") or [])

    def _pods(self) -> list[Obj]:
        # Raw JSON (no preload into V1Pod objects): the pure layer reads dicts.
        kw: dict[str, Any] = {
            "label_selector": POD_SELECTOR,
            "_preload_content": False,
            "_request_timeout": API_TIMEOUT_S,
        }
        if self.namespace:
            resp = self._core.list_namespaced_pod(self.namespace, **kw)
        else:
            resp = self._core.list_pod_for_all_namespaces(**kw)
        return list(json.loads(resp.data).get("items") or [])


def gateway_ips(pods: Iterable[Obj]) -> dict[tuple[str, str], list[str]]:
    """(namespace, deployment) -> its running gateway pods' IPs."""
    out: dict[tuple[str, str], list[str]] = {}
    for pod in pods:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        labels = meta.get("labels") or {}
        if labels.get(c.LABEL_COMPONENT) != c.COMPONENT_GATEWAY or meta.get("deletionTimestamp"):
            continue
        key = (meta.get("namespace", ""), labels.get(c.LABEL_DEPLOYMENT, ""))
        ips = out.setdefault(key, [])
        if status.get("phase") == "Running" and status.get("podIP"):
            ips.append(status["podIP"])
    return out
