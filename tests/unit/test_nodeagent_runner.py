"""Command-line building, records and the work queue of the node agent."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from cascade_dev.nodeagent.runner import Mount, Record, build_argv, read_record, write_record
from cascade_dev.nodeagent.workqueue import WorkQueue

SA = "/var/run/secrets/kubernetes.io/serviceaccount"


def test_argv_without_mounts_is_prefix_plus_program() -> None:
    argv = build_argv(["/bin/sleep", "5"], ["ip", "netns", "exec", "cxp-1"], [], can_mount=True)
    assert argv == ["ip", "netns", "exec", "cxp-1", "/bin/sleep", "5"]


def test_argv_with_mounts_wraps_in_sh() -> None:
    mounts = [Mount("/state/pods/u/volumes/tok", SA, read_only=True), Mount("/data dir", "/data")]
    argv = build_argv(["/bin/sleep", "5"], ["ip", "netns", "exec", "ns"], mounts, can_mount=True)
    assert argv[:6] == ["ip", "netns", "exec", "ns", "sh", "-c"]
    assert argv[7:] == ["cascade-mounts", "/bin/sleep", "5"]
    script = argv[6]
    assert f"mount --bind /state/pods/u/volumes/tok {SA}" in script
    assert f"mount -o remount,bind,ro {SA}" in script
    assert "mount --bind '/data dir' /data" in script
    assert script.rstrip().endswith('exec "$@"')


def test_argv_mounts_without_netns_use_unshare() -> None:
    argv = build_argv(["/bin/true"], [], [Mount("/a", "/b")], can_mount=True)
    assert argv[:4] == ["unshare", "--mount", "--propagation", "private"]


def test_argv_no_mounts_when_not_root() -> None:
    assert build_argv(["/bin/true"], [], [Mount("/a", "/b")], can_mount=False) == ["/bin/true"]


def test_record_roundtrip(tmp_path: Path) -> None:
    rec = Record(
        pid=42,
        start_ticks=1234,
        started_at="2024-01-01T00:00:00Z",
        restart_count=2,
        backoff_step=1,
        image_id="cascade://cascade-worker",
        exit_code=None,
    )
    write_record(tmp_path / "c.run.json", rec)
    assert read_record(tmp_path / "c.run.json") == rec
    assert read_record(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text("{")
    assert read_record(tmp_path / "bad.json") is None


def test_workqueue_dedupes_and_serialises_keys() -> None:
    q = WorkQueue()
    q.add("a")
    q.add("a")
    q.add("b")
    assert q.get() == "a"
    q.add("a")  # while processing: runs again after done()
    assert q.get() == "b"
    q.done("b")
    q.done("a")
    assert q.get() == "a"
    q.done("a")
    q.shutdown()
    assert q.get() is None


def test_workqueue_add_after() -> None:
    q = WorkQueue()
    got: list[tuple[str, float]] = []
    t0 = time.monotonic()

    def worker() -> None:
        while (k := q.get()) is not None:
            got.append((k, time.monotonic() - t0))
            q.done(k)

    th = threading.Thread(target=worker, daemon=True)
    th.start()
    q.add_after("late", 0.2)
    q.add_after("soon", 0.05)
    time.sleep(0.4)
    q.shutdown()
    th.join(1)
    assert [k for k, _ in got] == ["soon", "late"]
    assert got[1][1] >= 0.2
