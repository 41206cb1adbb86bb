"""An instance's latency room: the largest batch known to meet its ITL SLO.

The local batch controller (`batch_size`) lowers a cap for two reasons: a larger batch
missed the ITL SLO (LBP >= 1), or it did not pay in throughput (TBP). Only the first
means the instance is full. After the second it can still take more requests within its
SLO, so the requests the lower cap holds back are not demand for another instance; the
global policy (`interactive.occupancy`) counts an instance's requests over this room, not
over its cap. Until an LBP halving the room is the engine limit (the controller's own
start); the halving sets it to the new cap, and every judged window whose ITL met the SLO
raises it to the batch that ran there. An idle reset forgets it.
"""

from __future__ import annotations


def room_after(
    room: int | None, halved_for_latency: bool, met_slo: bool, cap: int, running: int
) -> int | None:
    """The room after one judged window; `cap` is the cap the window's decision set.
    None: no latency halving yet (the engine limit)."""
    if halved_for_latency:
        return cap
    if met_slo and room is not None:
        return max(room, running)
    return room


def latency_room(room: int | None, cap: int, engine_max: int) -> int:
    """The batch an instance can run within its ITL SLO: at least its cap."""
    limit = max(1, engine_max)
    return max(cap, min(limit if room is None else room, limit))
