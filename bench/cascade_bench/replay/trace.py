"""Reading a request trace: one row per request, arrival offsets from its timestamps.

The Azure LLM inference traces (`TIMESTAMP,ContextTokens,GeneratedTokens`) are the format;
any CSV with those columns works. A malformed row is an error naming the file and line,
never a silently skipped request: a replay that drops rows would report on a lighter load
than the one it claims to replay.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


class TraceError(ValueError):
    """The trace cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class TraceRow:
    index: int  # position in the file (0-based, header excluded): stable request identity
    offset_s: float  # arrival, seconds after the trace's earliest timestamp
    context_tokens: int  # prompt length in the production system's tokens
    generated_tokens: int  # output length in the production system's tokens


@dataclass(frozen=True)
class Trace:
    name: str  # file name, for reports
    rows: tuple[TraceRow, ...]  # sorted by arrival

    @property
    def span_s(self) -> float:
        return self.rows[-1].offset_s if self.rows else 0.0


def _count(value: str, column: str, where: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise TraceError(f"{where}: {column} is not an integer: {value!r}") from None
    if n < 0:
        raise TraceError(f"{where}: {column} is negative: {n}")
    return n


def parse_trace(lines: Iterable[str], name: str) -> Trace:
    """Parse CSV text lines (header first). Offsets are relative to the earliest timestamp."""
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        raise TraceError(f"{name}: empty file, expected header {','.join(COLUMNS)}")
    header = [h.strip() for h in header]
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise TraceError(f"{name}:1: missing column(s) {', '.join(missing)} in header {header}")
    cols = [header.index(c) for c in COLUMNS]
    parsed: list[tuple[int, datetime, int, int]] = []
    for cells in reader:
        line = reader.line_num
        if not cells or all(not c.strip() for c in cells):
            continue  # blank line (e.g. trailing newline)
        where = f"{name}:{line}"
        if len(cells) != len(header):
            raise TraceError(f"{where}: expected {len(header)} fields, got {len(cells)}")
        stamp, ctx, gen = (cells[i].strip() for i in cols)
        try:
            when = datetime.fromisoformat(stamp)
        except ValueError:
            raise TraceError(f"{where}: TIMESTAMP is not a date-time: {stamp!r}") from None
        if parsed and (when.tzinfo is None) != (parsed[0][1].tzinfo is None):
            raise TraceError(f"{where}: TIMESTAMP mixes time zone and naive times: {stamp!r}")
        parsed.append(
            (len(parsed), when, _count(ctx, COLUMNS[1], where), _count(gen, COLUMNS[2], where))
        )
    if not parsed:
        return Trace(name, ())
    t0 = min(p[1] for p in parsed)
    rows = [TraceRow(i, (when - t0).total_seconds(), c, g) for i, when, c, g in parsed]
    rows.sort(key=lambda r: (r.offset_s, r.index))
    return Trace(name, tuple(rows))


def load_trace(path: Path) -> Trace:
    """Read a trace file; errors name the path and line."""
    try:
        with path.open(newline="") as f:
            return parse_trace(f, str(path))
    except OSError as exc:
        raise TraceError(f"{path}: cannot read trace: {exc.strerror or exc}") from None
