"""Operator settings read once from the environment (the Helm chart sets them)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from cascade_api import constants as c

# The Cascade autoscaler's tick: how soon demand (a request held at zero) is acted on.
# Read at import, since kopf fixes a timer's interval when the handler is registered.
AUTOSCALE_SECONDS = float(os.environ.get("CASCADE_AUTOSCALE_SECONDS", "2"))


@dataclass(frozen=True)
class OperatorConfig:
    worker_image: str = c.WORKER_IMAGE
    gateway_image: str = c.GATEWAY_IMAGE
    # Resync period: a safety net; reconciling is driven by watch events.
    resync_seconds: float = 30.0

    @classmethod
    def from_env(cls) -> OperatorConfig:
        return cls(
            worker_image=os.environ.get("CASCADE_WORKER_IMAGE", c.WORKER_IMAGE),
            gateway_image=os.environ.get("CASCADE_GATEWAY_IMAGE", c.GATEWAY_IMAGE),
            resync_seconds=float(os.environ.get("CASCADE_RESYNC_SECONDS", "30")),
        )
