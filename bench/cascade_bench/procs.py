"""Participants: one process per simulated node, started in that node's network namespace.

Each participant gets its own session (process group), so a Ctrl-C in the terminal reaches
only the benchmark, which then kills every group it started; `Participants` does that on
any exit from its `with` block. Readiness is a file the participant creates once it has
loaded its data and opened its connections; the start signal is a file too (all
participants share this host's clock and filesystem).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

POLL_S = 0.05


class ParticipantError(RuntimeError):
    pass


@dataclass(frozen=True)
class Launch:
    name: str
    argv: Sequence[str]
    log: Path
    prefix: Sequence[str] = ()  # ["ip", "netns", "exec", ns] on the fabric
    env: Mapping[str, str] = field(default_factory=dict)
    ready_file: Path | None = None


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class Participants:
    """The processes of one benchmark step; all of them die when the block exits."""

    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.launches: dict[str, Launch] = {}

    def __enter__(self) -> Participants:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.kill_all()

    def start(self, launch: Launch) -> None:
        launch.log.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **launch.env}
        with open(launch.log, "wb") as log:
            proc = subprocess.Popen(
                [*launch.prefix, *launch.argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        self.procs[launch.name] = proc
        self.launches[launch.name] = launch

    def start_all(self, launches: Iterable[Launch]) -> None:
        for launch in launches:
            self.start(launch)

    def _failed(self, name: str) -> ParticipantError:
        launch = self.launches[name]
        code = self.procs[name].returncode
        return ParticipantError(f"{name} exited with {code}; log {launch.log}:\n{tail(launch.log)}")

    def wait_ready(self, timeout: float) -> None:
        """Until every participant's ready file exists; a participant that exits first fails."""
        deadline = time.monotonic() + timeout
        pending = {n for n, la in self.launches.items() if la.ready_file is not None}
        while pending:
            for name in sorted(pending):
                ready = self.launches[name].ready_file
                if ready is not None and ready.exists():
                    pending.discard(name)
                elif self.procs[name].poll() is not None:
                    raise self._failed(name)
            if pending and time.monotonic() > deadline:
                raise ParticipantError(f"not ready after {timeout:.0f}s: {sorted(pending)}")
            time.sleep(POLL_S)

    def pids(self) -> dict[str, int]:
        """Participants still running (the python process itself: `ip netns exec` execs)."""
        return {n: p.pid for n, p in self.procs.items() if p.poll() is None}

    def wait_all(
        self,
        timeout: float,
        names: Iterable[str] | None = None,
        fail_fast: bool = False,
        on_poll: Callable[[], None] | None = None,
        reported: Callable[[str], bool] | None = None,
    ) -> dict[str, int | None]:
        """Exit codes (None: still running) of every participant once each of `names`
        (default: all) has exited or `reported` it done, or the timeout passed.
        fail_fast: stop as soon as any participant exits with an error, since the
        others may wait for it forever."""
        wanted = list(self.procs) if names is None else list(names)

        def finished(n: str) -> bool:
            return self.procs[n].poll() is not None or (reported is not None and reported(n))

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(finished(n) for n in wanted):
                break
            if fail_fast and any(p.poll() not in (None, 0) for p in self.procs.values()):
                break
            if on_poll is not None:
                on_poll()
            time.sleep(POLL_S)
        return {n: p.poll() for n, p in self.procs.items()}

    def kill_all(self, grace: float = 3.0) -> None:
        """SIGTERM every process group, SIGKILL what is left after `grace` seconds."""
        live = [p for p in self.procs.values() if p.poll() is None]
        for proc in live:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
        for proc in self.procs.values():
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5.0)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def release(start_file: Path, delay_s: float = 0.5) -> float:
    """Write the common start time (epoch seconds, `delay_s` ahead) where all can read it."""
    start = time.time() + delay_s
    tmp = start_file.with_suffix(".tmp")
    tmp.write_text(f"{start:.6f}\n")
    tmp.replace(start_file)
    return start


def await_start(start_file: Path, timeout: float = 600.0) -> float:
    """Participant side of `release`: block until the start file appears, then until then."""
    deadline = time.monotonic() + timeout
    while not start_file.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no start signal in {start_file} after {timeout:.0f}s")
        time.sleep(0.005)
    start = float(start_file.read_text().strip())
    wait = start - time.time()
    if wait > 0:
        time.sleep(wait)
    return start
