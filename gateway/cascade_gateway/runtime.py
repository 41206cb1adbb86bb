"""The gateway's live objects, bundled once so handlers take one thing from the app.

The readiness gate narrows the shared probe state: the gateway is ready only while at
least one backend is routable (ready, not draining), so a Service sends clients only to
gateways that can serve them, and not at all once SIGTERM starts the drain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from cascade_gateway.backends import BackendPool
from cascade_gateway.config import GatewayConfig
from cascade_gateway.metrics import GatewayMetrics
from cascade_gateway.router import context_length, ready_count
from cascade_gateway.scheduler import Scheduler
from cascade_protocol.service import Health


def readiness_gate(pool: BackendPool) -> Callable[[], str | None]:
    """A :class:`Health` gate: not ready while no backend is routable."""

    def gate() -> str | None:
        if ready_count(pool.views(), pool.clock()) > 0:
            return None
        return "no ready backend" if pool.urls() else "no backends known"

    return gate


@dataclass
class Gateway:
    config: GatewayConfig
    pool: BackendPool
    scheduler: Scheduler
    metrics: GatewayMetrics
    health: Health
    created: int
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
