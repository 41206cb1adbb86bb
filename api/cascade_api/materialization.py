"""Status types of spec.materialization: the profile Job and what each instance did.

A profile Job records the engine's start-up state once beside the weights; each worker
then reports whether its start restored it, profiled (nothing to restore), or refused an
artifact recorded for another start (`MaterializationState`: the worker's report in
cascade_protocol.materialize uses the same enum).
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


class MaterializationState(StrEnum):
    """What a worker's start did with materialized state."""

    RESTORED = "restored"  # a matching artifact replaced profiling (and compiling)
    PROFILED = "profiled"  # no artifact: measured at start (the cold path)
    REFUSED = "refused"  # an artifact was offered but its key did not match: cold path
    RECORDED = "recorded"  # a profile Job's run: measured and written


class InstanceMaterialization(ApiModel):
    state: MaterializationState = Field(
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
