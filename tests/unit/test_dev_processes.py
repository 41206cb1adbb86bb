"""Detached processes with pidfiles (runs `sleep`; no network, no cluster)."""

from __future__ import annotations

import os
from pathlib import Path

from cascade_dev import processes
from cascade_dev.paths import StatePaths


def test_start_is_idempotent_and_stop_cleans_up(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    argv = ["/bin/sh", "-c", "sleep 60", str(tmp_path)]
    pid = processes.start(paths, "napper", argv)
    assert processes.running(paths, "napper") == pid
    assert processes.start(paths, "napper", argv) == pid
    assert os.getpgid(pid) == pid  # own session and process group
    assert pid in processes.stragglers(tmp_path)
    processes.stop(paths, "napper", grace=2.0)
    assert not processes.alive(pid)
    assert not paths.pidfile("napper").exists()
    assert "start: /bin/sh" in paths.logfile("napper").read_text()
    assert processes.stragglers(tmp_path) == []


def test_stale_pidfile_is_not_running(tmp_path: Path) -> None:
    paths = StatePaths(tmp_path)
    paths.pidfile("ghost").write_text(f"{os.getpid()}\n")  # alive, but not ours
    assert processes.running(paths, "ghost") is None
    paths.pidfile("ghost").write_text("garbage\n")
    assert processes.running(paths, "ghost") is None
