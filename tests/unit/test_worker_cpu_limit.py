"""Torch threads sized to the CPU quota: parsing /proc/self/cgroup and the quota files."""

from __future__ import annotations

from pathlib import Path

import pytest

from cascade_worker.engine import cpu_limit
from cascade_worker.engine.cpu_limit import ancestry, own_groups, quota_cores, threads_for

ROOT = Path("/cg")


def reader(files: dict[str, str]):  # type: ignore[no-untyped-def]
    return lambda path: files.get(str(path.relative_to(ROOT)))


V1_PROC = "12:cpu,cpuacct:/cascade-dev/node-3\n3:memory:/x\n1:name=systemd:/\n"
V2_PROC = "0::/kubepods/pod1/ctr\n"


def test_own_groups_finds_the_v1_cpu_line_and_the_v2_line() -> None:
    assert own_groups(V1_PROC) == (None, "/cascade-dev/node-3")
    assert own_groups(V2_PROC) == ("/kubepods/pod1/ctr", None)
    assert own_groups("garbage") == (None, None)


def test_ancestry_walks_up_to_the_root() -> None:
    assert ancestry("/a/b/c") == ["a/b/c", "a/b", "a"]
    assert ancestry("/") == []


def test_v1_quota_of_the_nodes_group() -> None:
    files = {
        "cpu,cpuacct/cascade-dev/node-3/cpu.cfs_quota_us": "20000\n",
        "cpu,cpuacct/cascade-dev/node-3/cpu.cfs_period_us": "100000\n",
        "cpu,cpuacct/cascade-dev/cpu.cfs_quota_us": "-1\n",
        "cpu,cpuacct/cascade-dev/cpu.cfs_period_us": "100000\n",
    }
    assert quota_cores(V1_PROC, reader(files), ROOT) == pytest.approx(0.2)


def test_v2_takes_the_tightest_quota_on_the_path() -> None:
    files = {
        "kubepods/pod1/ctr/cpu.max": "max 100000",
        "kubepods/pod1/cpu.max": "150000 100000",
        "kubepods/cpu.max": "400000 100000",
    }
    assert quota_cores(V2_PROC, reader(files), ROOT) == pytest.approx(1.5)


def test_no_quota_anywhere_is_none() -> None:
    assert quota_cores(V2_PROC, reader({"kubepods/cpu.max": "max 100000"}), ROOT) is None
    assert quota_cores("", reader({}), ROOT) is None


def test_threads_follow_the_quota_within_the_visible_cores() -> None:
    assert threads_for(0.2, 2) == 1
    assert threads_for(1.5, 8) == 1
    assert threads_for(3.0, 8) == 3
    assert threads_for(16.0, 8) == 8
    assert threads_for(None, 8) == 8


def test_an_explicit_omp_num_threads_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert cpu_limit.apply() is None
