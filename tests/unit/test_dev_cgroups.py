"""The cpu cgroup I/O against a temporary directory standing in for /sys/fs/cgroup.

A plain directory is not cgroupfs: control files do not exist until written and
cgroup.procs keeps every pid appended to it, so the tests read back what was written.
Removal is injected (cgroupfs removes a group's files with its directory; rmdir here
would not), and a fake /proc gives the sessions and the agent's own group.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from cascade_dev import cgroups
from cascade_dev.cgroups import CpuCgroups
from cascade_dev.cpuquota import V1, V2
from cascade_dev.nodeagent.cpu import NodeCpu


def _stat(pid: int, session: int) -> str:
    return f"{pid} (sh) S 1 {session} {session} 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1000 0\n"


def fake_proc(root: Path, sessions: dict[int, int], own: str = "1:cpu:/\n0::/\n") -> Path:
    proc = root / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(own)
    for pid, sid in sessions.items():
        (proc / str(pid)).mkdir()
        (proc / str(pid) / "stat").write_text(_stat(pid, sid))
    return proc


def v1_sysfs(root: Path) -> Path:
    sysfs = root / "sys"
    (sysfs / "cpu").mkdir(parents=True)
    (sysfs / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    (sysfs / "cpu" / "cgroup.procs").write_text("")
    (sysfs / "unified").mkdir()
    return sysfs


def v2_sysfs(root: Path, subtree: str = "cpuset cpu io memory") -> Path:
    sysfs = root / "sys"
    sysfs.mkdir(parents=True)
    (sysfs / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (sysfs / "cgroup.subtree_control").write_text(subtree + "\n")
    return sysfs


def make(sysfs: Path, proc: Path) -> CpuCgroups:
    h = cgroups.detect(sysfs)
    assert h is not None
    return CpuCgroups(h, proc=proc, rmdir=shutil.rmtree, bind=link)


def link(source: Path, at: Path) -> None:
    """A bind mount's stand-in: the same files seen under another path."""
    at.parent.mkdir(parents=True, exist_ok=True)
    at.symlink_to(source)


def test_detects_v1_on_a_hybrid_host_and_v2_on_a_unified_one(tmp_path: Path) -> None:
    h1 = cgroups.detect(v1_sysfs(tmp_path / "a"))
    assert h1 is not None and (h1.flavour, h1.mount.name) == (V1, "cpu")
    h2 = cgroups.detect(v2_sysfs(tmp_path / "b"))
    assert h2 is not None and (h2.flavour, h2.mount) == (V2, tmp_path / "b" / "sys")
    (tmp_path / "c").mkdir()
    assert cgroups.detect(tmp_path / "c") is None


def test_v1_group_quota_update_and_placement(tmp_path: Path) -> None:
    sysfs = v1_sysfs(tmp_path)
    # pid 100 is a container (its own session) that already forked 101; 200 is unrelated
    cg = make(sysfs, fake_proc(tmp_path, {100: 100, 101: 100, 200: 200}))
    assert cg.problem() is None
    group = cg.ensure("cascade-node-0", 0.25)
    assert group == sysfs / "cpu" / "cascade-dev" / "cascade-node-0"
    assert (group / "cpu.cfs_period_us").read_text() == "100000"
    assert (group / "cpu.cfs_quota_us").read_text() == "25000"
    assert cg.limit("cascade-node-0") == 0.25
    cg.ensure("cascade-node-0", 0.5)  # a re-run `up` rewrites in place
    assert cg.limit("cascade-node-0") == 0.5
    assert (sysfs / "cpu" / "cpu.cfs_quota_us").read_text() == "-1\n"  # root untouched
    assert sorted(cg.place("cascade-node-0", 100)) == [100, 101]
    assert cg.pids("cascade-node-0") == [100, 101]
    assert cg.nodes() == ["cascade-node-0"]
    assert cg.limit("cascade-node-9") is None


def test_v2_enables_cpu_for_its_children_only(tmp_path: Path) -> None:
    sysfs = v2_sysfs(tmp_path)
    cg = make(sysfs, fake_proc(tmp_path, {}))
    group = cg.ensure("cascade-node-1", 1.5)
    assert (sysfs / "cascade-dev" / "cgroup.subtree_control").read_text() == "+cpu"
    assert (group / "cpu.max").read_text() == "150000 100000"
    assert (sysfs / "cgroup.subtree_control").read_text() == "cpuset cpu io memory\n"
    assert cg.limit("cascade-node-1") == 1.5


def test_v2_without_cpu_delegated_is_refused_not_fixed(tmp_path: Path) -> None:
    sysfs = v2_sysfs(tmp_path, subtree="memory io")
    cg = make(sysfs, fake_proc(tmp_path, {}))
    problem = cg.problem()
    assert problem is not None and "never changes the root group" in problem
    NodeCpu({"cascade-node-0": 0.5}, cg).apply()
    assert not (sysfs / "cascade-dev").exists()
    assert (sysfs / "cgroup.subtree_control").read_text() == "memory io\n"


