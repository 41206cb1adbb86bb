"""What a node reports when its transfer ends (written as JSON by the node process).

Times are seconds since the node received the common `start` frame. A transfer that
could not finish still reports: `missing` lists the blocks it does not hold, and
`complete_s` is null.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class NodeResult(BaseModel):
    node: str
    role: str  # "source" or "target"
    tier: str | None = None  # sources: "gpu" or "host"
    strategy: str
    start_wall: float = 0.0  # time.time() at start, to line up nodes in one timeline
    block_arrivals: dict[int, float] = Field(default_factory=dict)
    complete_s: float | None = None
    missing: list[int] = Field(default_factory=list)
    bytes_received: int = 0
    bytes_sent: int = 0
    refetched: list[int] = Field(default_factory=list)  # blocks rejected by checksum, re-fetched
    abandoned_peers: list[str] = Field(default_factory=list)  # upstreams that died on us
    layers_ready: list[tuple[float, int, int]] = Field(default_factory=list)  # (s, start, end)
    error: str | None = None


def arrivals(installed_at: dict[int, float], t0: float) -> dict[int, float]:
    """Block -> seconds since t0 for blocks installed after t0 (held-before are excluded)."""
    return {b: round(t - t0, 6) for b, t in sorted(installed_at.items()) if t >= t0}


def completion(arrived: dict[int, float], missing: list[int]) -> float | None:
    """Seconds until the last block arrived, or None if some block never did."""
    return None if missing else max(arrived.values(), default=0.0)
