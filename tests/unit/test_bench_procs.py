"""Participant plumbing: start signal, readiness, and cleanup of whole process groups."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from cascade_bench.nodeio import BlockInfo, read_blocks, result_doc, write_blocks
from cascade_bench.procs import Launch, ParticipantError, Participants, await_start, release
from cascade_bench.steps import StepDir, judge


def test_release_then_await_start_shares_one_instant(tmp_path: Path) -> None:
    start_file = tmp_path / "start"
    start = release(start_file, delay_s=0.05)
    assert await_start(start_file, timeout=1) == pytest.approx(start, abs=1e-5)
    assert time.time() >= start


def test_await_start_times_out(tmp_path: Path) -> None:
    with pytest.raises(TimeoutError):
        await_start(tmp_path / "never", timeout=0.05)


def py(code: str, tmp_path: Path, name: str, ready: bool = True) -> Launch:
    return Launch(
        name=name,
        argv=[sys.executable, "-c", code],
        log=tmp_path / f"{name}.log",
        ready_file=tmp_path / f"{name}.ready" if ready else None,
    )


def test_ready_then_exit_codes(tmp_path: Path) -> None:
    code = f"import pathlib; pathlib.Path({str(tmp_path / 'a.ready')!r}).touch()"
    with Participants() as ps:
        ps.start(py(code, tmp_path, "a"))
        ps.wait_ready(10)
        assert ps.wait_all(10) == {"a": 0}


def test_participant_dying_before_ready_fails_with_its_log(tmp_path: Path) -> None:
    with Participants() as ps:
        ps.start(py("print('no model'); raise SystemExit(3)", tmp_path, "b"))
        with pytest.raises(ParticipantError, match="no model"):
            ps.wait_ready(10)


def test_exit_kills_children_of_participants(tmp_path: Path) -> None:
    child_pid = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time, pathlib;"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
        f"pathlib.Path({str(child_pid)!r}).write_text(str(p.pid)); time.sleep(60)"
    )
    with Participants() as ps:
        ps.start(py(code, tmp_path, "c", ready=False))
        deadline = time.monotonic() + 10
        while not child_pid.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ps.wait_all(0.1) == {"c": None}
    pid = int(child_pid.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        if state == "Z":
            break
        time.sleep(0.02)
    else:
        assert not Path(f"/proc/{pid}").exists()


def test_reported_counts_as_finished(tmp_path: Path) -> None:
    with Participants() as ps:
        ps.start(py("import time; time.sleep(60)", tmp_path, "d", ready=False))
        start = time.monotonic()
        assert ps.wait_all(30, ["d"], reported=lambda n: n == "d") == {"d": None}
        assert time.monotonic() - start < 5


def test_judge_tells_failures_from_lingering(tmp_path: Path) -> None:
    step = StepDir(tmp_path).make()
    step.result("r1").write_text("{}")
    codes = {"src": None, "r1": None, "r2": None, "r3": 1, "r4": 0}
    error, lingering = judge(step, codes, ["r1", "r2", "r3", "r4"])
    assert lingering == ["src", "r1"]
    assert error == (f"r2: still running; log {step.log('r2')}; r3: exit 1; log {step.log('r3')}")


def test_blocks_json_round_trip_and_result_shape(tmp_path: Path) -> None:
    blocks = [BlockInfo(0, 10, "aa"), BlockInfo(1, 12, "bb")]
    write_blocks(tmp_path / "blocks.json", blocks)
    assert read_blocks(tmp_path / "blocks.json") == blocks
    doc = result_doc("n", {1: 2.0, 0: 1.0}, 2.5, [], 22)
    assert doc == {
        "node": "n",
        "block_arrivals": {"0": 1.0, "1": 2.0},
        "complete_s": 2.5,
        "missing": [],
        "bytes_received": 22,
        "start_wall": None,
    }
