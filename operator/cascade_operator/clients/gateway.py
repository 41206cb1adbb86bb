"""The only module that reads the gateway's load report (GET /v1/load on a gateway pod).

The Cascade autoscaler needs what only the gateway sees (queues, held requests, which
instances run interactive requests, arrivals, output lengths); each gateway pod answers
a typed `GatewayLoad`. Short timeout, no retries: a gateway that does not answer (or
answers something that does not parse) is left out of this tick.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from cascade_api import constants as c
from cascade_operator.clients.http import get_typed, pod_url
from cascade_protocol.gateway_load import GATEWAY_LOAD_PATH, GatewayLoad


class GatewayClient:
    def __init__(self, timeout_s: float = 1.0, port: int = c.GATEWAY_PORT) -> None:
        self.timeout_s = timeout_s
        self.port = port
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="gateway-http")

    def load(self, ip: str) -> GatewayLoad | None:
        return get_typed(pod_url(ip, self.port, GATEWAY_LOAD_PATH), GatewayLoad, self.timeout_s)

    def loads(self, ips: Sequence[str]) -> list[GatewayLoad]:
        """The reports of every gateway pod that answers, asked at once."""
        return [r for r in self._pool.map(self.load, ips) if r is not None]
