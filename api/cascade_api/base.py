"""Building blocks shared by the custom resources: camelCase models and conditions.

Kubernetes speaks camelCase JSON; Python speaks snake_case. Every API model derives
from `ApiModel`, which maps one to the other, so manifests parse as users write them
and serialize back the way the API server stores them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are ignored.

    Unknown fields are ignored rather than rejected because the API server prunes them
    already (structural schemas) and a newer manifest must not crash an older operator.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        use_enum_values=True,
    )

    def to_api(self) -> dict[str, Any]:
        """The JSON-ready dict the API server expects (camelCase, no unset optionals).

        Empty strings are left out too: the 1.20 API server's schema validation reads a
        zero-valued string as null and rejects it ("must be of type string"), and an
        absent field parses back to the same "" default."""
        dumped: dict[str, Any] = _without_empty_strings(
            self.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
        return dumped


def _without_empty_strings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_empty_strings(v) for k, v in value.items() if v != ""}
    if isinstance(value, list):
        return [_without_empty_strings(v) for v in value]
    return value


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ConditionType(StrEnum):
    """The condition types a ModelDeployment's status carries: the Deployment's three,
    `Planned` (the weight-moving half) and the HorizontalPodAutoscaler's three."""

    AVAILABLE = "Available"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    PLANNED = "Planned"
    ABLE_TO_SCALE = "AbleToScale"
    SCALING_ACTIVE = "ScalingActive"
    SCALING_LIMITED = "ScalingLimited"


class Condition(ApiModel):
    """A standard Kubernetes condition (metav1.Condition shape)."""

    type: str = Field(description="Condition type, e.g. Available, Progressing, Degraded.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(default="", description="CamelCase machine-readable reason.")
    message: str = Field(default="", description="Human-readable detail.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation this condition was computed from."
    )
    last_transition_time: datetime | None = Field(
        default=None, description="When status last changed."
    )


def set_condition(conditions: list[Condition], new: Condition, now: datetime) -> list[Condition]:
    """Return conditions with `new` merged in, keeping lastTransitionTime stable.

    The transition time only moves when the status flips, like every built-in
    controller does, so `kubectl describe` tells how long a state has held.
    """
    out: list[Condition] = []
    replaced = False
    for old in conditions:
        if old.type != new.type:
            out.append(old)
            continue
        replaced = True
        stamp = old.last_transition_time if old.status == new.status else now
        out.append(new.model_copy(update={"last_transition_time": stamp or now}))
    if not replaced:
        out.append(new.model_copy(update={"last_transition_time": now}))
    return out


def utcnow() -> datetime:
    """Timezone-aware now, second precision (what metav1.Time stores)."""
    return datetime.now(UTC).replace(microsecond=0)