def test_release_moves_pids_home_and_removes_groups(tmp_path: Path) -> None:
    sysfs = v1_sysfs(tmp_path)
    cg = make(sysfs, fake_proc(tmp_path, {7: 7}, own="1:cpu:/\n"))
    cg.ensure("cascade-node-0", 0.25)
    cg.ensure("cascade-node-1", 0.25)
    cg.place("cascade-node-1", 7)
    assert cg.release_all(keep=["cascade-node-0"]) == ["cascade-node-1"]
    assert cg.nodes() == ["cascade-node-0"]
    assert (sysfs / "cpu" / "cgroup.procs").read_text() == "7\n"
    assert cg.release_all() == ["cascade-node-0"]
    assert not (sysfs / "cpu" / "cascade-dev").exists()
    assert cg.release_all() == []  # idempotent


def test_release_never_sends_pids_into_our_own_groups(tmp_path: Path) -> None:
    sysfs = v1_sysfs(tmp_path)
    cg = make(sysfs, fake_proc(tmp_path, {}, own="1:cpu:/cascade-dev/cascade-node-0\n"))
    cg.ensure("cascade-node-0", 0.25)
    (sysfs / "cpu" / "cascade-dev" / "cascade-node-0" / "cgroup.procs").write_text("9\n")
    cg.release("cascade-node-0")
    assert (sysfs / "cpu" / "cgroup.procs").read_text() == "9\n"


def test_release_gives_up_on_a_group_that_stays_busy(tmp_path: Path) -> None:
    sysfs = v1_sysfs(tmp_path)

    def busy(path: Path) -> None:
        raise OSError(16, "Device or resource busy")

    h = cgroups.detect(sysfs)
    assert h is not None
    cg = CpuCgroups(h, proc=fake_proc(tmp_path, {}), rmdir=busy)
    cg.ensure("cascade-node-0", 0.25)
    with pytest.raises(cgroups.CgroupError, match="cannot remove"):
        cg.release("cascade-node-0", wait_s=0.1)


def pod_of(component: str | None) -> dict[str, object]:
    labels = {"app.kubernetes.io/component": component} if component else {}
    return {"metadata": {"labels": labels}}


def test_node_agent_applies_quotas_and_confines_only_node_work(tmp_path: Path) -> None:
    sysfs = v1_sysfs(tmp_path)
    cg = make(sysfs, fake_proc(tmp_path, {10: 10, 20: 20, 30: 30, 40: 40, 50: 50}))
    cg.ensure("cascade-node-9", 0.5)  # a node an earlier, larger `up` had
    exposed = tmp_path / "run" / "cgroup-cpu"
    cpu = NodeCpu({"cascade-node-0": 0.25, "cascade-node-1": None}, cg, exposed)
    cpu.apply()
    assert cg.nodes() == ["cascade-node-0"]
    job, gateway = pod_of("materialize"), pod_of("gateway")
    worker, copy = pod_of("worker"), pod_of("host-copy")
    cpu.confine("cascade-node-0", job, 10)
    cpu.confine("cascade-node-0", gateway, 20)
    cpu.confine("cascade-node-1", job, 30)  # no quota on that node
    # v1: a worker's accelerator threads place themselves; a host copy has none.
    cpu.confine("cascade-node-0", worker, 40)
    cpu.confine("cascade-node-0", copy, 50)
    assert cg.pids("cascade-node-0") == [10]
    # Pods the quota will hold size their thread pools to it from the start.
    assert cpu.env("cascade-node-0", job) == {"OMP_NUM_THREADS": "1"}
    # ... in the group as pods see it: /sys is remounted in their network namespace.
    tasks = str(exposed / "cascade-dev" / "cascade-node-0" / "tasks")
    assert (exposed / "cascade-dev" / "cascade-node-0").resolve() == cg.hierarchy.group(
        "cascade-node-0"
    ).resolve()
    assert cpu.env("cascade-node-0", worker) == {
        "OMP_NUM_THREADS": "1",
        "CASCADE_ACCELERATOR_TASKS": tasks,
    }
    assert "CASCADE_ACCELERATOR_TASKS" not in cpu.env("cascade-node-0", copy)
    assert cpu.env("cascade-node-0", gateway) == {}
    assert cpu.env("cascade-node-1", worker) == {}


def test_on_v2_a_worker_is_confined_whole(tmp_path: Path) -> None:
    """v2 places a thread apart from its process only in threaded subtrees: there the
    node's quota holds the worker's whole process, as before."""
    cg = make(v2_sysfs(tmp_path), fake_proc(tmp_path, {10: 10}))
    cpu = NodeCpu({"cascade-node-0": 0.5}, cg, tmp_path / "run" / "cgroup-cpu")
    cpu.apply()
    assert not (tmp_path / "run").exists()  # nothing exposed: threads are not placed
    cpu.confine("cascade-node-0", pod_of("worker"), 10)
    assert cg.pids("cascade-node-0") == [10]
    assert cpu.env("cascade-node-0", pod_of("worker")) == {"OMP_NUM_THREADS": "1"}


def test_node_agent_without_a_controller_runs_pods_unconfined(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cpu = NodeCpu({"cascade-node-0": 0.25}, None)
    with caplog.at_level(logging.ERROR):
        cpu.apply()
    assert "without CPU quota" in caplog.text
    cpu.confine("cascade-node-0", {}, 1)  # no error, nothing to do
