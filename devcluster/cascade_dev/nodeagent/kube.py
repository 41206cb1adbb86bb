"""The agent's only door to the API server: raw JSON requests over the kubernetes client.

The generated models of kubernetes-client 37 validate strictly and would turn every
pod into objects the pure modules do not want; the agent works with the API's own JSON
(camelCase dicts) instead, using the client for configuration, TLS, auth and its
connection pool. Watches stream newline-delimited JSON events.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

JSON = "application/json"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"

__all__ = ["JSON", "MERGE", "STRATEGIC", "TRANSIENT", "ApiException", "Kube", "status_of"]

# Errors worth retrying later: API refusals, broken connections, timeouts.
TRANSIENT = (ApiException, OSError, urllib3.exceptions.HTTPError)


def status_of(e: BaseException) -> int:
    """HTTP status of an API error (0 for connection errors and the like)."""
    return int(getattr(e, "status", 0) or 0)


class Kube:
    def __init__(self, kubeconfig: Path) -> None:
        cfg = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
        cfg.connection_pool_maxsize = 32
        cfg.retries = False
        self._api = kubernetes.client.ApiClient(cfg)
        self.server = str(cfg.host)

    def _call(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        timeout: float | tuple[float, float],
    ) -> Any:
        params = self._api.param_serialize(
            method=method,
            resource_path=path,
            query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
            header_params={"Accept": JSON, "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
        )
        resp = self._api.call_api(*params, _request_timeout=timeout)
        if not 200 <= resp.status <= 299:
            resp.read()
            raise ApiException(http_resp=resp)
        return resp

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float = 30,
    ) -> dict[str, Any]:
        resp = self._call(method, path, query, body, content_type, timeout)
        data = resp.read()
        return json.loads(data) if data else {}

    def get(self, path: str) -> dict[str, Any] | None:
        """GET an object; None when it does not exist."""
        try:
            return self.request("GET", path)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def watch(
        self, path: str, query: Mapping[str, Any], timeout_s: int
    ) -> Iterator[dict[str, Any]]:
        """Events of one watch request (ends when the server closes it)."""
        q = {**query, "watch": "true", "timeoutSeconds": timeout_s, "allowWatchBookmarks": "true"}
        resp = self._call("GET", path, q, None, JSON, (10, timeout_s + 30))
        raw = resp.response
        buf = b""
        try:
            for chunk in raw.stream(amt=None, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
        finally:
            raw.release_conn()

    def create_token(self, namespace: str, sa: str, audience: str | None, seconds: int) -> str:
        body: dict[str, Any] = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": max(600, seconds),
                "audiences": [audience] if audience else None,
            },
        }
        out = self.request(
            "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}/token", body=body
        )
        return str(out["status"]["token"])

    def patch_pod_status(
        self, namespace: str, name: str, status: Mapping[str, Any]
    ) -> dict[str, Any]:
        return self.request(
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/{name}/status",
            body={"status": status},
            content_type=STRATEGIC,
        )

    def delete_pod_now(self, namespace: str, name: str, uid: str) -> None:
        """Final delete as kubelet does it: grace 0, only if it is still the same pod."""
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": uid},
        }
        try:
            self.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body=body)
        except ApiException as e:
            if e.status not in (404, 409):
                raise
