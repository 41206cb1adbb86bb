"""The gateway's live objects, bundled once so handlers take one thing from the app.

Readiness: the gateway is ready from start-up until SIGTERM starts the drain, whether or
not any backend is: with no routable backend it holds requests in their class queues
(scale from zero, the first instance still loading), which only works if the Service
still sends them here. Whether instances serve is the ModelDeployment's status to say.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import aiohttp

from cascade_gateway.backends import BackendPool
from cascade_gateway.config import GatewayConfig
from cascade_gateway.demand import DemandTracker
from cascade_gateway.metrics import GatewayMetrics
from cascade_gateway.router import context_length, prompt_bytes_bound, ready_count
from cascade_gateway.scheduler import Scheduler
from cascade_protocol.service import Health


@dataclass
class Gateway:
    config: GatewayConfig
    pool: BackendPool
    scheduler: Scheduler
    metrics: GatewayMetrics
    health: Health
    created: int
    demand: DemandTracker
    # The one HTTP client session to all backends; opened on app startup.
    session: aiohttp.ClientSession | None = field(default=None)

    def http(self) -> aiohttp.ClientSession:
        if self.session is None:
            raise RuntimeError("gateway HTTP session not started")
        return self.session

    def models(self) -> frozenset[str]:
        """Model names accepted in requests: the configured one, else what workers say."""
        if self.config.model_name:
            return frozenset({self.config.model_name})
        return frozenset(s.report.model for s in self.pool.states() if s.report and s.report.model)

    def max_model_len(self) -> int:
        return context_length(self.pool.views())

    def max_prompt_bytes(self) -> int:
        return prompt_bytes_bound(self.pool.views())

    def serving(self) -> bool:
        """Some backend is routable now (else requests are held)."""
        return ready_count(self.pool.views(), self.pool.clock()) > 0
