"""Container processes: launch, identity, signals, and the files that outlive the agent.

Each container is one process started in its own session (so its process group id is
its pid and a signal to the group reaches everything it spawned), with the pod
directory as working dir and stdout/stderr appended to `<container>.log`. The pid goes
to `<container>.pid` (what `cascade dev down` reads) and a small JSON record beside it
keeps what a restarted agent needs to re-adopt the run instead of starting a duplicate:
the process start time in clock ticks (guards against pid reuse), the restart count,
the back-off step and, once seen, the exit code.

When the agent may mount (root), the argv is wrapped in `sh -c` that bind-mounts each
volume at its mountPath inside the private mount namespace `ip netns exec` (or
`unshare --mount` without a netns) creates, then execs the command, through `setpriv`
where the container's securityContext names another user (identity.py); the pid stays
the same through every exec.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

from .timeutil import now, rfc3339

# Starts the line the agent writes into a container's log at each launch.
LOG_HEADER = b"--- cascade node agent "


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = False


def mount_script(mounts: Sequence[Mount]) -> str:
    """Shell that bind-mounts every volume, then execs "$@"."""
    lines = ["set -e"]
    for m in mounts:
        src, dst = shlex.quote(m.source), shlex.quote(m.target)
        lines.append(
            f"if [ -d {src} ]; then mkdir -p {dst}; "
            f'else mkdir -p "$(dirname {dst})"; [ -e {dst} ] || : > {dst}; fi'
        )
        lines.append(f"mount --bind {src} {dst}")
        if m.read_only:
            lines.append(f"mount -o remount,bind,ro {dst}")
    lines.append('exec "$@"')
    return "\n".join(lines)


def build_argv(
    argv: Sequence[str],
    prefix: Sequence[str],
    mounts: Sequence[Mount],
    *,
    can_mount: bool,
    become: Sequence[str] = (),
) -> list[str]:
    """Full command line: network-namespace prefix, optional mount wrapper (as root), the
    identity change (`become`: setpriv, identity.py), the program."""
    if not (mounts and can_mount):
        return [*prefix, *become, *argv]
    ns = list(prefix) or ["unshare", "--mount", "--propagation", "private"]
    return [*ns, "sh", "-c", mount_script(mounts), "cascade-mounts", *become, *argv]


@dataclass
class Record:
    """Per-container checkpoint in `<container>.json`."""

    pid: int
    start_ticks: int
    started_at: str
    restart_count: int = 0
    backoff_step: int = 0
    image_id: str = ""
    exit_code: int | None = None
    finished_at: str | None = None


def write_record(path: Path, rec: Record) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(rec)))
    tmp.replace(path)


def read_record(path: Path) -> Record | None:
    try:
        d = json.loads(path.read_text())
        return Record(**{k: d[k] for k in Record.__dataclass_fields__ if k in d})
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()  # fields from #3 (state) on


def start_ticks(pid: int) -> int | None:
    f = _stat_fields(pid)
    return int(f[19]) if f and len(f) > 19 else None


ExitWaiter = Callable[[], int | None]


@dataclass
class Proc:
    """A running (or finished) container process. `popen` is ours when we exec'd it;
    `waiter` gives the exit code of one forked by the worker template; an adopted one
    has neither (its exit code is unknowable)."""

    pid: int
    start_ticks: int
    popen: subprocess.Popen[bytes] | None = None
    waiter: ExitWaiter | None = None

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        f = _stat_fields(self.pid)
        return (
            bool(f) and f is not None and f[0] not in ("Z", "X") and int(f[19]) == self.start_ticks
        )

    def exit_code(self) -> int | None:
        """Exit code as kubelet reports it (128+signal when killed); None if unknowable."""
        if self.popen is None:
            return self.waiter() if self.waiter is not None else None
        rc = self.popen.wait()
        return 128 - rc if rc < 0 else rc

    def signal(self, sig: int) -> None:
        """Signal the whole process group (the container and all it spawned)."""
        if self.popen is None and not self.alive():
            return
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError:
            os.kill(self.pid, sig)


def adopt(pid: int, ticks: int) -> Proc | None:
    """The process of a previous agent's record, if it is still that process."""
    p = Proc(pid, ticks)
    return p if p.alive() else None


def write_log_header(log: BinaryIO, argv: Sequence[str], via: str = "exec") -> None:
    """The line that starts each run of a container in its log."""
    log.write(LOG_HEADER + f"{rfc3339(now())}: {via} {shlex.join(argv)}\n".encode())
    log.flush()


def launch(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    log_path: Path,
    pid_path: Path,
    shown: Sequence[str] | None = None,
) -> Proc:
    """Start one container process in its own session; raises OSError if it cannot.
    `shown` is the command line written to the log header (default: argv)."""
    with open(log_path, "ab") as log:
        write_log_header(log, shown if shown is not None else argv)
        popen = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    pid_path.write_text(f"{popen.pid}\n")
    return Proc(popen.pid, start_ticks(popen.pid) or 0, popen)


def kill_now(pid: int) -> None:
    """SIGKILL a process group by pid, ignoring processes already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
