"""The cold-start bench's pure half: each mode's deployment, the goals, the table; and
how it reads a pod's resident memory (from a fake /proc)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cascade_bench.coldstart import memory, modes, report

BASE = modes.BASE_SPEC | {"model": {"uri": "file:///m", "servedName": "cold"}}


def test_each_mode_starts_where_it_says() -> None:
    spec = {m: modes.mode_spec(BASE, m, "zero_to_one") for m in modes.MODES}
    assert [spec[m]["replicas"] for m in modes.MODES] == [0, 0, 0, 1]
    assert [spec[m]["hostCopies"] for m in modes.MODES] == [0, 0, 1, 0]
    assert [spec[m]["materialization"]["enabled"] for m in modes.MODES] == [False, True, True, True]
    two = modes.mode_spec(BASE, "storage", "one_to_two")
    assert two["replicas"] == 1 and two["multicast"]["fromPeers"] is False
    with pytest.raises(ValueError, match="unknown mode"):
        modes.mode_spec(BASE, "cache", "zero_to_one")


def row(ttft: float, **stages: float) -> dict[str, Any]:
    return {"to_first_token_s": ttft, "stages": stages, "weights_from": "storage"}


def test_goals_read_the_rows() -> None:
    rows = {
        "zero_to_one": {
            "storage": row(20.0, engine_init=2.0, weights=12.0),
            "storage_materialized": {"skipped": "a-run: not seen in 300 s"},
            "pool": row(6.0, weights=1.5, engine_init=2.0),
        }
    }
    held = {"replicas_1": 1000, "replicas_6": 1010, "replicas_0": 1000}
    doc = report.document({"model_bytes": 1000}, rows, report.HostMemory(1, held), 1.0)
    g = {x["goal"].split(" ")[0]: x for x in doc["goals"]}
    assert g["pool"]["holds"] and g["pool"]["detail"] == "0.30 x"
    assert g["materialization"]["holds"] is None  # not measured: neither pass nor fail
    assert g["host"]["holds"]
    grown = report.HostMemory(1, held | {"replicas_6": 6000})
    off = report.document({"model_bytes": 1000}, rows, grown, 1.0)
    assert off["goals"][2]["holds"] is False
    text = report.table(doc)
    assert "storage_materialized: skipped: a-run: not seen in 300 s" in text
    assert "goal PASS" in text
    assert report.stage_names(doc) == ["weights", "engine_init"]  # start-up order


def test_the_materialization_goal_compares_the_engine_stages() -> None:
    cold = row(12.0, weights=9.0, engine_init=0.12, kv_sizing=0.8, warmup=0.0)
    for warm_kv, holds in ((0.0, True), (0.3, False)):
        warm = row(11.0, weights=9.0, engine_init=0.12, kv_sizing=warm_kv, warmup=0.0)
        rows = {"zero_to_one": {"storage": cold, "storage_materialized": warm}}
        doc = report.document({"model_bytes": 1000}, rows, report.HostMemory(), 1.0)
        goal = next(g for g in doc["goals"] if g["goal"].startswith("materialization"))
        assert goal["holds"] is holds, goal


def host_goal(doc: dict[str, Any]) -> dict[str, Any]:
    return next(g for g in doc["goals"] if g["goal"].startswith("host"))


def test_host_memory_is_the_pods_resident_memory_and_copies_come_from_the_spec() -> None:
    """RSS holds the model plus the process's runtime: the goal is that the tier holds
    at least hostCopies x the model and stays flat across replicas, not equality with
    the blocks it packed (a figure that can only ever match itself)."""
    spec = modes.mode_spec(BASE | {"hostCopies": 3}, "pool", "zero_to_one")
    assert report.spec_host_copies(spec) == 1  # the pool mode deploys one
    assert report.spec_host_copies({"model": {"uri": "file:///m"}, "hostCopies": 2}) == 2
    assert report.spec_host_copies({"model": {"uri": "file:///m"}}) == 1  # the API default
    rss = {"replicas_1": 2600, "replicas_6": 2620, "replicas_0": 2590}
    workers = {"replicas_1": 5000, "replicas_6": 30000, "replicas_0": 0}
    held = report.HostMemory(2, rss, blocks={"replicas_1": 2000}, workers=workers)
    doc = report.document({"model_bytes": 1000}, {}, held, 1.0)
    assert doc["host_copies"] == 2 and doc["host_bytes"] == rss
    assert doc["host_block_bytes"] == {"replicas_1": 2000}
    assert doc["worker_rss_bytes"] == workers
    goal = host_goal(doc)
    assert goal["holds"] is True and "want >= 2,000 B" in goal["detail"], goal
    short = report.HostMemory(2, rss | {"replicas_0": 1500})  # one copy let the model go
    assert host_goal(report.document({"model_bytes": 1000}, {}, short, 1.0))["holds"] is False
    missing = report.HostMemory(2, rss | {"replicas_6": None})
    assert host_goal(report.document({"model_bytes": 1000}, {}, missing, 1.0))["holds"] is False
    unmeasured = report.document({"model_bytes": 1000}, {}, report.HostMemory(), 1.0)
    assert unmeasured["host_copies"] is None and host_goal(unmeasured)["holds"] is None
    text = report.table(doc)
    assert "host tier RSS" in text and "workers RSS" in text


def test_a_restore_reports_the_profile_and_its_own_time_from_the_same_run() -> None:
    worker = {"state": "restored", "profileS": 0.9, "restoreS": 0.012, "savedS": 0.888}
    assert report.restore_figures(worker) == {
        "profile_s": 0.9, "restore_s": 0.012, "saved_s": 0.888,
    }  # fmt: skip
    assert report.restore_figures({"state": "profiled"}) == {}
    assert report.restore_figures(None) == {}
    warm = row(11.0, kv_sizing=0.012) | report.restore_figures(worker)
    doc = report.document({"model_bytes": 1}, {"zero_to_one": {"storage_materialized": warm}},
                          report.HostMemory(), 1.0)  # fmt: skip
    assert "restore 0.012 s of a 0.900 s profile: saved 0.888 s" in report.table(doc)


def fake_proc(root: Path, pid: int, session: int, rss_kib: int | None) -> None:
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "stat").write_text(f"{pid} (py thon) S 1 {session} {session} 0 -1 4194304 0 0\n")
    vm = f"VmRSS:\t{rss_kib} kB\n" if rss_kib is not None else ""
    (d / "status").write_text(f"Name:\tpython\nVmPeak:\t99999 kB\n{vm}Threads:\t4\n")


def test_a_pods_memory_is_the_resident_set_of_every_process_in_its_containers(
    tmp_path: Path,
) -> None:
    """Dev-cluster containers are processes (containerID cascade://PID), each started
    in its own session: a pod holds what every process of those sessions holds."""
    fake_proc(tmp_path, 100, 100, 1000)  # the host copy
    fake_proc(tmp_path, 101, 100, 500)  # a child it spawned
    fake_proc(tmp_path, 200, 200, 7000)  # a worker
    fake_proc(tmp_path, 2, 0, None)  # a kernel thread: no VmRSS
    (tmp_path / "self").mkdir()  # not a pid
    pods = {
        "host-0": ["cascade://100"],
        "worker-0": ["cascade://200", None],  # a container not started yet
        "gone": ["cascade://300"],  # its process exited
        "elsewhere": ["containerd://abc"],  # another runtime: not readable here
    }
    got = memory.pods_rss_bytes(pods, tmp_path)
    assert got == {"host-0": 1500 * 1024, "worker-0": 7000 * 1024, "gone": None,
                   "elsewhere": None}  # fmt: skip
    assert memory.container_pid("cascade://42") == 42
    assert memory.container_pid("cascade://cascade-worker") is None
    assert memory.total(got, ["host-0", "worker-0"]) == 8500 * 1024
    assert memory.total(got, ["host-0", "gone"]) is None  # one unmeasured: no total
    assert memory.total(got, []) == 0
