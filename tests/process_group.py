"""Run a command in a process group of its own, killed whole on timeout (conftest.py runs
each `ucx` test this way; tests/unit/test_isolated_runs.py tests it). A module of its
own, not conftest: several conftest modules share that import name."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path


def run_in_group(
    cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int | None, str]:
    """(exit code, or None on timeout; stdout and stderr) of `cmd`, run in a session of
    its own so that a timeout kills the whole process group: a hung test's worker
    processes and UCX threads must not outlive it (or hold its output pipe open)."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=timeout)
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        return None, _kill_group(proc)
    finally:
        if proc.returncode is None:  # interrupted: take the child down with us
            _kill_group(proc)


def _kill_group(proc: subprocess.Popen[str]) -> str:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the child leads its group (own session)
    output, _ = proc.communicate()
    return output or ""
