"""A tiny HTTPS client for the few API calls `cascade dev` makes itself.

Readiness, node status, Service/Endpoints lookups, and `up` reconciling nodes (draining
and deleting surplus ones, relabelling the rest) need only GET/PATCH/DELETE with the
admin client cert; the standard library does that without loading the full
kubernetes client (which `dev` commands would otherwise import for seconds).
"""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any

from cascade_dev.paths import APISERVER_PORT
from cascade_dev.pki import Pki

MERGE_PATCH = "application/merge-patch+json"


class KubeApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class KubeApi:
    def __init__(self, pki: Pki, host: str = "127.0.0.1", port: int = APISERVER_PORT) -> None:
        self.host, self.port = host, port
        self.ctx = ssl.create_default_context(cafile=str(pki.crt("ca")))
        self.ctx.load_cert_chain(str(pki.crt("admin")), str(pki.key("admin")))

    def request(
        self, method: str, path: str, timeout: float = 5.0, body: object = None
    ) -> tuple[int, str]:
        """One call; a `body` goes as a JSON merge patch (the only body we send)."""
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body), MERGE_PATCH
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read().decode(errors="replace")
        finally:
            conn.close()

    def get(self, path: str) -> dict[str, Any]:
        status, body = self.request("GET", path)
        if status != 200:
            raise KubeApiError(status, body.strip()[:300])
        data: dict[str, Any] = json.loads(body)
        return data

    def patch(self, path: str, body: object) -> None:
        status, text = self.request("PATCH", path, body=body)
        if status != 200:
            raise KubeApiError(status, text.strip()[:300])

    def delete(self, path: str) -> None:
        status, body = self.request("DELETE", path)
        if status not in (200, 202, 404):
            raise KubeApiError(status, body.strip()[:300])

    def ready(self) -> bool:
        """True when /readyz answers ok; False while it is starting or unreachable."""
        try:
            status, _ = self.request("GET", "/readyz", timeout=2.0)
        except (OSError, http.client.HTTPException):
            return False
        return status == 200
