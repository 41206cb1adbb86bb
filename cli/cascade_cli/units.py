"""How the CLI's views write durations and sizes (`cascade plan show`, `cascade top`)."""

from __future__ import annotations


def seconds(value: float) -> str:
    """Three significant figures at most: 1.25s, 12.5s, 125s."""
    return f"{value:.{2 if value < 10 else 1 if value < 100 else 0}f}s"


def size(n: int) -> str:
    """Bytes in binary units: 512 B, 6.6 MiB."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"
