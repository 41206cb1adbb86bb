"""CPU accounting for a timed window: is the network the bottleneck, or the CPU?

On a 2-core machine eight participants can saturate the CPU long before the shaped links
are full, so every run records (a) CPU seconds its participants used inside the window
(utime+stime from /proc/<pid>/stat) and (b) how busy the whole host was (from /proc/stat,
which includes kernel networking in softirq and any other load on the machine).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def parse_pid_stat(text: str) -> float:
    """utime + stime in seconds from one /proc/<pid>/stat line."""
    fields = text.rsplit(")", 1)[1].split()  # the command name may contain spaces
    return (int(fields[11]) + int(fields[12])) / TICK


def parse_host_stat(text: str) -> tuple[int, int]:
    """(busy, total) jiffies from /proc/stat's aggregate "cpu" line."""
    values = [int(v) for v in text.splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user
    return total - idle, total


def pid_cpu(pid: int) -> float | None:
    try:
        return parse_pid_stat(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, IndexError, ValueError):
        return None


def host_cpu() -> tuple[int, int]:
    return parse_host_stat(Path("/proc/stat").read_text())


def background_busy(seconds: float = 1.0) -> float:
    """Share of the host's CPUs busy over `seconds` before a step (other sessions' load)."""
    busy0, total0 = host_cpu()
    time.sleep(seconds)
    busy1, total1 = host_cpu()
    return (busy1 - busy0) / (total1 - total0) if total1 > total0 else 0.0


def wait_quiet(limit: float, max_wait_s: float) -> float:
    """Wait (up to max_wait_s) until other load on the host is at most `limit`; returns
    the last reading. On a shared 2-core host another session's tests skew every time."""
    deadline = time.monotonic() + max_wait_s
    busy = background_busy()
    while busy > limit and time.monotonic() < deadline:
        busy = background_busy(2.0)
    return busy


@dataclass
class Sample:
    t: float  # time.time()
    procs: dict[str, float]  # participant -> CPU seconds so far
    host: tuple[int, int]  # (busy, total) jiffies


@dataclass
class CpuTrace:
    """CPU samples taken while a step runs; any window of it can be read off afterwards
    (the common start is only known once the results are in)."""

    samples: list[Sample] = field(default_factory=list)
    cpus: int = os.cpu_count() or 1

    def sample(self, pids: Mapping[str, int], now: float) -> None:
        procs = {n: c for n, pid in pids.items() if (c := pid_cpu(pid)) is not None}
        self.samples.append(Sample(now, procs, host_cpu()))

    def between(self, t0: float, t1: float) -> dict[str, float]:
        """CPU used from the last sample at or before t0 to the first at or after t1."""
        if not self.samples:
            return {}
        before = [s for s in self.samples if s.t <= t0] or self.samples[:1]
        after = [s for s in self.samples if s.t >= t1] or self.samples[-1:]
        a, b = before[-1], after[0]
        last: dict[str, float] = {}
        for s in self.samples:  # a participant that exited keeps its last reading
            if a.t <= s.t <= b.t:
                last.update(s.procs)
        used = {n: last.get(n, c) - c for n, c in a.procs.items()}
        d_busy, d_total = b.host[0] - a.host[0], b.host[1] - a.host[1]
        return {
            "window_s": round(b.t - a.t, 3),
            "participants_cpu_s": round(sum(used.values()), 3),
            "max_participant_cpu_s": round(max(used.values(), default=0.0), 3),
            "host_busy": round(d_busy / d_total, 4) if d_total else 0.0,
            "host_cpus": self.cpus,
        }
