"""Detached processes with pidfiles, and a sweep that leaves nothing behind.

Each control-plane process runs in its own session (so a terminal's Ctrl-C or the CLI
exiting does not touch it), logs to `logs/<name>.log`, and is found again through
`<name>.pid`. A pid only counts as ours while its command line still names the state
dir, which protects against pid reuse after a reboot.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from cascade_dev.paths import StatePaths


def _proc_text(pid: int, what: str) -> str:
    try:
        return (
            Path(f"/proc/{pid}/{what}").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """True for a live process (zombies are reaped when they are our children, else dead)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    stat = _proc_text(pid, "stat")
    if not stat:
        return False
    state = stat.rsplit(")", 1)[-1].split()[0]
    return state not in ("Z", "X")


def read_pid(pidfile: Path) -> int | None:
    try:
        return int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None


def running(paths: StatePaths, name: str) -> int | None:
    """The pid of component `name` if it is alive and still ours."""
    pid = read_pid(paths.pidfile(name))
    if pid is None or not alive(pid):
        return None
    return pid if str(paths.root) in _proc_text(pid, "cmdline") else None


def start(
    paths: StatePaths, name: str, argv: list[str], env: Mapping[str, str] | None = None
) -> int:
    """Start `argv` detached unless it already runs; return its pid."""
    pid = running(paths, name)
    if pid is not None:
        return pid
    paths.logs.mkdir(parents=True, exist_ok=True)
    log = paths.logfile(name)
    with open(log, "ab") as fh:
        stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        fh.write(f"\n==== {stamp} start: {' '.join(argv)}\n".encode())
        fh.flush()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=paths.root,
            env={**os.environ, **(env or {})},
            start_new_session=True,
            close_fds=True,
        )
    paths.pidfile(name).write_text(f"{proc.pid}\n")
    # Popen returns once exec has begun; /proc/<pid>/cmdline is empty for a moment more.
    deadline = time.monotonic() + 1.0
    while not _proc_text(proc.pid, "cmdline") and alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.005)
    return proc.pid


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def signal_tree(pid: int, sig: int) -> None:
    """Signal the process group led by pid, or just pid when it leads none."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def terminate(pids: Iterable[int], grace: float = 5.0) -> None:
    """SIGTERM, wait up to `grace` seconds, then SIGKILL whatever is left."""
    todo = {p for p in pids if p > 1 and p != os.getpid() and alive(p)}
    for pid in todo:
        signal_tree(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while todo and time.monotonic() < deadline:
        time.sleep(0.05)
        todo = {p for p in todo if alive(p)}
    for pid in todo:
        signal_tree(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0
    while todo and time.monotonic() < deadline:
        time.sleep(0.02)
        todo = {p for p in todo if alive(p)}


def stop(paths: StatePaths, name: str, grace: float = 5.0) -> None:
    pid = running(paths, name)
    if pid is not None:
        terminate([pid], grace)
    with contextlib.suppress(FileNotFoundError):
        paths.pidfile(name).unlink()


def ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        stat = _proc_text(pid, "stat")
        pid = int(stat.rsplit(")", 1)[-1].split()[1]) if stat else 0
    return pids


def stragglers(root: Path) -> list[int]:
    """Processes that still belong to the cluster at `root`: their command line names it,
    or they run inside it (pods run with cwd under pods/)."""
    mine, found = ancestors(), []
    needle = re.compile(re.escape(str(root)) + r"(/|\s|$)")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        pid = int(entry.name)
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            cwd = ""
        if (needle.search(_proc_text(pid, "cmdline")) or needle.match(cwd + "/")) and alive(pid):
            found.append(pid)
    return sorted(found)
