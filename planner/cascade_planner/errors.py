"""Why a plan cannot be made, as a typed result the operator turns into a condition.

Planning fails on inputs, never by crashing: no sources at all, every source too busy
serving to send without interfering, fewer sources than the requested k, a block that
no source holds, or a malformed request. `PlanningError.reason` is a CamelCase code
meant for a condition's `reason` field; `message` says which pods or blocks.
"""

from __future__ import annotations

from enum import StrEnum


class PlanningReason(StrEnum):
    NO_SOURCES = "NoSources"  # no pod holds the model
    NO_TARGETS = "NoTargets"  # nothing to send to
    SOURCES_BUSY = "SourcesBusy"  # every source is pruned for serving traffic
    INSUFFICIENT_SOURCES = "InsufficientSources"  # k larger than the usable sources
    MISSING_BLOCKS = "MissingBlocks"  # some block has no holder
    INVALID_REQUEST = "InvalidRequest"  # overlapping pods, bad k, empty block table, ...


class PlanningError(ValueError):
    """A plan cannot be made from this request; `reason` is a condition reason code."""

    def __init__(self, reason: PlanningReason, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
