"""Operator settings read once from the environment (the Helm chart sets them)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from cascade_api import constants as c


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
