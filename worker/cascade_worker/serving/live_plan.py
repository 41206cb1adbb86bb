"""Where a worker sits in a live scale-up's execution pipelines (pure: from the plan).

serving/live.py acts on these; they only read the ScalePlan and addresses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cascade_api.scaleplan import ScalePlanSpec


@dataclass(frozen=True)
class Seat:
    """This worker's place in one of a plan's execution pipelines."""

    members: tuple[str, ...]  # pods in layer order; the first is the head
    position: int
    layers: tuple[int, int]  # half-open decoder-layer range it runs

    @property
    def is_head(self) -> bool:
        return self.position == 0


def seat_for(plan: ScalePlanSpec, me: str) -> Seat | None:
    """The pipeline `me` takes part in, if any (pure)."""
    for pipeline in plan.execution_pipelines:
        pods = tuple(s.pod for s in pipeline.stages)
        for i, stage in enumerate(pipeline.stages):
            if stage.pod == me:
                return Seat(pods, i, (stage.layer_start, stage.layer_end))
    return None


def covers(ranges: Sequence[tuple[int, int]], layers: tuple[int, int]) -> bool:
    """Does one of the held runs `ranges` contain `layers`?"""
    return any(a <= layers[0] and layers[1] <= b for a, b in ranges)


def stage_address(peer_data: str, listening: str) -> str:
    """A stage's pipeline address as the head reaches it: the host the plan's peers map
    gives (a worker bound to every interface reports 0.0.0.0), the port it listens on."""
    return f"{peer_data.rpartition(':')[0]}:{listening.rpartition(':')[2]}"
