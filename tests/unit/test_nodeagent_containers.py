"""A container's run record across exits and restarts (node agent)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from cascade_dev.nodeagent.containers import Run
from cascade_dev.nodeagent.podstatus import Terminated, container_status
from cascade_dev.nodeagent.runner import Proc, read_record

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def test_crash_loop_backoff_then_restart_counts() -> None:
    run = Run("main", False, {"image": "busybox"})
    run.started(Proc(100, 1), "cascade-host:///bin/sleep", T0)
    assert run.view().state == "running" and run.restart_count == 0
    term = Terminated(1, T0 + timedelta(seconds=2), T0, "cascade://100")
    delay = run.finish(term, restart=True, mono=1000.0, pod_label="p_ns(u)")
    assert delay == 10 and run.retry_at == 1010.0
    v = run.view()
    assert (v.state, v.waiting_reason) == ("waiting", "CrashLoopBackOff")
    assert v.waiting_message is not None and "back-off 10s" in v.waiting_message
    assert v.last_terminated == term
    assert container_status(v)["lastState"]["terminated"]["exitCode"] == 1
    run.started(Proc(101, 2), "x", T0 + timedelta(seconds=12))
    assert run.restart_count == 1 and run.retry_at is None
    delay = run.finish(
        Terminated(1, T0 + timedelta(seconds=13)), restart=True, mono=2000.0, pod_label=""
    )
    assert delay == 20


def test_finish_without_restart_is_terminated() -> None:
    run = Run("job", False, {"image": "busybox"})
    run.started(Proc(5, 1), "x", T0)
    assert run.finish(Terminated(0, T0), restart=False, mono=0.0, pod_label="") is None
    v = run.view()
    assert v.state == "terminated" and v.container_id == "cascade://5" and not v.ready
    assert run.succeeded


def test_init_container_ready_only_when_succeeded() -> None:
    run = Run("init", True, {})
    run.started(Proc(5, 1), "x", T0)
    assert not run.view().ready
    run.finish(Terminated(0, T0), restart=False, mono=0.0, pod_label="")
    assert run.view().ready


def test_checkpoint_and_restore(tmp_path: Path) -> None:
    run = Run("main", False, {})
    run.started(Proc(77, 4242), "cascade://cascade-worker", T0)
    run.restart_count, run.backoff_step = 3, 2
    run.checkpoint(tmp_path / "main.run.json", 4242)
    rec = read_record(tmp_path / "main.run.json")
    assert rec is not None and (rec.pid, rec.start_ticks, rec.exit_code) == (77, 4242, None)
    again = Run("main", False, {})
    again.restore(rec)
    assert (again.pid, again.restart_count, again.backoff_step, again.started_at) == (77, 3, 2, T0)
    assert again.ran_before
