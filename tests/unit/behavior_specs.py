"""`spec.autoscaling.behavior` as a user writes it (camelCase), for the tests of the HPA
behaviour port and of the policy that applies it."""

from __future__ import annotations

from typing import Any

from cascade_api.scaling import ScalingBehavior


def behavior(**spec: Any) -> ScalingBehavior:
    """A behavior from the manifest's camelCase, as a user writes it."""
    return ScalingBehavior.model_validate(spec)


def pods(value: int, period: int) -> dict[str, Any]:
    return {"type": "Pods", "value": value, "periodSeconds": period}


def percent(value: int, period: int) -> dict[str, Any]:
    return {"type": "Percent", "value": value, "periodSeconds": period}
