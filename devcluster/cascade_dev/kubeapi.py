"""A tiny HTTPS client for the few API calls `cascade dev` makes itself.

Readiness, node status, Service/Endpoints lookups and node cleanup need only GET/DELETE
with the admin client cert; the standard library does that without loading the full
kubernetes client (which `dev` commands would otherwise import for seconds).
"""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any

from cascade_dev.paths import APISERVER_PORT
from cascade_dev.pki import Pki


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class KubeApi:
    def __init__(self, pki: Pki, host: str = "127.0.0.1", port: int = APISERVER_PORT) -> None:
        self.host, self.port = host, port
        self.ctx = ssl.create_default_context(cafile=str(pki.crt("ca")))
        self.ctx.load_cert_chain(str(pki.crt("admin")), str(pki.key("admin")))

    def request(self, method: str, path: str, timeout: float = 5.0) -> tuple[int, str]:
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)
        try:
            conn.request(method, path, headers={"Accept": "application/json"})
            resp = conn.getresponse()
            return resp.status, resp.read().decode(errors="replace")
        finally:
            conn.close()

    def get(self, path: str) -> dict[str, Any]:
        status, body = self.request("GET", path)
        if status != 200:
            raise ApiError(status, body.strip()[:300])
        data: dict[str, Any] = json.loads(body)
        return data

    def delete(self, path: str) -> None:
        status, body = self.request("DELETE", path)
        if status not in (200, 202, 404):
            raise ApiError(status, body.strip()[:300])

    def ready(self) -> bool:
        """True when /readyz answers ok; False while it is starting or unreachable."""
        try:
            status, _ = self.request("GET", "/readyz", timeout=2.0)
        except (OSError, http.client.HTTPException):
            return False
        return status == 200
