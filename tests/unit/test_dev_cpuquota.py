"""CPU quotas of simulated nodes: detection, file text, which pods, /proc parsing (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cascade_dev import cpuquota as q


def test_flavour_prefers_a_unified_root_that_offers_cpu() -> None:
    assert q.flavour_of("cpuset cpu io memory pids\n", v1_has_cfs=False) == q.V2
    assert q.flavour_of("cpuset cpu io\n", v1_has_cfs=True) == q.V2
    # hybrid host (this machine): the unified mount offers no cpu, v1's cpu hierarchy does
    assert q.flavour_of(None, v1_has_cfs=True) == q.V1
    assert q.flavour_of("hugetlb\n", v1_has_cfs=True) == q.V1
    assert q.flavour_of("cpuset io\n", v1_has_cfs=False) is None
    assert q.flavour_of(None, v1_has_cfs=False) is None


def test_cpuset_is_not_cpu() -> None:
    assert q.flavour_of("cpuset memory\n", v1_has_cfs=False) is None


def test_v1_writes_period_then_quota() -> None:
    assert q.quota_files(q.V1, 0.25) == [
        ("cpu.cfs_period_us", "100000"),
        ("cpu.cfs_quota_us", "25000"),
    ]
    assert q.quota_files(q.V1, 2) == [
        ("cpu.cfs_period_us", "100000"),
        ("cpu.cfs_quota_us", "200000"),
    ]
    assert q.quota_files(q.V1, None)[-1] == ("cpu.cfs_quota_us", "-1")


def test_v2_writes_cpu_max() -> None:
    assert q.quota_files(q.V2, 0.5) == [("cpu.max", "50000 100000")]
    assert q.quota_files(q.V2, None) == [("cpu.max", "max 100000")]
    assert q.base_files(q.V2) == [("cgroup.subtree_control", "+cpu")]
    assert q.base_files(q.V1) == []


def test_quota_reads_back() -> None:
    for flavour in (q.V1, q.V2):
        for cores in (0.25, 1.5, None):
            assert q.parse_quota(flavour, dict(q.quota_files(flavour, cores))) == cores
    assert set(dict(q.quota_files(q.V1, 1))) == set(q.quota_file_names(q.V1))
    assert set(dict(q.quota_files(q.V2, 1))) == set(q.quota_file_names(q.V2))


@pytest.mark.parametrize("bad", [0.0, -1.0, 0.005, float("nan"), float("inf")])
def test_cores_below_the_kernel_floor_are_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="--node-cpu"):
        q.check_cores(bad)
    assert q.parse_cores(str(bad)) is None


def test_label_text_round_trips() -> None:
    assert [q.format_cores(x) for x in (0.25, 0.5, 2.0, 1.25)] == ["0.25", "0.5", "2", "1.25"]
    assert q.parse_cores("0.25") == 0.25
    assert q.parse_cores(0.5) == 0.5
    assert q.parse_cores(None) is None
    assert q.parse_cores("") is None
    assert q.parse_cores("lots") is None


def test_groups_sit_under_cascades_own_group() -> None:
    h = q.Hierarchy(q.V1, Path("/sys/fs/cgroup/cpu"))
    assert h.base == Path("/sys/fs/cgroup/cpu/cascade-dev")
    assert h.group("cascade-node-1") == Path("/sys/fs/cgroup/cpu/cascade-dev/cascade-node-1")
    for bad in ("", "..", "a/b", "."):
        with pytest.raises(ValueError):
            h.group(bad)


def test_control_plane_pods_run_unconfined() -> None:
    def pod(component: str | None) -> dict[str, object]:
        labels = {"app.kubernetes.io/component": component} if component else {}
        return {"metadata": {"labels": labels}}

    assert q.confined(pod("worker"))
    assert q.confined(pod(None))  # a bare pod (a busy loop, a profile job) is node work
    assert q.confined({})
    assert not q.confined(pod("gateway"))
    assert not q.confined(pod("operator"))


def test_own_group_per_flavour() -> None:
    v1_host = "9:name=systemd:/\n4:memory:/x\n2:cpuacct:/\n1:cpu:/agent\n0::/\n"
    assert q.own_group(q.V1, v1_host) == "/agent"
    assert q.own_group(q.V1, "3:cpu,cpuacct:/system.slice/a.service\n") == (
        "/system.slice/a.service"
    )
    assert q.own_group(q.V2, "0::/user.slice/session-1.scope\n") == "/user.slice/session-1.scope"
    assert q.own_group(q.V2, v1_host) == "/"
    assert q.own_group(q.V1, "") == "/"


def test_session_and_pid_parsing() -> None:
    # pid (comm with ") " inside) state ppid pgrp session ...
    stat = "4242 (py (x) y) S 1 4242 4240 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 777 0"
    assert q.session_of(stat) == 4240
    assert q.session_of("") is None
    assert q.parse_pids("12\n34\n\n") == [12, 34]
    assert q.parse_stat("nr_periods 10\nnr_throttled 4\nthrottled_time 99\n") == {
        "nr_periods": 10,
        "nr_throttled": 4,
        "throttled_time": 99,
    }
    assert q.v2_root_delegates_cpu("cpuset cpu io memory\n")
    assert not q.v2_root_delegates_cpu("cpuset io memory\n")


def test_a_container_with_a_readiness_probe_is_confined_from_ready() -> None:
    probe = {"httpGet": {"path": "/readyz", "port": 8080}}
    assert q.confined_from_ready({"name": "w", "readinessProbe": probe})
    assert not q.confined_from_ready({"name": "w"})


def test_thread_env_is_the_quotas_whole_cores() -> None:
    assert q.thread_env(0.2, 2) == {"OMP_NUM_THREADS": "1"}
    assert q.thread_env(2.5, 8) == {"OMP_NUM_THREADS": "2"}
    assert q.thread_env(16.0, 8) == {"OMP_NUM_THREADS": "8"}
