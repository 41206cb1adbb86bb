"""Status types of spec.materialization: the profile Job and what each instance did.

A profile Job records the engine's start-up state once beside the weights; each worker
then reports whether its start restored it, profiled (nothing to restore), or refused an
artifact recorded for another start. The values mirror cascade_protocol.materialize (the
API types import no other component, so they are repeated here, as InstanceMode does).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from cascade_api.base import ApiModel


class MaterializationPhase(StrEnum):
    """The profile Job's state, from its status."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class MaterializationOutcome(StrEnum):
    """What a worker's start did with materialized state (MaterializationState's values)."""

    RESTORED = "restored"
    PROFILED = "profiled"
    REFUSED = "refused"
    RECORDED = "recorded"


class InstanceMaterialization(ApiModel):
    state: MaterializationOutcome = Field(
        description="restored (a matching artifact replaced profiling), profiled (none was "
        "offered), refused (an artifact for another start was offered: not used)."
    )
    key: str = Field(description="The key id this start needed.")
    artifact: str | None = Field(default=None, description="The artifact restored or refused.")
    saved_seconds: float | None = Field(
        default=None,
        description="Start-up seconds the restore saved (the profile run's cost "
        "minus the restore's).",
    )
    reason: str | None = Field(default=None, description="Why the artifact was refused.")


class MaterializationStatus(ApiModel):
    enabled: bool = Field(description="spec.materialization.enabled as last acted on.")
    job: str | None = Field(default=None, description="The profile Job for the current spec.")
    phase: MaterializationPhase | None = Field(
        default=None, description="The profile Job's phase: Pending, Running, Succeeded, Failed."
    )
    key: str | None = Field(
        default=None, description="The key id the newest reporting instance needed."
    )
    restored: int = Field(default=0, ge=0, description="Instances whose start restored.")
    refused: int = Field(default=0, ge=0, description="Instances that refused an artifact.")
    saved_seconds: float | None = Field(
        default=None, description="Mean start-up seconds saved by the instances that restored."
    )
