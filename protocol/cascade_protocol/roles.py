"""Instance roles (Chiron §5): which request classes an instance is there for.

The operator's autoscaler splits the instances of a ModelDeployment into roles and
labels each worker pod (`cascade_api.constants.LABEL_ROLE`); the gateway routes by the
label. Interactive requests go to interactive and mixed instances; batch requests go to
batch instances and to mixed instances' spare room. A pod without the label is mixed,
so a deployment that nobody autoscales serves both classes everywhere, as before.
"""

from __future__ import annotations

from enum import StrEnum


class InstanceRole(StrEnum):
    INTERACTIVE = "interactive"
    MIXED = "mixed"
    BATCH = "batch"

    @classmethod
    def of_label(cls, value: str | None) -> InstanceRole:
        """The role a pod label names; missing or unknown values mean mixed."""
        try:
            return cls(value) if value else cls.MIXED
        except ValueError:
            return cls.MIXED
