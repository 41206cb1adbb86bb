"""Kubernetes timestamp formats, so every module writes times the way the API expects.

Pod and node status use RFC 3339 with second precision; Lease renewTime is a MicroTime
(six fractional digits). Both are UTC with a trailing "Z".
"""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    """Current time in UTC (the one wall-clock read the I/O layers pass down)."""
    return datetime.now(UTC)


def rfc3339(t: datetime) -> str:
    """Second-precision timestamp, e.g. 2024-01-02T03:04:05Z."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(t: datetime) -> str:
    """MicroTime, e.g. 2024-01-02T03:04:05.123456Z (Lease renewTime/acquireTime)."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(s: str | None) -> datetime | None:
    """Parse an API timestamp (with or without fraction); None for None/empty/garbage."""
    if not s:
        return None
    try:
        return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None
